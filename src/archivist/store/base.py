"""The domain-level Store protocol every backend implements.

Callers speak in messages, filters and rowids; SQL dialects stay inside the
backends. ``rowid`` is the store's internal integer key for a message.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol, runtime_checkable

import numpy as np

from ..model import (
    Claim,
    ClaimEvent,
    Conflict,
    Conversation,
    Decision,
    Entity,
    Episode,
    Job,
    Message,
    Person,
    Scene,
    Summary,
)
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


@dataclass(frozen=True)
class ExtractionMark:
    """How far the archivist read one session: its first ``n_messages``, ending at
    ``last_message`` (None when recorded before the store kept it), by ``method``."""

    n_messages: int
    last_message: str | None
    method: str


@dataclass
class AddResult:
    """Outcome of adding one conversation."""

    conversation: str
    added: int = 0
    unchanged: int = 0
    vectors_added: int = 0
    added_ids: list[str] = field(default_factory=list)


@dataclass
class ReconcileBatch:
    """One conversation's reconciliation, written in one transaction.

    ``updates``: claim id -> (status, replaced_by, closed_at); ``entities``: new
    (id None) or changed entities with the claim ids that mention them, their
    keyword text and embedded-text hash; ``reconciled``: claims now judged.
    """

    conversation: str
    updates: dict[int, tuple[str, int | None, datetime | None]]
    events: list[ClaimEvent]
    conflicts: list[Conflict]
    entities: list[tuple[Entity, tuple[int, ...], str, str]]
    reconciled: list[int]
    model: str
    vectors: dict[str, np.ndarray] = field(default_factory=dict)


class ReconcileStore(Protocol):
    """Layers 1-2 (store/sqlite_reconcile.py): entities, claim history, conflicts."""

    def claims_to_reconcile(self, conversation: str) -> tuple[list[Claim], list[Claim]]: ...

    def claim_vectors(self, model: str, ids: Iterable[int]) -> dict[int, np.ndarray]: ...

    def save_reconciliation(self, batch: ReconcileBatch) -> None: ...

    def reset_reconciliation(self, conversation: str) -> None: ...

    def list_entities(
        self,
        conversation: str | None = None,
        owner: str | None = None,
        name: str | None = None,
        limit: int = 1000,
    ) -> list[Entity]: ...

    def entity_claims(self, entity_id: int, current_only: bool = True) -> list[Claim]: ...

    def claim_history(self, claim_id: int) -> list[ClaimEvent]: ...

    def claim_histories(self, claim_ids: Iterable[int]) -> dict[int, list[ClaimEvent]]: ...

    def list_conflicts(
        self, conversation: str | None = None, subject: str | None = None, limit: int = 1000
    ) -> list[Conflict]: ...

    def reconcile_stats(self) -> dict: ...

    # entity links for recall (read/links.py); only the conversation filter applies here

    def entity_search(self, text: str, filters: Filters, limit: int) -> list[Entity]: ...

    def entity_claim_ids(
        self, entity_ids: Iterable[int], per_entity: int
    ) -> dict[int, list[int]]: ...

    def claim_entity_ids(self, claim_ids: Iterable[int]) -> dict[int, list[int]]: ...


class PeopleStore(Protocol):
    """Layer 3 (store/sqlite_people.py): persons across conversations, identity decisions."""

    def ensure_identities(self, conversations: Sequence[str] | None = None) -> int: ...

    def persons(self) -> list[Person]: ...

    def identity_message_counts(self) -> dict[tuple[str, str], int]: ...

    def declared_identities(self) -> list[tuple[str, str, str, str]]: ...

    def declare_identity(
        self, conversation: str, name: str, user_id: str
    ) -> list[tuple[str, str]] | None: ...

    def merge_persons(self, keep: str, drop: str) -> None: ...

    def add_decision(
        self,
        decision: Decision,
        fingerprint: str = "",
        merge: tuple[str, str] | None = None,
    ) -> int: ...

    def decisions(self, kind: str | None = None) -> list[Decision]: ...

    def decision_keys(self, kind: str) -> set[tuple[str, str, str, str]]: ...


class ConsolidationStore(Protocol):
    """Consolidation output (store/sqlite_consolidate.py): scenes, summaries, dossiers,
    key info, context log and usefulness scores."""

    def scene_rows(self, conversation: str) -> list[tuple[Scene, np.ndarray | None, str]]: ...

    def list_scenes(self, conversation: str | None = None) -> list[Scene]: ...

    def episode_vectors(self, model: str, episode_ids: Iterable[int]) -> dict[int, np.ndarray]: ...

    def scene_search(
        self, query: np.ndarray, filters: Filters, limit: int
    ) -> list[tuple[int, float]]: ...

    def scene_message_rowids(self, scene_ids: Iterable[int]) -> dict[int, list[int]]: ...

    def dossier_texts(self, filters: Filters, limit: int) -> list[tuple[int, str]]: ...

    def save_scenes(
        self,
        conversation: str,
        scenes: Sequence[tuple[Scene, np.ndarray, str]],
        delete: Iterable[int] = (),
    ) -> list[int]: ...

    def list_summaries(
        self, conversation: str | None = None, level: int | None = None
    ) -> list[Summary]: ...

    def summary_rows(
        self, conversation: str | None = None, level: int | None = None
    ) -> list[tuple[Summary, str]]: ...

    def replace_summaries(
        self,
        conversation: str,
        level: int,
        delete: Iterable[int],
        add: Sequence[tuple[Summary, str]],
    ) -> list[int]: ...

    def dossier_states(self, conversation: str | None = None) -> list[tuple[int, str, str]]: ...

    def current_entity_claims(self, entity_ids: Iterable[int]) -> dict[int, list[Claim]]: ...

    def save_dossiers(self, rows: Iterable[tuple[int, str, str]]) -> int: ...

    def entity_dossier(self, entity_id: int) -> str | None: ...

    def key_info_states(
        self, conversation: str | None = None
    ) -> list[tuple[str, str, str, list[tuple[str, str]]]]: ...

    def self_claims(self, identities: Iterable[tuple[str, str]]) -> list[Claim]: ...

    def save_key_info(self, rows: Iterable[tuple[str, str, str]]) -> int: ...

    def person_key_info(self, person_id: str) -> str | None: ...

    def log_context(
        self,
        person: str | None,
        conversation: str | None,
        items: Sequence[tuple[str, str | int, str]],
        reply: str,
    ) -> int: ...

    def unreviewed_context(
        self, conversation: str | None = None, limit: int = 200
    ) -> list[tuple[int, list[tuple[str, str, str]], str]]: ...

    def record_usefulness(
        self, log_ids: Iterable[int], outcomes: Iterable[tuple[str, str, bool]]
    ) -> None: ...

    def usefulness_scores(self, kind: str, ids: Iterable[str | int]) -> dict[str | int, float]: ...


class JobStore(Protocol):
    """The durable background queue (store/sqlite_jobs.py; driven by jobs.py)."""

    def enqueue_job(
        self, kind: str, key: str, payload: dict, not_before: float | None = None
    ) -> int | None: ...

    def take_job(self, now: float, lease_s: float, max_attempts: int) -> Job | None: ...

    def finish_job(
        self,
        job_id: int,
        status: str,
        result: dict,
        error: str = "",
        retry_at: float | None = None,
    ) -> None: ...

    def list_jobs(self, status: str | None = None, limit: int = 100) -> list[Job]: ...

    def job_counts(self) -> dict[str, int]: ...

    def meta(self, key: str) -> str | None: ...

    def set_meta(self, key: str, value: str) -> None: ...


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

    def messages_without_vectors(self, conversation: str) -> dict[str, str]: ...

    def fill_message_vectors(
        self, conversation: str, model: str, vectors: dict[str, np.ndarray]
    ) -> int: ...

    def extraction_marks(self, conversation: str) -> dict[int, ExtractionMark]: ...

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
        last_message: str | None = None,
        append_after: ExtractionMark | None = None,
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

    def claims_for_messages(self, rowids: Iterable[int]) -> dict[int, list[Claim]]: ...

    def list_episodes(
        self, conversation: str | None = None, limit: int = 100, offset: int = 0
    ) -> list[Episode]: ...

    def close(self) -> None: ...
