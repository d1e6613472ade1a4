"""``archivist export`` / ``archivist import``: a memory as JSON Lines, between backends."""

from __future__ import annotations

from pathlib import Path

import click

from .common import Context, emit_json, pass_ctx


@click.command("export")
@click.option("--conversation", help="Only this conversation.")
@click.option(
    "-o", "--output", type=click.Path(dir_okay=False, path_type=Path), help="File (default stdout)."
)
@pass_ctx
def export(ctx: Context, conversation: str | None, output: Path | None) -> None:
    """Write messages and declared identities as JSONL (derived memory is rebuilt on import)."""
    lines = ctx.memory.export_jsonl(conversation)
    if output is None:
        for line in lines:
            click.echo(line, nl=False)
        return
    n = 0
    with output.open("w", encoding="utf-8") as f:
        for line in lines:
            f.write(line)
            n += 1
    click.echo(f"wrote {n} lines to {output}", err=True)


@click.command("import")
@click.argument("path", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--json", "as_json", is_flag=True)
@pass_ctx
def import_(ctx: Context, path: Path, as_json: bool) -> None:
    """Store an export (nothing if any line is bad), then re-derive and consolidate."""
    result = ctx.open(create=True).import_jsonl(path.read_text(encoding="utf-8"), source=str(path))
    if as_json:
        emit_json(result)
        return
    click.echo(
        f"{path}: {result['conversations']} conversation(s), {result['messages_added']} messages "
        f"added ({result['messages_unchanged']} already stored), "
        f"{result['identities']} declared identities"
    )


def register(cli: click.Group) -> None:
    cli.add_command(export)
    cli.add_command(import_)
