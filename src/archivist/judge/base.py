"""The judge seam: what a judge is asked, what it answers, and the labels.

Five tasks. ``relation``: does a newer statement by a person end an older state of
theirs (``ends``), leave it holding (``continues``: progress, an addition, a
pause, a word that only looks like an ending) or say nothing of it
(``unrelated``)? ``support``: does a sentence someone said settle a question
about a person: ``yes`` or ``no`` for a yes/no question, ``answers`` for a
wh-question, else ``neither``? ``kind``: what kind of memory is one thing a
person (or the assistant) said: a standing ``state``, a ``preference``, a
``habit``, a ``goal``, a ``value``, a ``lesson``, a ``plan``, a one-off
``event``, or ``chit-chat`` that is no memory at all? ``when``: does a time
someone named without its direction ("the 10k in May", "see u monday") lie
``ahead`` of when they said it or ``behind`` it? ``serves``: does another thing a
person said or did move them toward one of their goals (``serves``), work against
it (``hinders``), or neither (``unrelated``)? Every implementation (the trained
model, an LLM, the old rules) answers all five, in batches, with a probability.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

RELATION_LABELS = ("ends", "continues", "unrelated")
SUPPORT_LABELS = ("yes", "no", "answers", "neither")
KIND_LABELS = (
    "state",
    "preference",
    "habit",
    "goal",
    "value",
    "lesson",
    "plan",
    "event",
    "chit-chat",
)
WHEN_LABELS = ("ahead", "behind")
SERVES_LABELS = ("serves", "hinders", "unrelated")
LABELS = {
    "relation": RELATION_LABELS,
    "support": SUPPORT_LABELS,
    "kind": KIND_LABELS,
    "when": WHEN_LABELS,
    "serves": SERVES_LABELS,
}


@dataclass(frozen=True)
class RelationPair:
    """An older and a newer statement by ``speaker``: does the newer end the older?"""

    speaker: str
    older: str
    newer: str
    older_at: datetime | None = None
    newer_at: datetime | None = None


@dataclass(frozen=True)
class SupportPair:
    """A question about a person and one sentence ``speaker`` said: does it settle it?"""

    question: str
    sentence: str
    speaker: str
    said_at: datetime | None = None


@dataclass(frozen=True)
class Statement:
    """One sentence ``speaker`` said (``role``: user or assistant): what kind of memory?"""

    sentence: str
    speaker: str
    role: str = "user"
    said_at: datetime | None = None


@dataclass(frozen=True)
class TimeMention:
    """A time ``speaker`` named in ``sentence`` without its direction ("in May", "monday"):
    does it lie ahead of ``said_at`` or behind it?"""

    sentence: str
    time: str
    speaker: str
    said_at: datetime | None = None


@dataclass(frozen=True)
class GoalPair:
    """A goal of ``speaker``'s and another thing memory holds of them (``item``: what
    they did, do, have or plan): does the item move them toward the goal?"""

    goal: str
    item: str
    speaker: str


@dataclass(frozen=True)
class Verdict:
    """A label with the judge's probability for it (and, from an LLM, its short reason)."""

    label: str
    p: float
    reason: str = ""


class Judge(Protocol):
    """What reconciliation and the answerer ask when meaning must be judged."""

    name: str

    def relations(self, pairs: Sequence[RelationPair]) -> list[Verdict]:
        """One verdict per pair, in order (labels from RELATION_LABELS)."""
        ...

    def supports(self, pairs: Sequence[SupportPair]) -> list[Verdict]:
        """One verdict per pair, in order (labels from SUPPORT_LABELS)."""
        ...

    def kinds(self, statements: Sequence[Statement]) -> list[Verdict]:
        """One verdict per statement, in order (labels from KIND_LABELS)."""
        ...

    def whens(self, mentions: Sequence[TimeMention]) -> list[Verdict]:
        """One verdict per time mention, in order (labels from WHEN_LABELS)."""
        ...

    def serves(self, pairs: Sequence[GoalPair]) -> list[Verdict]:
        """One verdict per pair, in order (labels from SERVES_LABELS)."""
        ...


def relation(judge: Judge, older: str, newer: str, speaker: str = "") -> Verdict:
    """One relation verdict (a convenience over ``Judge.relations``)."""
    return judge.relations([RelationPair(speaker, older, newer)])[0]


def support(judge: Judge, question: str, sentence: str, speaker: str = "") -> Verdict:
    """One support verdict (a convenience over ``Judge.supports``)."""
    return judge.supports([SupportPair(question, sentence, speaker)])[0]


def kind(judge: Judge, sentence: str, speaker: str = "", role: str = "user") -> Verdict:
    """One kind verdict (a convenience over ``Judge.kinds``)."""
    return judge.kinds([Statement(sentence, speaker, role)])[0]


def encode_relation(pair: RelationPair) -> tuple[str, str]:
    """The two segments the cross-encoder reads for a relation pair (training uses this too)."""
    who = pair.speaker.strip() or "someone"
    return f"relation. {who} said: {pair.older}", f"later {who} said: {pair.newer}"


def encode_support(pair: SupportPair) -> tuple[str, str]:
    """The two segments the cross-encoder reads for a support pair (training uses this too)."""
    who = pair.speaker.strip() or "someone"
    return f"support. {pair.question}", f"{who} said: {pair.sentence}"


def encode_kind(statement: Statement) -> tuple[str, str]:
    """The two segments the cross-encoder reads for a statement (training uses this too)."""
    who = statement.speaker.strip() or "someone"
    role = "the assistant" if statement.role == "assistant" else who
    return f"kind. {role} said:", statement.sentence


def encode_when(mention: TimeMention) -> tuple[str, str]:
    """The two segments the cross-encoder reads for a time mention (training uses this too)."""
    who = mention.speaker.strip() or "someone"
    return f"when. {mention.time}", f"{who} said: {mention.sentence}"


def encode_serves(pair: GoalPair) -> tuple[str, str]:
    """The two segments the cross-encoder reads for a goal and an item (training uses this
    too)."""
    who = pair.speaker.strip() or "someone"
    return f"serves. {who}'s goal: {pair.goal}", f"{who}: {pair.item}"
