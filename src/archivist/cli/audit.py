"""``archivist audit``: the deletion audit log, newest first.

Every deletion from any front end (this CLI, Python, mem0, REST, MCP, the browser)
leaves one line: who, when, what kind, how many messages and claims, and its scope
(ids, a conversation or person name), never the deleted text.
"""

from __future__ import annotations

import json

import click

from .common import Context, emit_json, pass_ctx


@click.command()
@click.option("--limit", type=click.IntRange(min=1), default=50, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
@pass_ctx
def audit(ctx: Context, limit: int, as_json: bool) -> None:
    """Show what was deleted, by whom and when (never what the deleted text said)."""
    entries = ctx.memory.audit_log(limit)
    if as_json:
        emit_json([e.to_dict() for e in entries])
        return
    if not entries:
        click.echo("no deletions recorded")
        return
    for e in entries:
        scope = json.dumps(e.scope, ensure_ascii=False, sort_keys=True) if e.scope else "-"
        click.echo(
            f"#{e.id} {e.at:%Y-%m-%d %H:%M:%S} {e.actor}: {e.kind} {scope} "
            f"({e.messages} messages, {e.claims} claims)"
        )


def register(cli: click.Group) -> None:
    cli.add_command(audit)
