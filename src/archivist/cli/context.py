"""``archivist context QUESTION`` and ``archivist select PERSON``: what memory hands over."""

from __future__ import annotations

import click

from ..read.select import VIEWS
from .common import Context, at_option, emit_json, parse_at, pass_ctx


@click.command()
@click.argument("question")
@click.option("--person", help="Whose turn it is (name or person id): their key info and claims.")
@click.option("--conversation", help="The conversation the turn belongs to.")
@click.option("--budget", default=1500, show_default=True, type=click.IntRange(1), help="Tokens.")
@at_option("The turn's time (ISO, with timezone; default: now).")
@click.option("--json", "as_json", is_flag=True, help="Print text and items as JSON.")
@pass_ctx
def context(
    ctx: Context,
    question: str,
    person: str | None,
    conversation: str | None,
    budget: int,
    at: str | None,
    as_json: bool,
) -> None:
    """Assemble the memory context an assistant would get before answering QUESTION."""
    found = ctx.memory.context(
        question,
        person=person,
        conversation=conversation,
        budget_tokens=budget,
        at=parse_at(at),
    )
    if as_json:
        emit_json(found.to_dict())
        return
    click.echo(found.text or "(nothing in memory for this turn)")
    click.echo(f"\n-- {len(found.items)} items, ~{found.tokens}/{found.budget} tokens")
    for item in found.items:
        click.echo(f"   {item.kind:<8} {item.id:<24} {item.tokens:>4} tok  score {item.score:.3f}")


@click.command()
@click.argument("person")
@click.option(
    "--view",
    type=click.Choice(list(VIEWS)),
    default="all_involving",
    show_default=True,
    help="Which messages count (goldfish: none).",
)
@click.option("--memorize-to", help='Plain-language criteria, e.g. "requirements, API design".')
@click.option("--at-most", type=click.IntRange(0), help="Keep at most N (system messages stay).")
@click.option("--conversation", help="Only this conversation.")
@click.option("--json", "as_json", is_flag=True)
@pass_ctx
def select(
    ctx: Context,
    person: str,
    view: str,
    memorize_to: str | None,
    at_most: int | None,
    conversation: str | None,
    as_json: bool,
) -> None:
    """The messages PERSON's memory holds under a view, criteria and cap (reads only)."""
    found = ctx.memory.select(
        person, view, conversation=conversation, memorize_to=memorize_to, at_most=at_most
    )
    if as_json:
        emit_json(
            {
                "person": person,
                "view": found.view,
                "method": found.method,
                "candidates": found.candidates,
                "messages": [
                    {
                        "conversation": m.conversation,
                        "id": m.id,
                        "speaker": m.speaker,
                        "role": m.role,
                        "timestamp": m.timestamp.isoformat(),
                        "text": m.text,
                    }
                    for m in found
                ],
            }
        )
        return
    for m in found:
        to = f" → {', '.join(m.addressees)}" if m.addressees else ""
        click.echo(
            f"{m.conversation}/{m.id}  {m.timestamp:%Y-%m-%d %H:%M}  {m.speaker}{to}: {m.text}"
        )
    click.echo(f"-- {len(found)} of {found.candidates} messages; view {found.view}; {found.method}")


def register(cli: click.Group) -> None:
    cli.add_command(context)
    cli.add_command(select)
