"""The records the service hands the store and gets back (no database code).

``rowid`` is the store's internal integer key for a message.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

import numpy as np

from ..model import Claim, ClaimEvent, Conflict, Entity, Episode, Message


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


@dataclass(frozen=True)
class ReconcileBasis:
    """What a reconciliation was decided from, checked again in its write transaction:
    the claims judged (``todo``, still unreconciled), how many reconciled claims of their
    speakers they were compared with (``done``), and the conversation's entities (count,
    highest id). Another writer changing any of these meanwhile makes the batch stale."""

    todo: tuple[int, ...]
    done: int
    entities: int
    top_entity: int


@dataclass
class ReconcileBatch:
    """One conversation's reconciliation, written in one transaction.

    ``updates``: claim id -> (status, replaced_by, closed_at); ``entities``: new
    (id None) or changed entities with the claim ids that mention them, their
    keyword text and embedded-text hash; ``reconciled``: claims now judged;
    ``basis``: what the decision was read from (None: written unchecked).
    """

    conversation: str
    updates: dict[int, tuple[str, int | None, datetime | None]]
    events: list[ClaimEvent]
    conflicts: list[Conflict]
    entities: list[tuple[Entity, tuple[int, ...], str, str]]
    reconciled: list[int]
    model: str
    vectors: dict[str, np.ndarray] = field(default_factory=dict)
    basis: ReconcileBasis | None = None
