"""Deterministic fakes of archivist's provider interfaces and of the clock, shipped for tests.

They implement the real interfaces (fakes, not mocks), so code under test runs
unchanged and needs no model, network, GPU or waiting: ``FakeEmbedder``
(embed/fake.py), ``FakeLLM`` (llm/fake.py), ``FakeJudge`` (judge/fake.py) and
``FixedClock``, a clock that moves only when told
(``MemoryService(clock=FixedClock(...))``).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from .embed.fake import FakeEmbedder
from .judge.fake import FakeJudge
from .llm.fake import FakeLLM, FakeResponse, Responder

__all__ = ["FakeEmbedder", "FakeJudge", "FakeLLM", "FakeResponse", "FixedClock", "Responder"]


class FixedClock:
    """A settable Clock: ``now`` stays where it is put (``set``) or moved (``advance``)."""

    def __init__(self, now: datetime | None = None) -> None:
        self.now = now or datetime(2024, 1, 1, tzinfo=UTC)
        if self.now.tzinfo is None:
            raise ValueError("FixedClock needs a timezone-aware datetime")

    def __repr__(self) -> str:
        return f"FixedClock({self.now.isoformat()})"

    def __call__(self) -> datetime:
        return self.now.astimezone(UTC)

    def set(self, now: datetime) -> None:
        if now.tzinfo is None:
            raise ValueError("FixedClock needs a timezone-aware datetime")
        self.now = now

    def advance(self, seconds: float = 0.0, **delta: float) -> datetime:
        """Move forward (``advance(30)``, ``advance(days=1)``); returns the new time."""
        self.now += timedelta(seconds=seconds, **delta)
        return self.now
