"""The domain-level Store protocol every backend implements.

Callers speak in messages, filters and rowids; SQL dialects stay inside the
backends. ``rowid`` is the store's internal integer key for a message.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import numpy as np

from ..model import Claim, Conversation, Episode, Message
from .sql import Filters


@dataclass(frozen=True)
class IndexedMessage:
    """A message plus what the indexes need: keyword text and the hash of its embedded text."""

    message: Message
    search_text: str
    embed_hash: str


@dataclass(frozen=True)
class IndexedClaim:
    """A claim plus its keyword text and the hash of its embedded text."""

    claim: Claim
    episode_index: int  # position of its episode in the same save call
    search_text: str
    embed_hash: str


@dataclass(frozen=True)
class IndexedEpisode:
    """An episode plus its keyword text and the hash of its embedded text (the narrative)."""

    episode: Episode
    search_text: str
    embed_hash: str


@dataclass
class AddResult:
    """Outcome of adding one conversation."""

    conversation: str
    added: int = 0
    unchanged: int = 0
    vectors_added: int = 0
    added_ids: list[str] = field(default_factory=list)


class ReconcileStore(Protocol):
    """Layers 1-2 (store/sqlite_reconcile.py): entities, claim history, conflicts."""


class PeopleStore(Protocol):
    """Layer 3 (store/sqlite_people.py): persons across conversations, identity decisions."""


class ConsolidationStore(Protocol):
    """Consolidation output (store/sqlite_consolidate.py): scenes, summaries, dossiers,
    key info, context log and usefulness scores."""


class JobStore(Protocol):
    """The durable background queue (store/sqlite_jobs.py; driven by jobs.py)."""


@runtime_checkable
class Store(ReconcileStore, PeopleStore, ConsolidationStore, JobStore, Protocol):
    """Durable message log with keyword and vector indexes, and the memory derived from it."""

    def add_conversation(
        self,
        conv: Conversation,
        rows: Sequence[IndexedMessage],
        model: str,
        vectors: dict[str, np.ndarray],
    ) -> AddResult: ...

    def existing_hashes(self, conversation: str) -> dict[str, str]: ...

    def embed_model(self) -> str | None: ...

    def cached_vectors(self, model: str, hashes: Iterable[str]) -> dict[str, np.ndarray]: ...

    def keyword_search(
        self, text: str, filters: Filters, limit: int
    ) -> list[tuple[int, float]]: ...

    def vector_search(
        self, model: str, query: np.ndarray, filters: Filters, limit: int
    ) -> list[tuple[int, float]]: ...

    def messages_by_rowid(self, rowids: Iterable[int]) -> dict[int, Message]: ...

    def filter_rowids(self, rowids: Iterable[int], filters: Filters) -> set[int]: ...

    def neighbours(
        self, rowid: int, before: int, after: int, filters: Filters | None = None
    ) -> list[tuple[int, Message]]: ...

    def conversation_messages(self, conversation: str) -> list[tuple[int, Message]]: ...

    def get_message(self, conversation: str, msg_id: str) -> Message | None: ...

    def conversations(self) -> list[dict]: ...

    def people(self) -> list[tuple[str, int]]: ...

    def delete_conversation(self, conversation: str) -> int: ...

    def delete_person(self, person: str) -> int: ...

    def stats(self) -> dict: ...

    # derived memory (episodes, claims, extraction state, LLM cache)

    def llm_cache_get(self, key: str) -> str | None: ...

    def llm_cache_put(self, key: str, task: str, model: str, value: str) -> None: ...

    def add_llm_usage(self, model: str, usage: dict[str, dict]) -> None: ...

    def llm_usage(self) -> dict[str, dict[str, dict]]: ...

    def extraction_state(self, conversation: str) -> dict[int, int]: ...

    def save_extraction(
        self,
        conversation: str,
        session: int,
        episodes: Sequence,
        claims: Sequence,
        model: str,
        vectors: dict[str, np.ndarray],
        *,
        n_messages: int,
        method: str,
        rejected: int = 0,
    ) -> list[int]: ...

    def clear_derived(self, conversation: str | None = None) -> None: ...

    def claim_keyword_search(
        self, text: str, filters: Filters, limit: int
    ) -> list[tuple[int, float]]: ...

    def claim_vector_search(
        self, model: str, query: np.ndarray, filters: Filters, limit: int
    ) -> list[tuple[int, float]]: ...

    def claims_by_id(self, ids: Iterable[int]) -> dict[int, Claim]: ...

    def episode_keyword_search(
        self, text: str, filters: Filters, limit: int
    ) -> list[tuple[int, float]]: ...

    def episode_vector_search(
        self, model: str, query: np.ndarray, filters: Filters, limit: int
    ) -> list[tuple[int, float]]: ...

    def episode_message_rowids(self, episode_ids: Iterable[int]) -> dict[int, list[int]]: ...

    def claim_evidence_rowids(self, claim_ids: Iterable[int]) -> dict[int, list[int]]: ...

    def list_claims(self, filters: Filters, limit: int = 100, offset: int = 0) -> list[Claim]: ...

    def episodes_for_messages(self, rowids: Iterable[int]) -> dict[int, Episode]: ...

    def list_episodes(
        self, conversation: str | None = None, limit: int = 100, offset: int = 0
    ) -> list[Episode]: ...

    def close(self) -> None: ...
