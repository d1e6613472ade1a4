"""``archivist search QUERY``: find the messages that answer a question."""

from __future__ import annotations

import click

from ..read.search import PRESETS
from .common import Context, at_option, claim_when, emit_json, parse_at, pass_ctx


def print_hits(hits: list) -> None:
    """A readable listing: rank, score, id, date, speaker → addressees, text."""
    if not hits:
        click.echo("(no matches)")
    for i, h in enumerate(hits, 1):
        m = h.message
        to = f" → {', '.join(m.addressees)}" if m.addressees else ""
        caption = "".join(f" [{a.kind}: {a.caption}]" for a in m.attachments if a.caption)
        click.echo(
            f"{i:>2}. {h.score:.4f}  {m.conversation}/{m.id}  {m.timestamp:%Y-%m-%d}  "
            f"{m.speaker}{to}: {m.text}{caption}"
        )
        for c in h.claims:
            click.echo(f"      claim [{c.kind}, {claim_when(c)}] {c.speaker}: {c.text}")


@click.command()
@click.argument("query")
@click.option("--person", help="Only messages this person sent or received.")
@click.option("--conversation", help="Only this conversation.")
@click.option("--speaker", help="Only messages this person sent.")
@click.option("-k", "k", default=10, show_default=True, type=click.IntRange(1, 1000))
@click.option("--preset", type=click.Choice(list(PRESETS)), help="Retrieval recipe.")
@at_option()
@click.option("--json", "as_json", is_flag=True, help="Print hits as JSON.")
@pass_ctx
def search(
    ctx: Context,
    query: str,
    person: str | None,
    conversation: str | None,
    speaker: str | None,
    k: int,
    preset: str | None,
    at: str | None,
    as_json: bool,
) -> None:
    """Search memory for QUERY (hybrid keyword + vector retrieval)."""
    when = parse_at(at)
    hits = ctx.memory.search(
        query,
        person=person,
        conversation=conversation,
        speaker=speaker,
        k=k,
        preset=preset,
        at=when,
    )
    if as_json:
        emit_json({"query": query, "hits": [h.to_dict() for h in hits]})
    else:
        print_hits(hits)


def register(cli: click.Group) -> None:
    cli.add_command(search)
