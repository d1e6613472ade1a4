"""``archivist ask QUESTION``: an answer from memory with its evidence, or an abstention."""

from __future__ import annotations

import click

from .common import Context, at_option, emit_json, parse_at, pass_ctx


@click.command()
@click.argument("question")
@click.option("--person", help="Only memory of what this person sent or received.")
@click.option("--conversation", help="Only this conversation.")
@click.option("-k", "k", default=10, show_default=True, type=click.IntRange(1, 100))
@at_option()
@click.option("--json", "as_json", is_flag=True, help="Print the answer as JSON.")
@pass_ctx
def ask(
    ctx: Context,
    question: str,
    person: str | None,
    conversation: str | None,
    k: int,
    at: str | None,
    as_json: bool,
) -> None:
    """Answer QUESTION from memory, citing evidence, or abstain and say why."""
    when = parse_at(at)
    mem = ctx.memory
    a = mem.ask(question, person=person, conversation=conversation, k=k, at=when)
    if as_json:
        emit_json(a.to_dict())
        return
    click.echo(("abstain: " if a.abstain else "") + a.answer)
    if a.reason:
        click.echo(f"reason: {a.reason}")
    if a.quote:
        said = f" ({a.said_by}, {a.said_at:%Y-%m-%d})" if a.said_by and a.said_at else ""
        click.echo(f"quote: {a.quote}{said}")
    for cid, mid in a.evidence:
        m = mem.get(cid, mid)
        click.echo(f"evidence: {cid}/{mid} {m.timestamp:%Y-%m-%d} {m.speaker}: {m.text}")
    click.echo(f"confidence: {a.confidence:.2f} ({a.method})")


def register(cli: click.Group) -> None:
    cli.add_command(ask)
