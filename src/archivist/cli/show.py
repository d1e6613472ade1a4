"""``archivist show claims|entities|episodes`` and ``archivist rebuild``."""

from __future__ import annotations

import click

from .common import Context, claim_when, emit_json, pass_ctx


def _listing(person_help: str | None = None):
    """The options every listing shares: a person (when it has one), a conversation, a
    limit and JSON output."""

    def wrap(fn):
        fn = click.option("--json", "as_json", is_flag=True)(fn)
        fn = click.option("--limit", default=50, show_default=True, type=click.IntRange(1, 100000))(
            fn
        )
        fn = click.option("--conversation", help="Only this conversation.")(fn)
        return click.option("--person", help=person_help)(fn) if person_help else fn

    return wrap


def _first(rows: list, limit: int, what: str) -> list:
    """``rows`` (read with one more than ``limit``) cut to ``limit``, saying so on stderr
    with how to see more, so a listing never stops short silently."""
    if len(rows) <= limit:
        return rows
    click.echo(f"(the first {limit} {what}; --limit {limit * 2} shows more)", err=True)
    return rows[:limit]


@click.group()
def show() -> None:
    """List derived memory: claims, entities, episodes."""


@show.command("claims")
@_listing("Claims said by or about this person.")
@pass_ctx
def claims(
    ctx: Context, person: str | None, conversation: str | None, limit: int, as_json: bool
) -> None:
    """Claims in time order, each with who said it and its evidence."""
    found = ctx.memory.claims(person=person, conversation=conversation, limit=limit + 1)
    found = _first(found, limit, "claims")
    if as_json:
        emit_json([c.to_dict() for c in found])
        return
    for c in found:
        about = f" about {c.subject}" if c.subject != c.speaker else ""
        click.echo(
            f"{claim_when(c)}  [{c.kind}/{c.source}] {c.speaker}{about}: {c.text}  "
            f"({c.conversation} {', '.join(c.evidence)})"
        )
    if not found:
        click.echo("(no claims: run `archivist ingest` or `archivist rebuild`)")


@show.command("entities")
@_listing("Entities as this speaker refers to them.")
@pass_ctx
def entities(
    ctx: Context, person: str | None, conversation: str | None, limit: int, as_json: bool
) -> None:
    """Resolved entities (one per speaker's referent), most mentioned first."""
    rows = ctx.memory.entities(person=person, conversation=conversation, limit=limit + 1)
    rows = _first(rows, limit, "entities")
    if as_json:
        emit_json([{**e.__dict__} for e in rows])
        return
    for e in rows:
        click.echo(
            f"{e.name} ({e.kind}): {e.mentions} mentions by {e.owner} in {e.conversation}"
            + (f"; aliases {', '.join(e.aliases)}" if e.aliases else "")
            + (f"; roles {', '.join(e.roles)}" if e.roles else "")
        )
    if not rows:
        click.echo("(no entities: run `archivist consolidate`)")


@show.command("episodes")
@_listing()
@pass_ctx
def episodes(ctx: Context, conversation: str | None, limit: int, as_json: bool) -> None:
    """Episodes with their narratives and message ranges."""
    eps = _first(ctx.memory.store.list_episodes(conversation, limit=limit + 1), limit, "episodes")
    if as_json:
        emit_json(
            [
                {
                    "id": e.id,
                    "conversation": e.conversation,
                    "session": e.session,
                    "messages": list(e.message_ids),
                    "start": e.start.isoformat(),
                    "end": e.end.isoformat(),
                    "title": e.title,
                    "narrative": e.narrative,
                    "method": e.method,
                    "qa": [list(p) for p in e.qa],
                }
                for e in eps
            ]
        )
        return
    for e in eps:
        click.echo(
            f"{e.conversation} s{e.session} {e.start:%Y-%m-%d %H:%M} "
            f"{e.message_ids[0]}…{e.message_ids[-1]} [{e.method}] {e.title}\n    {e.narrative}"
        )


@click.command()
@click.option("--conversation", help="Only this conversation.")
@click.option("--json", "as_json", is_flag=True)
@pass_ctx
def rebuild(ctx: Context, conversation: str | None, as_json: bool) -> None:
    """Re-derive episodes and claims from the message log."""
    report = ctx.memory.rebuild([conversation] if conversation else None, actor="cli")
    out = vars(report) | {"llm": ctx.memory.llm_summary()}
    if as_json:
        emit_json(out)
    else:
        click.echo(
            f"{report.method}: {report.sessions} sessions, {report.episodes} episodes, "
            f"{report.claims} claims ({report.rejected} rejected, {report.fallbacks} fallbacks)"
        )


def register(cli: click.Group) -> None:
    cli.add_command(show)
    cli.add_command(rebuild)
