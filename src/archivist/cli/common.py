"""What every CLI command shares: the context object and JSON output."""

from __future__ import annotations

import json

import click

from ..config import Settings


class Context:
    """What every command receives: settings and a lazily opened Memory."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._memory = None

    @property
    def memory(self):
        if self._memory is None:
            from ..service import MemoryService

            self._memory = MemoryService(settings=self.settings)
        return self._memory

    def close(self) -> None:
        if self._memory is not None:
            self._memory.close()


pass_ctx = click.make_pass_decorator(Context)


def emit_json(obj: object) -> None:
    click.echo(json.dumps(obj, indent=2, ensure_ascii=False, default=str))
