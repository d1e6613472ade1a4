"""What a question asks of a single-valued attribute (attributes.py: home, job, diet...),
and the evidence sentence that states it.

Two readings of a question: a yes/no one names a value ("Is Lee vegan?" -> diet =
vegan; ``asked_attributes``), an open one names a kind ("Which city does Tomás
live in?" -> residence; ``asked_kinds``). Either is answered by what the person
last said of that attribute, however few words it shares with the question: the
extractive answerer (read/extractive.py) asks ``on_attribute`` and
``stating_kind`` for that sentence, and ``states_other_value`` whether it says no.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime
from typing import Protocol, TypeVar

from ..model import Message
from .attributes import (
    LIFE_STAGES,
    AttributeValue,
    attribute_values,
    compatible_values,
    holds_for,
)
from .text import ENDING, KIN_WORDS, ended_objects, fold, names_thing


class Stated(Protocol):
    """What these readers need of an evidence sentence (read/extractive.py's Sentence)."""

    @property
    def text(self) -> str: ...
    @property
    def message(self) -> Message: ...
    @property
    def owner(self) -> str | None: ...
    @property
    def ended(self) -> datetime | None: ...


S = TypeVar("S", bound=Stated)

_IS_QUESTION = re.compile(
    # (a second name is a surname, not an owner: "Is Sandra Ola's manager?")
    r"^\s*(?i:is|are|was|were)\s+(?P<who>[A-Z][\w'’-]*(?:\s+[A-Z][\w-]*\b(?!['’]))?)\s+"
    r"(?P<rest>.+?)"
    r"[\s?]*$"
)


def asked_attributes(question: str) -> list[AttributeValue]:
    """The single-valued attributes a yes/no question asks about, with the asked value:
    "Is Lee vegan?" -> diet = vegan; "Does Tomás live in Lisbon?" -> residence = Lisbon."""
    m = _IS_QUESTION.match(question)
    statement = f"{m['who']} is {m['rest']}" if m else question  # "Lee is vegan"
    return [a for a, _ in attribute_values(statement)]


_ASKED_WHO = re.compile(r"^\s*(?i:is|are|was|were|does|do|did|has|have)\s+(?P<who>[A-Z][\w'’-]*)")

# Open questions that ask for a single-valued attribute (attributes.py) by its kind,
# not by a value: "Which city does Tomás live in?", "What does Lee eat?", "How old…?"
_ASKS_FOR: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "residence",
        re.compile(
            r"^\W*where\s+(?:does|do|is|are|did|was|were)\s+.*\b(?:live|lives|based|reside|"
            r"resides|home)\b"
            r"|^\W*(?:which|what)\s+(?:city|town|country|neighbou?rhood)\s+"
            r"(?:does|do|is|are|did|was|were)\b",
            re.I,
        ),
    ),
    (
        "job",
        re.compile(
            r"^\W*what(?:'s|\s+is)\s+[A-Z][\w'’-]*(?:'s|’s)\s+(?:current\s+|new\s+)?"
            r"(?:job|occupation|profession|position|role|job\s+title)\b"
            r"|^\W*what\s+(?:job|occupation|profession|position|role)\s+(?:does|do|is)\b"
            r"|^\W*what\s+(?:does|do)\s+[A-Z][\w'’-]*\s+(?:do(?:\s+for\s+(?:a\s+living|work))?"
            r"(?:\s+(?:now|these\s+days|nowadays))?\W*$|work\s+as\b)",
            re.I,
        ),
    ),
    (
        "employer",
        re.compile(
            r"^\W*where\s+(?:does|do|is|are|did|was)\s+[A-Z][\w'’-]*\s+(?:\w+\s+)?"
            r"work(?:s|ing)?(?:\W*$|\s+before\b)"
            r"|^\W*(?:which|what)\s+company\s+(?:does|do|is)\b"
            r"|^\W*who\s+(?:does|do|is)\s+[A-Z][\w'’-]*\s+(?:\w+\s+)?work(?:s|ing)?\s+for\b",
            re.I,
        ),
    ),
    (
        "diet",
        re.compile(
            r"^\W*what\s+(?:does|do)\s+[A-Z][\w'’-]*\s+(?:\w+\s+)?eat\b"
            r"|^\W*what\s+did\s+[A-Z][\w'’-]*\s+eat\s+before\b"  # not "at the wedding"
            r"|^\W*what(?:'s|\s+is)\s+[A-Z][\w'’-]*(?:'s|’s)\s+diet\b",
            re.I,
        ),
    ),
    (
        "partner",
        re.compile(
            r"^\W*who(?:'s|\s+is)\s+[A-Z][\w'’-]*(?:'s|’s)\s+(?:current\s+|new\s+)?"
            r"(?:partner|girlfriend|boyfriend|husband|wife|spouse|fianc[ée]e?)\b"
            r"|^\W*who\s+is\s+[A-Z][\w'’-]*\s+(?:dating|seeing|married\s+to|engaged\s+to)\b",
            re.I,
        ),
    ),
    ("age", re.compile(r"^\W*how\s+old\s+is\b", re.I)),
    (
        "manager",
        re.compile(
            r"^\W*who(?:'s|\s+is|\s+was)\s+[A-Z][\w'’-]*(?:'s|’s)\s+(?:current\s+|new\s+)?"
            r"(?:line\s+)?(?:manager|boss)\b",
            re.I,
        ),
    ),
    (
        "study",
        re.compile(
            r"^\W*what\s+(?:does|do|is|did)\s+[A-Z][\w'’-]*\s+(?:\w+\s+)?(?:study|studying)\b"
            r"|^\W*what(?:'s|\s+is)\s+[A-Z][\w'’-]*(?:'s|’s)\s+(?:degree|major|subject)\b"
            r"|^\W*what\s+(?:degree|subject|course)\s+(?:does|do|is)\b",
            re.I,
        ),
    ),
)


_KIN = re.compile(rf"\b(?:{KIN_WORDS})\b", re.I)


def asked_kinds(question: str) -> frozenset[str]:
    """The single-valued attributes an open question asks for by kind: "Which city
    does Tomás live in?" -> residence. Where someone works names their employer or,
    failing that, their job, so "employer" asks for either."""
    kinds = {kind for kind, pattern in _ASKS_FOR if pattern.search(question)}
    if "employer" in kinds:
        kinds.add("job")
    return frozenset(kinds)


def _own_statements(kinds: frozenset[str], person: str, ranked: Sequence[S]) -> list[tuple[S, str]]:
    """The person's own sentences (not questions, not the assistant's) stating one of
    the asked attributes of themselves, each with the value stated."""
    key = person.casefold()
    out = []
    for s in ranked:
        if (
            s.message.role == "assistant"
            or s.text.rstrip().endswith("?")
            or (s.owner or s.message.speaker).casefold() != key
        ):
            continue
        value = next(
            (
                a.value
                for a, m in attribute_values(s.text)
                if a.attribute in kinds
                and holds_for(s.text, person, m.start(), a.attribute)
                and not _KIN.search(s.text[: m.start()])  # "my sister lives in Porto"
            ),
            None,
        )
        if value is not None:
            out.append((s, value))
    return out


def stating_kind(kinds: frozenset[str], person: str | None, ranked: Sequence[S]) -> S | None:
    """The person's own sentence that states one of the asked attributes and still
    holds, the latest first: "Finally settled in Porto." answers "Which city does
    Tomás live in?" though "The flat in Bonfim is tiny" shares as many words."""
    if not kinds or not person:
        return None
    told = _own_statements(kinds, person, ranked)
    if "employer" in kinds and (kept := _employer_kept(told, ranked, person)) is not None:
        return kept
    found = [s for s, _ in told if s.ended is None]
    return max(found, key=lambda s: s.message.timestamp, default=None)


def _employer_kept(told: Sequence[tuple[S, str]], ranked: Sequence[S], person: str) -> S | None:
    """The latest statement naming an employer, when only a job changed since: "First
    week as a junior designer at Pixelworks", then "Got bumped up to senior designer".
    The promotion closed the first claim (a claim has one validity), but Pixelworks
    still holds: no later statement names another employer or says it ended."""
    named = [
        (s, a.value)
        for s, _ in told
        for a, _ in attribute_values(s.text)
        if a.attribute == "employer"
    ]
    if not named:
        return None
    first, value = max(named, key=lambda sv: sv[0].message.timestamp)
    later = [
        s
        for s in ranked
        if s.message.timestamp > first.message.timestamp
        and fold(s.owner or s.message.speaker) == fold(person)
    ]
    if first.ended is None or not later:
        return None  # still holding: the latest statement of either kind answers
    if any(
        any(a.attribute == "employer" for a, _ in attribute_values(s.text))
        or any(
            names_thing(value, thing) or names_thing(thing, value)
            for thing in ended_objects(s.text)
        )
        for s in later
    ):
        return None
    return first


def stated_before(
    kinds: frozenset[str], person: str | None, ranked: Sequence[S], later: str
) -> S | None:
    """The person's own statement of an asked attribute that came before ``later`` (the
    value the question names: "Where did Zainab live before Leyton?"): the latest one
    said by the time ``later`` was first stated, with another value. "£1,450 a month
    for this shoebox in Walthamstow" answers it, though it shares no word with it."""
    if not kinds or not person or not later.strip():
        return None
    told = _own_statements(kinds, person, ranked)
    low = later.casefold()
    named = [s.message.timestamp for s, v in told if low in v.casefold() or v.casefold() in low]
    bound = min(named, default=None)
    found = [
        s
        for s, v in told
        if low not in v.casefold()
        and v.casefold() not in low
        and (bound is None or s.message.timestamp <= bound)
    ]
    return max(found, key=lambda s: s.message.timestamp, default=None)


_IN_YEAR = re.compile(r"\b(?:in|during|back\s+in)\s+((?:19|20)\d\d)\b", re.I)


def on_attribute(question: str, asked: Sequence[AttributeValue], ranked: Sequence[S]) -> S | None:
    """The sentence of the person asked about that states the asked attribute (any
    value) and holds longest: for "Is Lee vegan?" a "pescatarian" sentence shares no
    word with the question, yet answers it. One said in the year the question names
    wins, then one still holding over one that ended, then the latest. Someone
    else's diet is not the asked person's."""
    kinds = {a.attribute for a in asked}
    who = m["who"].casefold() if (m := _ASKED_WHO.match(question)) else None
    found = [
        s
        for s in ranked
        if (who is None or s.message.speaker.casefold() == who or who in s.text.casefold())
        and kinds & {a.attribute for a, _ in attribute_values(s.text)}
    ]
    # "Was Ola vegan in 2023?" is answered by what she said of it in 2023
    year = int(m[1]) if (m := _IN_YEAR.search(question)) else None
    found.sort(
        key=lambda s: (s.message.timestamp.year == year, s.ended is None, s.message.timestamp),
        reverse=True,
    )
    return found[0] if found else None


def states_other_value(asked: Sequence[AttributeValue], sentence: str) -> bool:
    """Whether ``sentence`` gives a single-valued attribute a yes/no question asks about
    (``asked_attributes``) another value: "Is Lee vegan?" against "I've been
    pescatarian for years".

    Such a sentence answers "no" though it denies nothing; one that names the asked
    value too, or a value that may be the same ("analyst", "senior analyst"), does not.
    """
    stated = [a for a, _ in attribute_values(sentence)]
    return any(
        s.attribute == a.attribute
        and not _names_as_holding(sentence, a.value)
        and not compatible_values(s.value, a.value)
        for a in asked
        for s in stated
    )


# a clause that tells of the past: "the pescatarian thing lasted eight months"
_PAST_CLAUSE = re.compile(
    r"\b(?:lasted|was|were|used\s+to|had\s+been|ended|over|done|behind\s+me|no\s+more)\b", re.I
)
_CLAUSE_BREAK = re.compile(r"[,;:]\s|\s[-\u2013\u2014]\s|\b(?:but|though|although|and)\b", re.I)


def _names_as_holding(sentence: str, value: str) -> bool:
    """Whether ``sentence`` names ``value`` in a clause that does not tell of it as past
    or ended: "I eat meat again, the pescatarian thing lasted eight months" names
    pescatarian, "Sandra retired at Christmas, my new manager is Imran" Sandra, only
    as what was."""
    low = value.casefold()
    return any(
        low in clause.casefold() and not (_PAST_CLAUSE.search(clause) or ENDING.search(clause))
        for clause in _CLAUSE_BREAK.split(sentence)
    )


def other_stage(question: str, sentence: str) -> bool:
    """Whether ``sentence`` is at the other stage of a life (``LIFE_STAGES``) than the
    one a yes/no question names: "Does Olu own a home?" against "We're renting a
    two-bed", "Is Kenji engaged?" against "We got married on Saturday". A place both
    name ("Does Tomás live in Lisbon?" - "I moved to Lisbon") is the same stage told
    twice, not the other one."""
    who = m["who"] if (m := _ASKED_WHO.match(question)) else ""
    named = {w for w in re.findall(r"(?<!^)\b[A-Z][\w'’-]+", question.strip()) if w != who}
    if any(re.search(rf"\b{re.escape(w)}\b", sentence) for w in named):
        return False
    for _, earlier, later in LIFE_STAGES:
        for asked, other in ((later, earlier), (earlier, later)):
            if asked.search(question) and not asked.search(sentence) and other.search(sentence):
                return True
    return False
