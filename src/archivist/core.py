"""Core: what the layers under MemoryService are handed instead of the service itself.

read/, write/, jobs.py and transfer.py take a Core (or less): one store, the
settings, the clock, the embedder and the chat model (each made on first use,
so building a Core loads nothing) and the LLM accounting. Its methods are what
every layer does the same way: embed texts through the store's vector cache,
make one cached, counted and rate-limited LLM call. It knows nothing above it;
MemoryService composes a Core with the read and write paths.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

from .clock import Clock, system_clock
from .config import Settings
from .embed import check_embedder, get_embedder
from .embed.base import Embedder
from .errors import EmbeddingError, EmbeddingMismatch, InputError
from .judge import Judge, judge_for
from .lang.text import person_key
from .llm import check_llm, get_chat_model
from .llm.accounting import Accounting
from .llm.base import ChatModel
from .llm.cache import StoreResponseCache
from .llm.structured import call_structured
from .store.base import Store
from .store.registry import open_store

Progress = Callable[[int], None]
EMBED_STEP = 512  # texts per embed_batch call: the embedder sorts each by length, so fewer pad


def check_settings(settings: Settings) -> None:
    """Refuse provider names the registries do not know, or providers missing a setting."""
    check_embedder(settings)
    check_llm(settings)


@dataclass(frozen=True, eq=False)
class Core:
    """The store, settings, clock, models and LLM accounting one memory works with.

    ``given_embedder`` / ``given_llm``: models chosen by the caller; when None
    they are made from ``settings`` on first use (``llm`` stays None without one).
    """

    store: Store
    settings: Settings = field(default_factory=Settings)
    clock: Clock = system_clock
    given_embedder: Embedder | None = None
    given_llm: ChatModel | None = None
    given_judge: Judge | None = None
    ledger: Accounting = field(default_factory=Accounting)
    limiter: threading.BoundedSemaphore = field(init=False, repr=False)
    _names: dict[str, list[str]] = field(init=False, repr=False, default_factory=dict)
    # embedding models this store was seen to be indexed with (a store's model never
    # changes once set; each write checks it again in its own transaction)
    _models_seen: set[str] = field(init=False, repr=False, default_factory=set)

    def __post_init__(self) -> None:
        check_settings(self.settings)
        limiter = threading.BoundedSemaphore(self.settings.llm_concurrency)
        object.__setattr__(self, "limiter", limiter)

    @classmethod
    def open(cls, settings: Settings, store: Store | None = None, **kw: Any) -> Core:
        """A Core over ``store``, else over the store ``settings`` names; the settings are
        checked first, so a misconfigured memory opens (and creates) nothing."""
        check_settings(settings)
        if store is None:
            store = open_store(settings, kw.get("clock", system_clock))
        return cls(store, settings, **kw)

    @cached_property
    def embedder(self) -> Embedder:
        """The embedder, made on first use (the bundled model loads lazily)."""
        if self.given_embedder is not None:
            return self.given_embedder
        return get_embedder(self.settings)

    @cached_property
    def llm(self) -> ChatModel | None:
        """The chat model, or None (heuristic mode)."""
        if self.given_llm is not None:
            return self.given_llm
        return get_chat_model(self.settings)

    @cached_property
    def judge(self) -> Judge | None:
        """Who judges meaning (archivist.judge): the LLM when one is configured, the
        trained model when the settings choose it; None for the phrase rules."""
        if self.given_judge is not None:
            return self.given_judge
        call = None
        if self.llm is not None:

            def call(prompt: Any, messages: list[dict], output_type: Any) -> Any:
                return self.llm_call(prompt, messages, output_type)

        return judge_for(self.settings, call)

    # -- people's names (routing and ranking read them on every search) ---------------

    def people(self) -> list[str]:
        """Everyone who sent or received a stored message; cached until ``forget_people``."""
        if "people" not in self._names:
            self._names["people"] = [p for p, _ in self.store.people()]
        return self._names["people"]

    def takes_part(self, name: str) -> bool:
        """Whether ``name`` sent or received a stored message, rather than being only
        talked about (a sister, a flatmate): a search scoped to them finds nothing."""
        key = person_key(name)
        return any(person_key(p) == key for p in self.people())

    def forget_people(self) -> None:
        """Messages were added or deleted: read the names again next time."""
        self._names.clear()

    # -- vectors ------------------------------------------------------------------------

    def check_embed_model(self, embedder: Embedder) -> None:
        """Refuse to query one model's index with another model's vectors."""
        if embedder.name in self._models_seen:
            return
        stored = self.store.embed_model()
        if stored == embedder.name:
            self._models_seen.add(stored)
        elif stored is not None:
            raise EmbeddingMismatch(
                f"this store's vectors were made by {stored!r} but the embedder is "
                f"{embedder.name!r}; use the same embedder or a new store"
            )

    def embed_missing(
        self, texts: dict[str, str], progress: Progress | None = None
    ) -> tuple[dict[str, np.ndarray], int]:
        """Vectors for text hashes, reusing the store's cache; only misses hit the model."""
        model = self.embedder.name
        have = self.store.cached_vectors(model, texts)
        todo = [(h, t) for h, t in texts.items() if h not in have]
        out = dict(have)
        for i in range(0, len(todo), EMBED_STEP):
            chunk = todo[i : i + EMBED_STEP]
            vecs = self.embedder.embed_batch([t for _, t in chunk])
            if vecs.shape[0] != len(chunk):
                raise EmbeddingError(
                    f"{model} returned {vecs.shape[0]} vectors for {len(chunk)} texts"
                )
            out.update(zip((h for h, _ in chunk), vecs, strict=True))
            if progress:
                progress(len(chunk))
        return out, len(todo)

    # -- the LLM --------------------------------------------------------------------------

    @property
    def response_cache(self) -> StoreResponseCache:
        """Validated LLM answers, kept in the store so none is paid for twice."""
        return StoreResponseCache(self.store)

    def llm_call(
        self,
        prompt: Any,
        messages: list[dict],
        output_type: Any,
        *,
        model: ChatModel | None = None,
        max_attempts: int = 3,
        backoff: float = 1.0,
    ) -> Any:
        """One schema-constrained call for a prompt module, cached in the store and counted.

        Raises LLMError when the model fails after repair and retries; callers
        fall back to their heuristic. Usage is persisted to the store at once,
        so background jobs count in ``archivist stats`` too. ``model``: another
        model than the configured one (a benchmark's answer model, a caller's
        judge); it shares the cache and the ledger, not the limiter.
        """
        call = {
            "task": prompt.NAME,
            "version": prompt.VERSION,
            "messages": messages,
            "output_type": output_type,
            "cache": self.response_cache,
            "ledger": self.ledger,
            "max_attempts": max_attempts,
            "backoff": backoff,
        }
        if model is not None and model is not self.llm:
            return call_structured(model, **call)
        if self.llm is None:
            raise InputError(f"{prompt.NAME} needs an LLM and none is configured")
        before = self.ledger.summary()
        try:
            return call_structured(self.llm, limiter=self.limiter, **call)
        finally:
            self.persist_llm_usage(before)

    def persist_llm_usage(self, before: dict[str, dict]) -> None:
        """Add what the ledger counted since ``before`` (a ``ledger.summary()``) to the store."""
        if self.llm is None:
            return
        delta = {
            task: {k: v - before.get(task, {}).get(k, 0) for k, v in row.items()}
            for task, row in self.ledger.summary().items()
        }
        delta = {t: row for t, row in delta.items() if any(row.values())}
        if delta:
            self.store.add_llm_usage(self.llm.name, delta)
