"""What LLM work cost, per task: calls, cache hits, tokens, time, failures, retries.

Benchmarks report "LLM calls per ingested message" and token spend from this,
so every structured call records here exactly once, success or not.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields


@dataclass
class TaskStats:
    """Counters of one task.

    ``calls`` counts model calls actually made (retries included); ``retries``
    the calls beyond the first of a request; ``cache_hits`` the requests
    answered from the cache with no call; ``failures`` the requests that ended
    in an error; tokens and ``seconds`` are summed over calls.
    """

    calls: int = 0
    cache_hits: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    seconds: float = 0.0
    failures: int = 0
    retries: int = 0

    def add(self, other: TaskStats) -> None:
        """Add another task's counters into these."""
        for f in fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))


class Accounting:
    """Thread-safe per-task counters that can be merged and round-trip through a dict."""

    def __init__(self) -> None:
        self._tasks: dict[str, TaskStats] = {}
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"Accounting({self.totals()})"

    def record(
        self,
        task: str,
        *,
        input_tokens: int,
        output_tokens: int,
        seconds: float,
        cache_hit: bool = False,
        failed: bool = False,
        retried: int = 0,
    ) -> None:
        """Count one request: a cache hit makes no call, otherwise 1 + ``retried`` calls."""
        if retried < 0 or input_tokens < 0 or output_tokens < 0 or seconds < 0:
            raise ValueError("token counts, seconds and retried must be >= 0")
        delta = TaskStats(
            calls=0 if cache_hit else 1 + retried,
            cache_hits=int(cache_hit),
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            seconds=seconds,
            failures=int(failed),
            retries=0 if cache_hit else retried,
        )
        with self._lock:
            self._tasks.setdefault(task, TaskStats()).add(delta)

    def summary(self) -> dict[str, dict]:
        """Counters per task name, as plain dicts (a snapshot, safe to keep)."""
        with self._lock:
            return {task: asdict(stats) for task, stats in sorted(self._tasks.items())}

    def totals(self) -> dict:
        """All tasks' counters summed."""
        total = TaskStats()
        with self._lock:
            for stats in self._tasks.values():
                total.add(stats)
        return asdict(total)

    def merge(self, other: Accounting) -> Accounting:
        """Add another ledger's counters into this one (e.g. from worker threads); returns self."""
        for task, counters in other.summary().items():
            with self._lock:
                self._tasks.setdefault(task, TaskStats()).add(TaskStats(**counters))
        return self

    def to_dict(self) -> dict[str, dict]:
        """The same as ``summary()``: JSON-serialisable."""
        return self.summary()

    @classmethod
    def from_dict(cls, data: Mapping[str, Mapping[str, float]]) -> Accounting:
        """Rebuild a ledger from ``to_dict()`` output; unknown counter names are an error."""
        ledger = cls()
        known = {f.name for f in fields(TaskStats)}
        for task, counters in data.items():
            if unknown := set(counters) - known:
                raise ValueError(f"unknown counters for task {task!r}: {sorted(unknown)}")
            ledger._tasks[task] = TaskStats(**counters)  # type: ignore[arg-type]
        return ledger
