"""``archivist ingest FILE``: load conversations into the store."""

from __future__ import annotations

import time
from pathlib import Path

import click

from ..load import FORMATS, load_file
from .common import Context, emit_json, pass_ctx
from .progress import progress_bar


@click.command()
@click.argument("files", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--format", "fmt", type=click.Choice(FORMATS), help="Input format (default: detect).")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON summary.")
@pass_ctx
def ingest(ctx: Context, files: tuple[Path, ...], fmt: str | None, as_json: bool) -> None:
    """Ingest conversation FILES (LoCoMo, LongMemEval, JSONL or OpenAI chat JSON).

    Each file is validated completely before anything is stored; each
    conversation is stored in one transaction, so re-running after an
    interruption finishes the job without duplicates.
    """
    loaded = [(path, load_file(path, fmt)) for path in files]  # validate all before storing
    summary = []
    for path, convs in loaded:
        total = sum(len(c.messages) for c in convs)
        t0 = time.perf_counter()
        with progress_bar(f"ingest {path.name}", total, enabled=not as_json) as advance:
            results = ctx.memory.add(convs, progress=advance)
        seconds = time.perf_counter() - t0
        added = sum(r.added for r in results)
        summary.append(
            {
                "file": str(path),
                "conversations": len(convs),
                "messages": total,
                "added": added,
                "unchanged": sum(r.unchanged for r in results),
                "seconds": round(seconds, 3),
            }
        )
        if not as_json:
            click.echo(
                f"{path}: {len(convs)} conversation(s), {total} messages, {added} new "
                f"({seconds:.1f} s)"
            )
    if as_json:
        emit_json({"db": str(ctx.settings.resolved_db_path()), "files": summary})


def register(cli: click.Group) -> None:
    cli.add_command(ingest)
