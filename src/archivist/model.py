"""Pure data: the records archivist stores and returns.

No database code and no I/O lives here, so every layer (store, loaders,
retrieval, front ends) can share these types without import cycles.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, time
from typing import Literal

from .errors import InputError

TOKENS_PER_WORD = 1.3  # what a word of chat costs a model, on average (an estimate)


def estimate_tokens(text: str, per_word: float = TOKENS_PER_WORD) -> int:
    """Estimated tokens of ``text``: ``ceil(words × per_word)``."""
    return math.ceil(len(text.split()) * per_word)


Role = Literal["user", "assistant", "system"]
ROLES: tuple[str, ...] = ("user", "assistant", "system")

# Bounds every stored value must respect, checked at input (loaders, service):
# dates whose arithmetic never overflows, and numbers both backends can hold
# (PostgreSQL's session column is a 32-bit INTEGER, seq a BIGINT).
MIN_YEAR, MAX_YEAR = 1900, 2200
MAX_SESSION = 2**31 - 1
MAX_SEQ = 2**63 - 1
MAX_METADATA = 16_000  # characters of a message's metadata as JSON


def date_in_range(d: datetime) -> bool:
    """Is ``d`` within MIN_YEAR..MAX_YEAR, where time grounding's arithmetic is safe?"""
    return MIN_YEAR <= d.year <= MAX_YEAR


def check_at(at: datetime | None, name: str = "at") -> datetime | None:
    """``at`` if it is a usable "as of" time: timezone-aware and within the stored years."""
    if at is None:
        return None
    if not isinstance(at, datetime):
        raise InputError(f"{name} must be a datetime; got {at!r}")
    if at.tzinfo is None:
        raise InputError(f"{name} needs a timezone, e.g. 2023-06-01T12:00+00:00")
    if not date_in_range(at):
        raise InputError(f"{name} {at.isoformat()} is outside the years {MIN_YEAR}..{MAX_YEAR}")
    return at


def parse_at(value: str | None, name: str = "at", *, day_start: bool = False) -> datetime | None:
    """An ``at`` argument as every front end reads it (CLI, REST, MCP): ISO 8601 with a
    timezone, or a bare date ("2023-04-01": memory as it stood when that day ended, in
    UTC: what was said that day counts), or None when not given; bad input is one
    InputError line naming ``name``. A time without a timezone stays an error: which
    hour it means is the caller's to say. ``day_start``: a bare date is that day's start
    instead (a span corrected to begin on it)."""
    if value is None or not value.strip():
        return None
    text = value.strip()
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise InputError(f"{name} must be an ISO date or time; got {value!r}") from None
    if _BARE_DATE.fullmatch(text):
        when = datetime.combine(when.date(), time.min if day_start else time.max, tzinfo=UTC)
    return check_at(when, name)


_BARE_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")


def text_problem(value: str) -> str | None:
    """Why a text cannot be stored on both backends (NUL byte, lone surrogate), or None.

    NUL bytes are refused rather than stripped: PostgreSQL rejects them and
    SQLite keeps them, so refusing is the one rule both backends can follow.
    """
    if "\x00" in value:
        return "contains a NUL byte"
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as e:
        return f"contains a lone surrogate at character {e.start}"
    return None


def message_problem(m: Message) -> tuple[str, str] | None:
    """The first (field, problem) that keeps ``m`` out of the store, or None if it is fine."""
    for name in ("id", "conversation", "speaker", "text", "role"):
        if problem := text_problem(getattr(m, name)):
            return name, problem
    for i, name in enumerate(m.addressees):
        if problem := text_problem(name):
            return f"addressees[{i}]", problem
    for i, a in enumerate(m.attachments):
        for part in ("kind", "caption", "url"):
            if problem := text_problem(getattr(a, part)):
                return f"attachments[{i}].{part}", problem
    if m.metadata:
        if problem := metadata_problem(m.metadata):
            return "metadata", problem
    for name in ("timestamp", "session_start"):
        d = getattr(m, name)
        if d is not None and not date_in_range(d):
            return name, f"{d.isoformat()} is outside the years {MIN_YEAR}..{MAX_YEAR}"
    if isinstance(m.session, bool) or not 0 <= m.session <= MAX_SESSION:
        return "session", f"{m.session} is outside 0..{MAX_SESSION}"
    if not 0 <= m.seq <= MAX_SEQ:
        return "seq", f"{m.seq} is outside 0..{MAX_SEQ}"
    return None


def metadata_json(metadata: dict) -> str:
    """Metadata as stored: canonical JSON (keys sorted), "{}" when empty."""
    return json.dumps(metadata, sort_keys=True, ensure_ascii=False, allow_nan=False)


def metadata_problem(metadata: object) -> str | None:
    """Why ``metadata`` cannot be stored (not a JSON object of string keys, too big), or None."""
    if not isinstance(metadata, dict):
        return f"must be a JSON object (a dict); got {type(metadata).__name__}"
    try:
        text = metadata_json(metadata)
    except (TypeError, ValueError) as e:
        return f"must be JSON (strings, numbers, booleans, lists, objects): {e}"
    if len(text) > MAX_METADATA:
        return f"is {len(text)} characters as JSON; at most {MAX_METADATA}"
    return text_problem(text)


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
    # the caller's own labels (mem0's ``metadata``): stored, returned, filtered on
    metadata: dict = field(default_factory=dict, hash=False)

    @property
    def hash(self) -> str:
        """Content hash over everything that makes this message what it is (metadata only
        when there is some, so messages stored before it existed keep their hash)."""
        parts = [
            self.conversation,
            self.id,
            self.speaker,
            self.role,
            self.text,
            self.timestamp.isoformat(),
            json.dumps([a.to_dict() for a in self.attachments], sort_keys=True),
        ]
        if self.metadata:
            parts.append(metadata_json(self.metadata))
        return content_hash(*parts)

    def same_as_stored(self, stored_hash: str, stored_at: datetime) -> bool:
        """Is this the stored message, its time perhaps written with another UTC offset?

        The hash keeps the timestamp as written (changing it would make stored
        logs refuse their own re-ingestion), so the same instant under another
        offset is compared by re-hashing with the stored spelling of the time.
        """
        if self.hash == stored_hash:
            return True
        return (
            self.timestamp == stored_at and replace(self, timestamp=stored_at).hash == stored_hash
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
            "claims": [c.to_dict() for c in self.claims],
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
    "chatter",  # small talk the judge found nothing to remember in: searched, never a state
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
    # Reconciliation state (write/reconcile.py): "current", "superseded" (a newer
    # claim replaced it; valid_to closed) or "duplicate" (its evidence merged into
    # ``replaced_by``). Nothing is deleted; ``Memory.claim_history`` shows the path.
    status: str = "current"
    replaced_by: int | None = None
    # the person model's part (the judge's kind of the sentence: value, goal, state,
    # lesson, habit, preference, plan, event; "" unread): standing items are read by it
    facet: str = ""

    def holds_at(self, at: datetime) -> bool:
        """Was this claim known and still true at ``at``? The one rule of every "as of" read.

        Known: said by ``at``; memory as it stood then holds nothing said later.
        Still true: a foresight expires at ``valid_to``, and a claim superseded by
        a newer value was closed at ``valid_to`` (stores read the close date
        there: the newer value's start), so both held until then and not from
        then on. Nothing else ends a claim: a fact's or an event's ``valid_to``
        is part of what it says ("lived in Porto until 2020" stays true); a
        refined claim (superseded with no close date) is still true, only less
        precise; a duplicate is as true as the older claim it repeats; and a
        plan holds before its ``valid_from``, since it is known and relevant
        before it starts. Hiding refined or duplicate claims is a question of
        redundancy, left to the caller.
        """
        if self.said_at > at:
            return False
        ends = self.kind == "foresight" or self.status == "superseded"
        return not (ends and self.valid_to is not None and self.valid_to <= at)

    @property
    def called_off(self) -> bool:
        """Whether it stopped holding before it began: a plan called off ahead of its day
        ("Dublin marathon in October", then in May "Marathon is off"). Listings say so
        instead of showing a span that ends before it starts."""
        return self.valid_to is not None and self.valid_to < (self.valid_from or self.said_at)

    def to_dict(self) -> dict:
        """JSON-ready form, shared by the CLI, the servers and search hits."""
        iso = lambda d: d.isoformat() if d else None  # noqa: E731
        return {
            "id": self.id,
            "conversation": self.conversation,
            "text": self.text,
            "speaker": self.speaker,
            "subject": self.subject,
            "kind": self.kind,
            "source": self.source,
            "evidence": list(self.evidence),
            "said_at": self.said_at.isoformat(),
            "valid_from": iso(self.valid_from),
            "valid_to": iso(self.valid_to),
            "importance": self.importance,
            "salience": self.salience,
            "status": self.status,
            "replaced_by": self.replaced_by,
            "method": self.method,
            "facet": self.facet,
        }


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


CLAIM_STATUSES: tuple[str, ...] = ("current", "superseded", "duplicate")


@dataclass(frozen=True)
class ClaimEvent:
    """One step in a claim's history: created, merged a duplicate, refined, superseded."""

    claim: int
    action: str  # "created", "absorbed", "duplicate_of", "refined", "superseded", ...
    at: datetime  # when it happened in conversation time (the newer claim's said_at)
    other: int | None = None  # the other claim involved
    detail: dict = field(default_factory=dict)
    id: int | None = None

    def to_dict(self) -> dict:
        return {
            "action": self.action,
            "at": self.at.isoformat(),
            "other": self.other,
            **self.detail,
        }


@dataclass(frozen=True)
class Entity:
    """A person, place, organisation, object or project as one speaker refers to it.

    Entities belong to one conversation and one ``owner`` (the speaker whose
    mentions built it): Caroline's "nurse" and Melanie's "nurse" are two
    entities until evidence says otherwise.
    """

    conversation: str
    owner: str
    name: str
    kind: str = "other"
    aliases: tuple[str, ...] = ()
    roles: tuple[str, ...] = ()
    states: tuple[tuple[str, str], ...] = ()  # (ISO date, state) over time
    brief: str = ""  # two sentences: who or what it is
    dossier: str = ""  # capped summary of its current claims (consolidation)
    first_seen: datetime | None = None
    last_seen: datetime | None = None
    mentions: int = 0
    method: str = "heuristic"
    id: int | None = None


@dataclass(frozen=True)
class Conflict:
    """Two claims that cannot both hold, and how the conflict was resolved."""

    conversation: str
    subject: str
    attribute: str  # "job", "diet", "residence", "partner", ... or "statement"
    old_claim: int
    new_claim: int
    old_value: str
    new_value: str
    old_time: datetime
    new_time: datetime
    kind: str = "contradiction"  # "contradiction", "evolution", "correction"
    resolution: str = "newest_wins"  # what was done: newest_wins, oldest_wins, keep_both
    method: str = "heuristic"
    id: int | None = None


@dataclass(frozen=True)
class Person:
    """Someone across conversations: one or more (conversation, name) identities."""

    id: str
    name: str
    identities: tuple[tuple[str, str], ...] = ()  # (conversation, name as spoken there)
    declared: bool = False  # identity declared by the caller (same user id)
    key_info: str = ""


@dataclass(frozen=True)
class Decision:
    """An identity decision (MERGE or SEPARATE) with the reasons and evidence behind it."""

    kind: str  # "identity"
    a: str  # "conversation/name"
    b: str
    verdict: str  # "MERGE" or "SEPARATE"
    reasons: str
    evidence: tuple[str, ...] = ()  # message or claim references the reasons cite
    method: str = "heuristic"  # "declared", "no_llm", "agent:<model>"
    steps: tuple[dict, ...] = ()  # the agent's tool calls, for inspection
    created_at: datetime | None = None
    id: int | None = None


@dataclass(frozen=True)
class Scene:
    """A theme: episodes of a conversation clustered by meaning and time."""

    conversation: str
    title: str
    summary: str
    episode_ids: tuple[int, ...]
    start: datetime
    end: datetime
    method: str = "heuristic"
    id: int | None = None


@dataclass(frozen=True)
class Summary:
    """A message summary at a level: 1 = a session, 2 = a run of level-1 summaries, ..."""

    conversation: str
    level: int
    start: datetime
    end: datetime
    text: str
    covers: tuple[int, ...] = ()  # sessions (level 1) or summary ids of the level below
    method: str = "heuristic"
    id: int | None = None


@dataclass(frozen=True)
class Job:
    """A unit of background work on the durable queue (jobs.py)."""

    kind: str
    key: str  # idempotency key: (kind, key) is enqueued at most once
    payload: dict = field(default_factory=dict)
    status: str = "queued"  # queued, running, done, failed, skipped
    attempts: int = 0
    error: str = ""
    result: dict = field(default_factory=dict)
    id: int | None = None


AUDIT_KINDS: tuple[str, ...] = ("claim", "message", "conversation", "person", "reset", "rebuild")


@dataclass(frozen=True)
class AuditEntry:
    """One deletion, from whichever front end: who, when, what kind, how many, and its
    scope (ids, a conversation or person name), never the deleted text."""

    id: int
    at: datetime
    actor: str  # "python", "cli", "mem0", "mcp", "browser", "rest (<client>)", ...
    kind: str  # one of AUDIT_KINDS
    scope: dict = field(default_factory=dict)
    messages: int = 0  # messages deleted
    claims: int = 0  # claims deleted (for a rebuild: cleared, to be derived again)

    def to_dict(self) -> dict:
        return {
            "id": self.id,
            "at": self.at.isoformat(),
            "actor": self.actor,
            "kind": self.kind,
            "scope": self.scope,
            "messages": self.messages,
            "claims": self.claims,
        }


@dataclass(frozen=True)
class DeletedClaim:
    """What the store keeps of a deleted claim: ids and times, never its words, so a
    deleted memory id still answers its history."""

    id: int
    replaced_by: int | None  # the claim that superseded it, if one did
    method: str  # "user-correction": it was a user's correction of another claim
    said_at: datetime
    created_at: datetime
    deleted_at: datetime


MAX_ID = 2**63 - 1  # the largest key either backend stores


def checked_text(name: str, value: object, *, optional: bool = True) -> str | None:
    """``value`` if it is a string both backends can store (None passes when optional);
    else InputError naming ``name``: where caller strings enter, before they reach SQL."""
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise InputError(f"{name} must be a string; got {type(value).__name__}")
    if problem := text_problem(value):
        raise InputError(f"{name} {problem}")
    return value
