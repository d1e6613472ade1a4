"""Routing: which people, conversation and period a question is about (pure).

"What did Caroline tell Melanie…" names two people; if exactly one
conversation has them both, the question is routed there; a person found in
several conversations is searched in their global memory (every conversation
they take part in); a question naming nobody searches everything.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from ..lang.query import names_in
from ..lang.temporal import Locate, TimeIntent, time_intent
from ..lang.text import person_key
from ..model import Hit
from ..store.sql import Filters

SCOPES = ("conversation", "person", "people", "all")


@dataclass(frozen=True)
class Route:
    """Where to look: the named people, the conversation (if one), the period, the scope."""

    people: tuple[str, ...]
    conversation: str | None
    since: datetime | None
    until: datetime | None
    scope: str  # one of SCOPES
    conversations: tuple[str, ...] = ()  # candidates when several take the named people
    intent: TimeIntent | None = None

    def filters(self, base: Filters | None = None) -> Filters:
        """Search filters for the route (time stays soft: see SearchConfig.hard_time)."""
        base = base or Filters()
        if self.scope == "conversation":
            return Filters(self.conversation, base.person, base.speaker, base.session,
                           base.since, base.until)  # fmt: skip
        if self.scope == "person":
            return Filters(base.conversation, self.people[0], base.speaker, base.session,
                           base.since, base.until)  # fmt: skip
        if self.scope == "people":
            return Filters(self.conversations, base.person, base.speaker, base.session,
                           base.since, base.until)  # fmt: skip
        return base


def _participants(conv: Mapping) -> set[str]:
    return {person_key(p) for p in conv.get("participants", ()) if p}


def route(
    question: str,
    people: Iterable[str],
    conversations_index: Sequence[Mapping],
    now: datetime,
    locate: Locate | None = None,
) -> Route:
    """Route ``question``: people named, their shared conversation, the period asked about.

    ``conversations_index`` is ``store.conversations()`` (dicts with ``id`` and
    ``participants``); ``now`` is the query time relative periods resolve against.
    """
    named = tuple(names_in(question, people))
    intent = time_intent(question, now, locate)
    since, until = (intent.since, intent.until) if intent else (None, None)
    keys = {person_key(n) for n in named}
    if not keys:
        return Route((), None, since, until, "all", intent=intent)
    shared = [c["id"] for c in conversations_index if keys <= _participants(c)]
    if len(shared) == 1:
        return Route(named, shared[0], since, until, "conversation", tuple(shared), intent)
    if len(named) == 1:
        return Route(named, None, since, until, "person", tuple(shared), intent)
    # several named: the conversations they share, else any one of them takes part in
    found = tuple(shared) or tuple(c["id"] for c in conversations_index if keys & _participants(c))
    return Route(named, None, since, until, "people" if found else "all", found, intent)


@dataclass(frozen=True)
class Recall:
    """What ``MemoryService.recall`` found: the hits, where it looked, the queries it ran."""

    hits: list[Hit]
    route: Route | None
    queries: tuple[str, ...]
    sufficient: bool | None = None  # the LLM's verdict on the first hits; None without one
