"""``archivist serve``: the REST API and the OpenAI-compatible proxy in one server."""

from __future__ import annotations

from pathlib import Path

import click

from .common import Context, pass_ctx, workers_option

LOOPBACK = ("127.0.0.1", "::1", "localhost")


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=8080, show_default=True, type=click.IntRange(0, 65535))
@click.option(
    "--data-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Tenant stores, <dir>/<tenant>.db (default: $ARCHIVIST_DATA_DIR or the user data dir).",
)
@click.option(
    "--keys-file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help='JSON {"tenant": "key"} (also $ARCHIVIST_SERVER_KEYS="tenant:key,...").',
)
@click.option("--upstream", help="Upstream base URL (default: $ARCHIVIST_UPSTREAM_BASE_URL).")
@click.option("--upstream-model", help="Send every chat to this model upstream.")
@click.option(
    "--archivist-llm",
    type=click.Choice(["upstream"]),
    help="Background archivists use the upstream endpoint (with --archivist-model).",
)
@click.option("--archivist-model", help="The upstream model the archivists use.")
@click.option("--context-budget", type=click.IntRange(0), help="Tokens of injected context.")
@click.option("--drift-guard/--no-drift-guard", default=None, help="Regenerate drifting replies.")
@click.option("--open", "open_access", is_flag=True, help="No keys: one tenant, 'default'.")
@click.option(
    "--allow-host",
    "allowed_hosts",
    multiple=True,
    metavar="NAME",
    help="A name this server answers to besides loopback's (repeat; $ARCHIVIST_ALLOWED_HOSTS). "
    "Any other Host is refused where no key protects memory.",
)
@workers_option(
    "Server processes on the one port, each with its own store connections and "
    "background worker (for PostgreSQL; a SQLite store serialises their writes)."
)
@click.option("--log-level", default="info", show_default=True)
@pass_ctx
def serve(
    ctx: Context,
    host: str,
    port: int,
    data_dir: Path | None,
    keys_file: Path | None,
    upstream: str | None,
    upstream_model: str | None,
    archivist_llm: str | None,
    archivist_model: str | None,
    context_budget: int | None,
    drift_guard: bool | None,
    open_access: bool,
    allowed_hosts: tuple[str, ...],
    workers: int,
    log_level: str,
) -> None:
    """Serve memory over HTTP: REST under /v1/memory, chat proxy at /v1/chat/completions.

    API docs at /docs. Upstream key: $ARCHIVIST_UPSTREAM_API_KEY.
    """
    try:
        import uvicorn

        from ..server.app import ServerSettings, create_app
        from ..server.tenants import load_keys_file
    except ImportError as e:
        raise click.UsageError(
            f"{e.name} is missing: pip install 'archivist[server]' "
            "(from a clone: pip install '.[server]')"
        ) from e
    settings = ServerSettings.from_env(
        memory=ctx.settings,
        data_dir=data_dir,
        upstream_base_url=upstream,
        upstream_model=upstream_model,
        archivist_llm=archivist_llm,
        archivist_model=archivist_model,
        context_budget=context_budget,
        drift_guard=drift_guard,
        open_access=open_access or None,
        allowed_hosts=allowed_hosts or None,
    )
    if keys_file is not None:
        settings = ServerSettings(**{**settings.__dict__, "keys": load_keys_file(keys_file)})
    if not settings.keys and not settings.open_access:
        raise click.UsageError(
            "no API keys: pass --keys-file, set ARCHIVIST_SERVER_KEYS, or --open"
        )
    if settings.open_access and host not in LOOPBACK:
        raise click.UsageError(
            f"--open serves every memory without keys, so it listens on loopback only "
            f"({', '.join(LOOPBACK)}), not {host}: configure API keys to serve on {host}"
        )
    click.echo(
        f"archivist on http://{host}:{port} (docs /docs); data in {settings.resolved_data_dir()}"
        + (f"; {workers} processes" if workers > 1 else ""),
        err=True,
    )
    if workers > 1:
        from ..server.workers import serve_workers

        serve_workers(settings, host, port, workers, log_level)
        return
    uvicorn.run(create_app(settings), host=host, port=port, log_level=log_level)


@click.command()
@click.option("--port", default=8090, show_default=True, type=click.IntRange(0, 65535))
@click.option(
    "--api",
    is_flag=True,
    help="Also serve the REST API (/v1/memory, /docs) and the chat proxy, without keys.",
)
@click.option("--log-level", default="warning", show_default=True)
@pass_ctx
def ui(ctx: Context, port: int, api: bool, log_level: str) -> None:
    """Browse and correct a local store (--db) in your browser, on 127.0.0.1 only.

    The memory browser of `archivist serve`, over this one store and without
    keys, so it never listens beyond this machine and answers only to loopback
    names; it serves the browser alone unless --api is given.
    """
    try:
        import uvicorn

        from ..server.app import ServerSettings, create_app
    except ImportError as e:
        raise click.UsageError(
            f"{e.name} is missing: pip install 'archivist[server]' "
            "(from a clone: pip install '.[server]')"
        ) from e
    memory = ctx.open()  # a store that does not exist is an error naming it
    path = ctx.settings.resolved_db_path()
    settings = ServerSettings.from_env(
        memory=ctx.settings, data_dir=path.parent, open_access=True, serve_api=api, keys=()
    )
    app = create_app(settings, memory_factory=lambda tenant, _path: memory)
    click.echo(f"memory browser for {path} on http://127.0.0.1:{port}/", err=True)
    uvicorn.run(app, host="127.0.0.1", port=port, log_level=log_level)


def register(cli: click.Group) -> None:
    cli.add_command(serve)
    cli.add_command(ui)
