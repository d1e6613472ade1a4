"""Where validated LLM answers are kept, so the same question is never paid for twice.

The key (see ``structured.cache_key``) covers model, task, prompt version,
messages and schema, so a changed prompt or model simply misses.
``StoreResponseCache`` keeps them in a store's ``llm_cache`` table (they outlive
the process); ``MemoryResponseCache`` is for one process.
"""

from __future__ import annotations

import threading
from typing import Protocol, runtime_checkable


@runtime_checkable
class ResponseCache(Protocol):
    """Validated answer texts by key; ``task`` and ``model`` are kept for inspection only."""

    def get(self, key: str) -> str | None:
        """The stored answer text, or None on a miss."""
        ...

    def put(self, key: str, task: str, model: str, value: str) -> None:
        """Store (or replace) the answer text for ``key``."""
        ...


class MemoryResponseCache:
    """A dict behind a lock: enough for tests and one-off runs."""

    def __init__(self) -> None:
        self.entries: dict[str, tuple[str, str, str]] = {}  # key -> (task, model, value)
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self.entries)

    def get(self, key: str) -> str | None:
        """The stored answer text, or None on a miss."""
        with self._lock:
            entry = self.entries.get(key)
        return entry[2] if entry else None

    def put(self, key: str, task: str, model: str, value: str) -> None:
        """Store (or replace) the answer text for ``key``."""
        with self._lock:
            self.entries[key] = (task, model, value)


class CacheTable(Protocol):
    """The two store methods a persistent cache needs (every Store has them)."""

    def llm_cache_get(self, key: str) -> str | None: ...

    def llm_cache_put(self, key: str, task: str, model: str, value: str) -> None: ...


class StoreResponseCache:
    """A store's llm_cache table as a ResponseCache."""

    def __init__(self, store: CacheTable) -> None:
        self.store = store

    def get(self, key: str) -> str | None:
        return self.store.llm_cache_get(key)

    def put(self, key: str, task: str, model: str, value: str) -> None:
        self.store.llm_cache_put(key, task, model, value)
