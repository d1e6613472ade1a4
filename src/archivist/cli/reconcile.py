"""``archivist consolidate``, ``timeline``, ``conflicts`` and ``jobs``: reconciliation's view."""

from __future__ import annotations

import click

from .common import Context, at_option, emit_json, parse_at, pass_ctx


@click.command()
@click.option("--conversation", help="Only this conversation (default: all).")
@click.option("--json", "as_json", is_flag=True)
@pass_ctx
def consolidate(ctx: Context, conversation: str | None, as_json: bool) -> None:
    """Run a consolidation round now: reconcile, people, scenes, summaries, dossiers, key info."""
    jobs = ctx.memory.consolidate(conversation)
    if as_json:
        emit_json(
            [
                {
                    "kind": j.kind,
                    "key": j.key,
                    "status": j.status,
                    "result": j.result,
                    "error": j.error,
                }
                for j in jobs
            ]
        )
        return
    llm = ctx.memory.llm
    click.echo(f"consolidation with {'LLM ' + llm.name if llm else 'heuristics only (no LLM)'}:")
    for j in jobs:
        what = (
            j.error
            or j.result.get("skipped")
            or ", ".join(f"{k} {v}" for k, v in j.result.items() if v)
        )
        click.echo(f"  {j.kind:<11} {j.status:<8} {j.payload.get('conversation', '*')}: {what}")
    if not jobs:
        click.echo("  nothing to do")


def _when(d) -> str:
    return f"{d:%Y-%m-%d}" if d else "…"


@click.command()
@click.argument("entity")
@click.option("--conversation", help="Only this conversation.")
@click.option("--owner", help="Only entities as this speaker refers to them.")
@at_option("Memory as it stood then: claims said by then, status as of then (ISO, timezone).")
@click.option("--json", "as_json", is_flag=True)
@pass_ctx
def timeline(
    ctx: Context,
    entity: str,
    conversation: str | None,
    owner: str | None,
    at: str | None,
    as_json: bool,
) -> None:
    """Claims about a person or entity over time: validity, who said it, what replaced it."""
    when = parse_at(at)
    rows = ctx.memory.timeline(entity, conversation=conversation, owner=owner, at=when)
    if as_json:
        emit_json([{**c.to_dict(), "history": [e.to_dict() for e in ev]} for c, ev in rows])
        return
    for c, events in rows:
        mark = {"current": " ", "superseded": "x", "duplicate": "="}.get(c.status, "?")
        start = c.valid_from or c.said_at
        if c.called_off:
            span = f"{_when(start)}, called off {_when(c.valid_to)}"
        else:
            span = f"{_when(start)} → {_when(c.valid_to)}"
        click.echo(
            f"{mark} {span}  "
            f"{c.speaker}: {c.text}  ({c.conversation} {', '.join(c.evidence)}; #{c.id})"
        )
        for e in events:
            click.echo(f"      {e.action} #{e.other} ({_when(e.at)})")


@click.command()
@click.option("--conversation", help="Only this conversation.")
@click.option("--subject", help="Only conflicts about this person.")
@click.option("--json", "as_json", is_flag=True)
@pass_ctx
def conflicts(ctx: Context, conversation: str | None, subject: str | None, as_json: bool) -> None:
    """The conflict log: attribute, old and new value, both times, resolution."""
    rows = ctx.memory.conflicts(conversation=conversation, subject=subject)
    if as_json:
        emit_json([{**c.__dict__} for c in rows])
        return
    for c in rows:
        click.echo(
            f"{_when(c.new_time)}  {c.subject} {c.attribute}: {c.old_value!r} "
            f"({_when(c.old_time)}) -> {c.new_value!r}  [{c.kind}, {c.resolution}, {c.method}] "
            f"claims #{c.old_claim} -> #{c.new_claim} ({c.conversation})"
        )
    if not rows:
        click.echo("(no conflicts)")


@click.command()
@click.option(
    "--status", type=click.Choice(["queued", "running", "done", "skipped", "failed"]), default=None
)
@click.option("--limit", default=50, show_default=True, type=click.IntRange(1, 100000))
@click.option("--json", "as_json", is_flag=True)
@pass_ctx
def jobs(ctx: Context, status: str | None, limit: int, as_json: bool) -> None:
    """The durable job queue, newest first."""
    rows = ctx.memory.store.list_jobs(status, limit)
    if as_json:
        emit_json([{**j.__dict__} for j in rows])
        return
    click.echo("jobs: " + ", ".join(f"{n} {s}" for s, n in sorted(ctx.memory.job_counts().items())))
    for j in rows:
        click.echo(f"  #{j.id} {j.kind:<11} {j.key:<30} {j.status:<8} {j.error}")


def register(cli: click.Group) -> None:
    for command in (consolidate, timeline, conflicts, jobs):
        cli.add_command(command)
