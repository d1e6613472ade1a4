"""Pure data: the records archivist stores and returns.

No database code and no I/O lives here, so every layer (store, loaders,
retrieval, front ends) can share these types without import cycles.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

Role = Literal["user", "assistant", "system"]
ROLES: tuple[str, ...] = ("user", "assistant", "system")


def content_hash(*parts: str) -> str:
    """Stable sha256 over text parts; the identity used for idempotent ingestion."""
    h = hashlib.sha256()
    for part in parts:
        h.update(part.encode("utf-8"))
        h.update(b"\x1f")
    return h.hexdigest()


@dataclass(frozen=True)
class Attachment:
    """Non-text content of a message, kept as text we can index (e.g. an image caption)."""

    kind: str  # "image", "file", ...
    caption: str = ""
    url: str = ""

    def to_dict(self) -> dict:
        return {"kind": self.kind, "caption": self.caption, "url": self.url}


@dataclass(frozen=True)
class Message:
    """One utterance in the append-only log.

    ``id`` is the caller's message id (``D3:7``), unique within ``conversation``.
    ``timestamp`` must be timezone-aware: explicit time is a core promise.
    """

    id: str
    conversation: str
    session: int
    speaker: str
    text: str
    timestamp: datetime
    role: Role = "user"
    addressees: tuple[str, ...] = ()
    attachments: tuple[Attachment, ...] = ()
    session_start: datetime | None = None
    seq: int = 0  # position within the conversation, used for neighbour expansion

    @property
    def hash(self) -> str:
        """Content hash over everything that makes this message what it is."""
        return content_hash(
            self.conversation,
            self.id,
            self.speaker,
            self.role,
            self.text,
            self.timestamp.isoformat(),
            json.dumps([a.to_dict() for a in self.attachments], sort_keys=True),
        )

    def indexed_text(self) -> str:
        """Text that keyword and vector indexes see: the words plus captions of attachments."""
        captions = " ".join(f"[{a.kind}: {a.caption}]" for a in self.attachments if a.caption)
        return f"{self.text} {captions}".strip()


@dataclass(frozen=True)
class Session:
    """A contiguous sitting within a conversation, with its start time."""

    conversation: str
    number: int
    started_at: datetime | None = None


@dataclass(frozen=True)
class Conversation:
    """A conversation between participants: the unit of ingestion and of deletion."""

    id: str
    participants: tuple[str, ...] = ()
    messages: tuple[Message, ...] = ()
    sessions: tuple[Session, ...] = ()
    source: str = ""  # file or origin, for provenance and error messages


@dataclass(frozen=True)
class Hit:
    """A search result: the message, its fused score, and why it was found."""

    message: Message
    score: float
    sources: dict[str, int] = field(default_factory=dict)  # ranker name -> rank (1-based)
    expanded_from: str | None = None  # id of the hit whose neighbour this is
    claims: tuple[Claim, ...] = ()  # claims found by the query whose evidence this message is
    episode: Episode | None = None  # the episode the message belongs to, once extracted

    def to_dict(self) -> dict:
        m = self.message
        return {
            "id": m.id,
            "conversation": m.conversation,
            "session": m.session,
            "speaker": m.speaker,
            "addressees": list(m.addressees),
            "role": m.role,
            "timestamp": m.timestamp.isoformat(),
            "text": m.text,
            "attachments": [a.to_dict() for a in m.attachments],
            "score": round(self.score, 6),
            "provenance": {"rankers": self.sources, "expanded_from": self.expanded_from},
            "claims": [
                {
                    "id": c.id,
                    "text": c.text,
                    "speaker": c.speaker,
                    "subject": c.subject,
                    "kind": c.kind,
                    "source": c.source,
                    "evidence": list(c.evidence),
                    "valid_from": c.valid_from.isoformat() if c.valid_from else None,
                    "valid_to": c.valid_to.isoformat() if c.valid_to else None,
                }
                for c in self.claims
            ],
            "episode": None
            if self.episode is None
            else {
                "id": self.episode.id,
                "title": self.episode.title,
                "narrative": self.episode.narrative,
                "messages": list(self.episode.message_ids),
            },
        }


# -- derived memory (rebuilt from the log) ------------------------------------------------

CLAIM_KINDS: tuple[str, ...] = (
    "fact",
    "event",
    "preference",
    "plan",  # objective or plan
    "question",  # open question
    "theory",
    "foresight",  # time-bounded state or plan that expires at valid_to
)
CLAIM_SOURCES: tuple[str, ...] = ("first_hand", "reported", "assistant_suggested")


@dataclass(frozen=True)
class EntityMention:
    """An entity named in a claim, as the claim's speaker refers to it."""

    name: str
    kind: str = "other"  # person, place, organisation, object, project, event, other
    aliases: tuple[str, ...] = ()
    role: str = ""  # e.g. "sister of Ana", "employer"
    state: str = ""  # e.g. "recovering", "sold"


@dataclass(frozen=True)
class Claim:
    """One atomic statement: what was said, who said it, about whom, when it holds.

    ``speaker`` is who asserted it (never empty); ``subject`` whom it is about.
    ``evidence`` holds message ids of ``conversation`` that support it (never
    empty). ``said_at`` is when it was said; ``valid_from``/``valid_to`` when
    it holds, resolved to absolute times at write time.
    """

    text: str
    speaker: str
    subject: str
    conversation: str
    evidence: tuple[str, ...]
    said_at: datetime
    kind: str = "fact"
    source: str = "first_hand"
    importance: int = 5
    salience: int = 5
    valid_from: datetime | None = None
    valid_to: datetime | None = None
    entities: tuple[EntityMention, ...] = ()
    evidence_claims: tuple[int, ...] = ()  # for theories: indexes of supporting claims
    method: str = "heuristic"  # "heuristic" or the model that extracted it
    episode: int | None = None  # store id of the episode, once stored
    id: int | None = None  # store id, once stored


@dataclass(frozen=True)
class Episode:
    """A topic-coherent stretch of one session, told as a third-person narrative."""

    conversation: str
    session: int
    message_ids: tuple[str, ...]
    start: datetime
    end: datetime
    narrative: str = ""
    title: str = ""
    method: str = "heuristic"
    qa: tuple[tuple[str, str], ...] = ()  # question/answer pairs the episode answers
    id: int | None = None
