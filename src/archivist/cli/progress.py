"""Progress bars on stderr that step aside for ``--json`` and non-terminals."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn


@contextmanager
def progress_bar(label: str, total: int, enabled: bool = True) -> Iterator:
    """Yields ``advance(n)``; draws a bar on stderr only when it is a terminal."""
    console = Console(stderr=True)
    if not enabled or not console.is_terminal:
        yield lambda n=1: None
        return
    with Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    ) as bar:
        task = bar.add_task(label, total=total)
        yield lambda n=1: bar.advance(task, n)


class StagedProgress:
    """One bar per stage, replaced when the stage changes; called as ``(stage, done, total)``.

    Use it as a context manager (or call ``close``) so the last bar is cleared.
    """

    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled
        self._stage: str | None = None
        self._cm = None
        self._advance = None
        self._done = 0

    def __call__(self, stage: str, done: int, total: int) -> None:
        if stage != self._stage:
            self.close()
            self._stage, self._done = stage, 0
            self._cm = progress_bar(stage, total, self.enabled)
            self._advance = self._cm.__enter__()
        self._advance(done - self._done)
        self._done = done

    def __enter__(self) -> StagedProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._cm is not None:
            self._cm.__exit__(None, None, None)
            self._cm = None
