"""The one place library code learns the time: an injectable clock.

Everything that stamps a row, resolves "today" or judges what holds "now"
asks a ``Clock`` (``MemoryService(clock=...)``; ``archivist.testing.FixedClock``
in tests), never ``datetime.now()`` directly, so time-dependent behaviour is
reproducible. Durations use ``time.monotonic`` and need no clock.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Protocol


class Clock(Protocol):
    """Returns the current time as an aware UTC datetime."""

    def __call__(self) -> datetime: ...


def system_clock() -> datetime:
    """The machine's wall clock, in UTC."""
    return datetime.now(UTC)
