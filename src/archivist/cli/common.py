"""What every CLI command shares: the context object and JSON output."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from typing import Any

import click

from ..config import Settings
from ..errors import NotFound
from ..model import parse_at as _parse_at


class Context:
    """What every command receives: settings and a lazily opened Memory."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._memory = None

    @property
    def memory(self):
        """The store, opened on first use; a SQLite file that does not exist is an error
        naming it (a mistyped ``--db`` would otherwise read an empty new store)."""
        return self.open()

    def open(self, create: bool = False):
        """The store; ``create``: a command that writes (ingest, import, bench, mcp) may
        make a new one."""
        if self._memory is None:
            from ..service import MemoryService

            path = self.settings.resolved_db_path()
            if not create and self.settings.store == "sqlite" and not path.exists():
                raise NotFound(
                    f"no store at {path}: `archivist ingest FILE` creates one, or pass --db"
                )
            self._memory = MemoryService(settings=self.settings)
        return self._memory

    def close(self) -> None:
        if self._memory is not None:
            self._memory.close()


pass_ctx = click.make_pass_decorator(Context)


def emit_json(obj: object) -> None:
    click.echo(json.dumps(obj, indent=2, ensure_ascii=False, default=str))


def claim_when(c) -> str:
    """When a claim holds, for listings: "2023-05-07", or "2023-05-08 to 2023-05-18";
    a plan called off before it began: "2024-10-01, called off 2024-05-20"."""
    start = c.valid_from or c.said_at
    if c.called_off:
        return f"{start:%Y-%m-%d}, called off {c.valid_to:%Y-%m-%d}"
    if c.valid_to is None or (c.valid_to - start).days <= 1:
        return f"{start:%Y-%m-%d}"
    return f"{start:%Y-%m-%d} to {c.valid_to:%Y-%m-%d}"


AT_HELP = "Memory as it stood then (ISO with timezone, or a date: as it ended; default: now)."


def at_option(help: str = AT_HELP) -> Callable[[Any], Any]:
    """The ``--at ISO`` option every "as of" command shares; read it with ``parse_at``."""
    return click.option("--at", "at", metavar="ISO", help=help)


MAX_WORKERS = 64  # server processes one command may start


def workers_option(help: str) -> Callable[[Any], Any]:
    """The ``--workers N`` option of ``serve`` and ``bench load``: server processes on one
    port (server/workers.py), one by default."""
    return click.option(
        "--workers",
        default=1,
        show_default=True,
        type=click.IntRange(1, MAX_WORKERS),
        help=help,
    )


def parse_at(value: str | None) -> datetime | None:
    """``--at`` as a datetime (None: not given); bad input is one InputError line."""
    return _parse_at(value, "--at")
