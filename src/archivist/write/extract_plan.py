"""Which part of a session the archivist reads: nothing, all of it, or only its new end.

A live chat's session grows a turn at a time. When the messages the archivist
read last time are still the session's first ones (same count, ending with the
same message, read by the same method), only the messages after them are read
and their episodes and claims are added (append): nothing is deleted, so cached
vector indexes and the conversation's reconciliation stay valid. Anything else
(a message inserted among those read, a session that shrank, another method, a
mark from before the store kept the last message) reads the whole session again
and replaces what it gave (replace).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from ..model import Message
from ..store.base import ExtractionMark
from .archivist import SessionResult

CONTEXT_MESSAGES = 6  # read-only messages shown before an appended tail


@dataclass(frozen=True)
class SessionPlan:
    """One session's extraction: what to read, what it may look back at, how to save it."""

    conversation: str
    session: int
    messages: tuple[Message, ...]  # to extract from
    context: tuple[Message, ...]  # just before ``messages``: shown, never cited
    participants: tuple[str, ...]
    n_messages: int  # the session's size, recorded with the extraction
    append_after: ExtractionMark | None  # the mark to append after; None: replace
    replaces: bool  # an earlier extraction of the session is replaced
    # the conversation's relatives by name, ("marta", "mum") -> "Halina": "Mum had a
    # fall" in March is Halina's when November said "my mum Halina"
    kin: Mapping[tuple[str, str], str] = field(default_factory=dict)
    mark: ExtractionMark | None = None  # the session's mark when planned (None: never read)

    @property
    def last_message(self) -> str:
        return self.messages[-1].id


def plan_session(
    conversation: str,
    session: int,
    group: Sequence[Message],
    participants: Sequence[str],
    mark: ExtractionMark | None,
    method: str,
    context: int = CONTEXT_MESSAGES,
) -> SessionPlan | None:
    """The plan for a session's messages in log order, given its mark; None when up to date."""
    if not group:
        return None
    full = SessionPlan(
        conversation,
        session,
        tuple(group),
        (),
        tuple(participants),
        len(group),
        None,
        replaces=mark is not None,
        mark=mark,
    )
    if mark is None:
        return full
    n = mark.n_messages
    if n == len(group) and mark.last_message in (None, group[-1].id):
        return None  # a mark from before last ids were kept is trusted while the size holds
    if mark.last_message is None or mark.method != method or not 0 < n < len(group):
        return full
    if group[n - 1].id != mark.last_message:
        return full  # a message was inserted among (or removed from) those read
    return SessionPlan(
        conversation,
        session,
        tuple(group[n:]),
        tuple(group[max(0, n - context) : n]),
        tuple(participants),
        len(group),
        mark,
        replaces=False,
        mark=mark,
    )


def waits(plan: SessionPlan, min_tail: int, idle_s: float, now: datetime) -> bool:
    """Hold an appended tail shorter than ``min_tail`` while its last message is younger
    than ``idle_s`` (the chat is still going: the next turns join it)."""
    if plan.append_after is None or len(plan.messages) >= min_tail:
        return False
    return (now - plan.messages[-1].timestamp).total_seconds() < idle_s


@dataclass
class ExtractReport:
    """Totals of one extraction run.

    ``sessions`` were read; of those, ``sessions_appended`` only after what was read
    before (a session that grew at its end) and ``sessions_replaced`` wholly again,
    replacing their earlier extraction; the rest were new. ``sessions_skipped``
    were up to date (or extracted by another process meanwhile); ``sessions_waiting``
    have a new tail held for more turns (``hold_short_tails``).
    """

    method: str
    sessions: int = 0
    sessions_appended: int = 0
    sessions_replaced: int = 0
    sessions_skipped: int = 0
    sessions_waiting: int = 0
    episodes: int = 0
    claims: int = 0
    rejected: int = 0
    fallbacks: int = 0

    def add(self, r: SessionResult, plan: SessionPlan) -> None:
        self.sessions += 1
        self.sessions_appended += plan.append_after is not None
        self.sessions_replaced += plan.replaces
        self.episodes += len(r.episodes)
        self.claims += len(r.claims)
        self.rejected += r.rejected
        self.fallbacks += r.fallbacks
