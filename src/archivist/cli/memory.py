"""``archivist scenes`` and ``archivist summaries``: what consolidation built."""

from __future__ import annotations

import click

from ..model import Scene, Summary
from .common import Context, emit_json, pass_ctx


def scene_dict(s: Scene) -> dict:
    return {
        "id": s.id,
        "conversation": s.conversation,
        "title": s.title,
        "summary": s.summary,
        "episodes": list(s.episode_ids),
        "start": s.start.isoformat(),
        "end": s.end.isoformat(),
        "method": s.method,
    }


def summary_dict(s: Summary) -> dict:
    return {
        "id": s.id,
        "conversation": s.conversation,
        "level": s.level,
        "start": s.start.isoformat(),
        "end": s.end.isoformat(),
        "covers": list(s.covers),
        "text": s.text,
        "method": s.method,
    }


@click.command()
@click.option("--conversation", help="Only this conversation.")
@click.option("--json", "as_json", is_flag=True)
@pass_ctx
def scenes(ctx: Context, conversation: str | None, as_json: bool) -> None:
    """Themes: episodes clustered by meaning and time."""
    found = ctx.memory.scenes(conversation)
    if as_json:
        emit_json([scene_dict(s) for s in found])
        return
    for s in found:
        click.echo(
            f"{s.conversation} #{s.id} {s.start:%Y-%m-%d}…{s.end:%Y-%m-%d} "
            f"({len(s.episode_ids)} episodes) [{s.method}] {s.title}\n    {s.summary}"
        )
    if not found:
        click.echo("(no scenes: the consolidation jobs have not run yet)")


@click.command()
@click.option("--conversation", help="Only this conversation.")
@click.option("--level", type=click.IntRange(1), help="Only this level (1 = sessions).")
@click.option("--json", "as_json", is_flag=True)
@pass_ctx
def summaries(ctx: Context, conversation: str | None, level: int | None, as_json: bool) -> None:
    """Message summaries: one per session (level 1), rolled up in higher levels."""
    found = ctx.memory.summaries(conversation, level)
    if as_json:
        emit_json([summary_dict(s) for s in found])
        return
    for s in found:
        what = f"session {s.covers[0]}" if s.level == 1 else f"{len(s.covers)} summaries"
        click.echo(
            f"{s.conversation} L{s.level} {s.start:%Y-%m-%d}…{s.end:%Y-%m-%d} ({what}) "
            f"[{s.method}]\n    {s.text}"
        )
    if not found:
        click.echo("(no summaries: the consolidation jobs have not run yet)")


def register(cli: click.Group) -> None:
    cli.add_command(scenes)
    cli.add_command(summaries)
