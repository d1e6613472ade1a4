"""The ``archivist`` command: global options, error handling, and the command groups.

Each command group lives in its own module and registers itself here. Errors
from the ArchivistError tree become one readable line on stderr and the
error's exit code; anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from ..config import Settings
from ..errors import ArchivistError
from .common import Context


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--db",
    type=click.Path(dir_okay=False, path_type=Path),
    help="SQLite store file (default: $ARCHIVIST_DB or a file in the user data dir).",
)
@click.option(
    "--embedder",
    type=click.Choice(["local", "openai", "fake"]),
    help="Embedding provider (default: local bundled model).",
)
@click.version_option(package_name="archivist")
@click.pass_context
def cli(ctx: click.Context, db: Path | None, embedder: str | None) -> None:
    """archivist: long-term, speaker-attributed memory for LLM assistants."""
    settings = Settings.from_env(db_path=db, embedder=embedder)
    obj = Context(settings)
    ctx.obj = obj
    ctx.call_on_close(obj.close)


def _register() -> None:
    from . import (
        ask,
        audit,
        bench,
        bench_load,
        context,
        demo,
        forget,
        ingest,
        mcp,
        memory,
        people,
        profile,
        reconcile,
        search,
        serve,
        show,
        stats,
        train,
        transfer,
    )

    for module in (
        ingest,
        search,
        ask,
        context,
        stats,
        show,
        reconcile,
        people,
        profile,
        memory,
        forget,
        audit,
        mcp,
        serve,
        transfer,
        demo,
        bench,
        bench_load,
        train,
    ):
        module.register(cli)


_register()


def main(argv: list[str] | None = None) -> None:
    """Console entry point: run the CLI, turning archivist errors into exit codes."""
    try:
        cli.main(args=argv, standalone_mode=False)
    except click.exceptions.Exit as e:
        sys.exit(e.exit_code)
    except click.ClickException as e:
        e.show()
        sys.exit(e.exit_code)
    except click.exceptions.Abort:
        click.echo("Aborted.", err=True)
        sys.exit(130)
    except ArchivistError as e:
        click.echo(f"error: {e}", err=True)
        sys.exit(e.exit_code)
    except KeyboardInterrupt:
        click.echo("Interrupted; every finished conversation is stored.", err=True)
        sys.exit(130)
