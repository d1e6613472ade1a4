"""Temporal intent of a question: the period it asks about, resolved against the query time.

"in May 2023", "last May", "in 2022", "on 9 June" resolve with the write-time
grounding rules (``archivist.lang.timeground``) against ``now``, the time the question
is asked; "before/after <date>" opens the window on one side; "before the
wedding" needs the date of the event named, which only the caller can look
up (``locate``). Pure: no store, no clock.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from .timeground import find_times

_RELATION = re.compile(r"\b(before|after|since|until|prior\s+to|by)\s*$", re.IGNORECASE)
_EVENT = re.compile(
    r"\b(before|after|since|prior\s+to)\s+(?:the|his|her|their|my|our|your)\s+"
    r"([a-z][\w' -]{2,40}?)\s*(?:[?.,;!]|$|\b(?:and|when|while|with|in|on)\b)",
    re.IGNORECASE,
)
_YEAR = re.compile(r"\b(19|20)\d\d\b")
NEAR = timedelta(days=31)  # how far "before/after <date>" reaches
# References about the asked-about event's own past ("two years ago", "recently"):
# LoCoMo-style questions count them from when the thing was said, not from now.
_SPEAKER_RELATIVE = re.compile(r"\b(ago|recently|the other day|past)\b", re.IGNORECASE)


@dataclass(frozen=True)
class TimeIntent:
    """The period a question is about: [since, until) with open ends as None."""

    text: str  # the expression that set it ("in May 2023", "before the wedding")
    since: datetime | None
    until: datetime | None
    explicit: bool  # an absolute date with a year: confident enough to filter on

    def contains(self, when: datetime, grace: timedelta = timedelta(0)) -> bool:
        """Is ``when`` inside the window, the end extended by ``grace`` (told later)?"""
        if self.since is not None and when < self.since:
            return False
        return self.until is None or when < self.until + grace

    def overlaps(self, start: datetime, end: datetime | None, grace: timedelta) -> bool:
        """Does the span [start, end) meet the window (end extended by ``grace``)?"""
        if self.until is not None and start >= self.until + grace:
            return False
        return self.since is None or end is None or end > self.since


Locate = Callable[[str], datetime | None]


def time_intent(question: str, now: datetime, locate: Locate | None = None) -> TimeIntent | None:
    """The question's period, or None when it names none (most questions: no filtering)."""
    refs = [r for r in find_times(question, now) if r.granularity != "instant"]
    if refs:
        ref = refs[0]
        pos = question.find(ref.text)
        head = question[:pos] if pos >= 0 else ""
        relation = _RELATION.search(head)
        explicit = bool(_YEAR.search(ref.text)) and not _SPEAKER_RELATIVE.search(ref.text)
        if relation:
            word = relation.group(1).lower()
            text = f"{word} {ref.text}"
            # "the Monday before July 24": such questions mean the weeks next to the date
            if word in ("before", "until", "by") or word.startswith("prior"):
                return TimeIntent(text, ref.start - NEAR, ref.start, explicit)
            start = ref.end or ref.start
            return TimeIntent(text, start, start + NEAR, explicit)
        if _SPEAKER_RELATIVE.search(ref.text):
            return None
        return TimeIntent(ref.text, ref.start, ref.end, explicit)
    return _event_intent(question, locate)


def _event_intent(question: str, locate: Locate | None) -> TimeIntent | None:
    """Before/after an event ("before the wedding"): the window ends or starts at its date."""
    m = _EVENT.search(question)
    if m is None or locate is None:
        return None
    word, event = m.group(1).lower(), m.group(2).strip()
    when = locate(event)
    if when is None:
        return None
    text = f"{word} the {event}"
    if word in ("before",) or word.startswith("prior"):
        return TimeIntent(text, None, when, False)
    return TimeIntent(text, when, None, False)
