"""``archivist bench load``: the proxy under N concurrent chats on loopback."""

from __future__ import annotations

import tempfile
from pathlib import Path

import click

from ..errors import ConfigError
from .bench import _save, bench, save_option
from .common import Context, emit_json, pass_ctx, workers_option


@click.command("load")
@click.option("--chats", default=20, show_default=True, type=click.IntRange(1, 500))
@click.option("--turns", default=10, show_default=True, type=click.IntRange(1, 200))
@click.option("--latency-ms", default=20.0, show_default=True, help="Fake upstream's latency.")
@click.option(
    "--think-ms",
    default=0.0,
    show_default=True,
    type=click.FloatRange(0),
    help="Mean pause before each user turn (exponential; 0: chats send in lockstep).",
)
@click.option("--fail-rate", default=0.0, show_default=True, type=click.FloatRange(0, 0.9))
@click.option("--restart", is_flag=True, help="Restart the proxy when half the turns are done.")
@click.option("--stream", is_flag=True, help="Streaming chat completions.")
@click.option("--drift-guard", is_flag=True, help="Turn the drift guard on and count its cost.")
@click.option("--budget", default=1500, show_default=True, type=click.IntRange(0))
@click.option(
    "--chats-per-user",
    default=1,
    show_default=True,
    type=click.IntRange(1),
    help="Chats each user has: from 2 on the proxy injects the user's other chats.",
)
@click.option("--max-seconds", default=300.0, show_default=True, help="Stop the run after this.")
@workers_option(
    "Proxy processes on one port, as 'archivist serve --workers N' runs them (the "
    "store is the configured one: $ARCHIVIST_STORE=postgres for PostgreSQL)."
)
@click.option(
    "--data-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Where the tenant store goes (default: a temporary dir).",
)
@click.option(
    "--in-process",
    is_flag=True,
    help="Run the proxy in this process (sharing its interpreter lock with the clients).",
)
@click.option("--json", "as_json", is_flag=True, help="Print only the JSON result.")
@save_option
@pass_ctx
def load(
    ctx: Context,
    chats: int,
    turns: int,
    latency_ms: float,
    think_ms: float,
    fail_rate: float,
    restart: bool,
    stream: bool,
    drift_guard: bool,
    budget: int,
    chats_per_user: int,
    max_seconds: float,
    workers: int,
    data_dir: Path | None,
    in_process: bool,
    as_json: bool,
    save: Path | None,
) -> None:
    """Proxy latency added over direct calls (p50/p95) and messages stored vs sent."""
    try:
        import fastapi  # noqa: F401
        import uvicorn  # noqa: F401

        from ..bench.load import LoadConfig, load_table, run_load
    except ImportError as e:
        raise ConfigError(
            f"bench load needs the server: {e}; pip install 'archivist[server]' "
            "(from a clone: pip install '.[server]')"
        ) from e

    cfg = LoadConfig(
        chats=chats,
        turns=turns,
        latency_ms=latency_ms,
        think_ms=think_ms,
        fail_rate=fail_rate,
        restart=restart,
        stream=stream,
        drift_guard=drift_guard,
        context_budget=budget,
        chats_per_user=chats_per_user,
        max_seconds=max_seconds,
        workers=workers,
    )
    if workers > 1 and in_process:
        raise click.UsageError("--workers runs proxy processes: it cannot be --in-process")
    with tempfile.TemporaryDirectory(prefix="archivist-load-") as tmp:
        target = data_dir or Path(tmp)
        if (target / "bench.db").exists():
            raise click.UsageError(f"{target / 'bench.db'} exists; use an empty --data-dir")
        result = run_load(
            cfg, target, memory_settings=ctx.settings, separate_process=not in_process
        )
    if not as_json:
        click.echo(load_table(result))
        click.echo()
    emit_json(result)
    _save(result, save)


def register(cli: click.Group) -> None:
    bench.add_command(load)
