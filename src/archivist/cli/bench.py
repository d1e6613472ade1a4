"""``archivist bench …``: benchmarks that print figures beside same-run baselines."""

from __future__ import annotations

from pathlib import Path

import click

from .common import Context, emit_json, pass_ctx
from .progress import StagedProgress


@click.group()
def bench() -> None:
    """Benchmarks (LoCoMo retrieval, store scale)."""


def _parse_ks(value: str) -> tuple[int, ...]:
    try:
        ks = tuple(sorted({int(x) for x in value.split(",") if x.strip()}))
    except ValueError:
        raise click.BadParameter(f"expected comma-separated integers, got {value!r}") from None
    if not ks or min(ks) < 1:
        raise click.BadParameter("k values must be positive integers")
    return ks


@bench.command("locomo")
@click.argument("path", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--k", "ks", default="5,10,25", show_default=True, help="Comma-separated k values.")
@click.option("--no-llm", is_flag=True, help="Use the heuristic archivist even if an LLM is set.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object to stdout.")
@pass_ctx
def locomo(ctx: Context, path: Path, ks: str, no_llm: bool, as_json: bool) -> None:
    """Evidence recall@k on a LoCoMo file: archivist vs BM25, dense and plain RRF."""
    from ..bench.locomo import run_locomo
    from ..bench.report import locomo_table

    kvals = _parse_ks(ks)
    if no_llm:
        ctx.settings = ctx.settings.with_(llm="none")
    progress = StagedProgress(enabled=not as_json)
    try:
        result = run_locomo(ctx.memory, path, kvals, progress=progress)
    finally:
        progress.close()
    if as_json:
        emit_json(result)
    else:
        click.echo(locomo_table(result))


def register(cli: click.Group) -> None:
    cli.add_command(bench)


@bench.command("scale")
@click.option(
    "--sizes",
    default="10000,100000,1000000",
    show_default=True,
    help="Comma-separated store sizes (messages) to grow through.",
)
@click.option("--queries", default=100, show_default=True, type=click.IntRange(1, 10000))
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object to stdout.")
@pass_ctx
def scale(ctx: Context, sizes: str, queries: int, as_json: bool) -> None:
    """Search latency on a synthetic store as it grows (use a fresh --db)."""
    from ..bench.report import scale_table
    from ..bench.scale import run_scale

    progress = StagedProgress(enabled=not as_json)
    try:
        result = run_scale(ctx.memory, _parse_ks(sizes), queries, progress=progress)
    finally:
        progress.close()
    if as_json:
        emit_json(result)
    else:
        click.echo(scale_table(result))
