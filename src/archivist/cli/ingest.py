"""``archivist ingest FILE``: load conversations into the store."""

from __future__ import annotations

import time
from pathlib import Path

import click

from ..load import FORMATS, load_file
from .common import Context, emit_json, pass_ctx
from .progress import progress_bar


def _choose_archivist(ctx: Context, llm_model: str | None, no_llm: bool) -> None:
    """--llm MODEL (an OpenAI-compatible endpoint) or --no-llm over the configured archivist."""
    if no_llm and llm_model:
        raise click.UsageError("--llm and --no-llm exclude each other")
    if no_llm:
        ctx.settings = ctx.settings.with_(llm="none")
    elif llm_model:
        ctx.settings = ctx.settings.with_(
            llm="openai",
            llm_model=llm_model,
            llm_base_url=ctx.settings.llm_base_url or "https://api.openai.com/v1",
        )


@click.command()
@click.argument("files", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--format", "fmt", type=click.Choice(FORMATS), help="Input format (default: detect).")
@click.option(
    "--llm",
    "llm_model",
    metavar="MODEL",
    help="Extract with this model on the OpenAI-compatible endpoint "
    "($ARCHIVIST_LLM_BASE_URL, default https://api.openai.com/v1).",
)
@click.option("--no-llm", is_flag=True, help="Use the heuristic archivist even if an LLM is set.")
@click.option("--no-extract", is_flag=True, help="Store messages only; run `rebuild` later.")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON summary.")
@pass_ctx
def ingest(
    ctx: Context,
    files: tuple[Path, ...],
    fmt: str | None,
    llm_model: str | None,
    no_llm: bool,
    no_extract: bool,
    as_json: bool,
) -> None:
    """Ingest conversation FILES (LoCoMo, LongMemEval, JSONL or OpenAI chat JSON).

    Every file is validated completely before anything is stored: its format,
    the bounds (dates in 1900..2200, sessions up to 2**31-1, no NUL bytes or
    lone surrogates) and, against the store, that no stored message would get
    other content. Storing is then one transaction per conversation (not one
    for all), so re-running after an interruption finishes the job without
    duplicates.
    """
    _choose_archivist(ctx, llm_model, no_llm)
    loaded = [(path, load_file(path, fmt)) for path in files]  # validate all before storing
    ctx.open(create=True).check_new(
        [c for _, convs in loaded for c in convs]
    )  # and against the store
    summary = []
    for path, convs in loaded:
        total = sum(len(c.messages) for c in convs)
        t0 = time.perf_counter()
        with progress_bar(f"ingest {path.name}", total, enabled=not as_json) as advance:
            results = ctx.memory.add(convs, progress=advance, extract=False)
        if not no_extract:
            with progress_bar(
                f"archivist ({ctx.memory.archivist.name})", total, enabled=not as_json
            ) as advance:
                report = ctx.memory.extract([c.id for c in convs], progress=advance)
            jobs = ctx.memory.schedule_consolidation([c.id for c in convs])
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
                "extraction": None if no_extract else vars(report),
                "consolidation": None
                if no_extract
                else [{"kind": j.kind, "status": j.status, "error": j.error} for j in jobs],
            }
        )
        if not as_json:
            click.echo(
                f"{path}: {len(convs)} conversation(s), {total} messages, {added} new "
                f"({seconds:.1f} s)"
            )
            if not no_extract:
                click.echo(
                    f"  archivist {report.method}: {report.sessions} sessions "
                    f"({report.sessions_appended} appended to, {report.sessions_replaced} "
                    f"re-read, {report.sessions_skipped} up to date), "
                    f"{report.episodes} episodes, {report.claims} claims "
                    f"({report.rejected} rejected, {report.fallbacks} heuristic fallbacks)"
                )
                ran = ", ".join(f"{j.kind} {j.status}" for j in jobs)
                click.echo(f"  consolidation: {ran or 'queued for later (see `archivist jobs`)'}")
    if as_json:
        emit_json(
            {
                "db": str(ctx.settings.resolved_db_path()),
                "files": summary,
                "llm": ctx.memory.llm_summary(),
            }
        )


def register(cli: click.Group) -> None:
    cli.add_command(ingest)
