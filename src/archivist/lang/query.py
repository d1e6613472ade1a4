"""Question analysis (pure): whom a question names and whether it asks "when"."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from functools import lru_cache

from .text import name_words, person_key

_WHEN = re.compile(
    r"^\s*(?:(?:since|from|until|till|by)\s+)?"
    r"(when|what (year|month|day|date|time)|which (year|month|day|date)|how long ago)\b"
    r"|\b(what|which) (year|month|date|day)\b|\bhow long (ago|before|after)\b",
    re.IGNORECASE,
)

_MAX_NAME_WORDS = 4


def names_in(query: str, people: Iterable[str]) -> list[str]:
    """Known people the query names (whole words, case-insensitive, possessives too).

    Its word n-grams are looked up in a set, and each person's name is read
    once per process (``_name_key``): a set lookup per known person.
    """
    words = name_words(query)
    grams = {
        " ".join(words[i : i + n])
        for n in range(1, _MAX_NAME_WORDS + 1)
        for i in range(len(words) - n + 1)
    }
    return [p for p in people if (key := _name_key(p)) and key in grams]


@lru_cache(maxsize=1 << 16)
def _name_key(name: str) -> str:
    """A known name as ``names_in`` matches it: computed once per name, not once per
    question (a store of 2,000 people spent 5 ms a search here)."""
    return " ".join(name_words(name))


_WHO = re.compile(r"^\W*who(?:m|se)?\b", re.I)


# "Who told Sam to get the train?", "Who asked about a housewarming?": who said it
SPEECH_WHO = re.compile(
    r"^\W*who\s+(said|told|asked|suggested|predicted|recommended|advised|warned|reminded|"
    r"invited|offered|promised|complimented|congratulated|thanked|teased|joked)\b",
    re.I,
)


def asks_who(query: str) -> bool:
    """True for questions that ask who ("Who drinks…?", "Whose…?")."""
    return bool(_WHO.match(query))


def asks_when(query: str) -> bool:
    """True for questions about time ("When did…", "Since when…", "What year…", "How long ago…")."""
    return bool(_WHEN.search(query))


# "Did Jo say…?", "Has Uma ever mentioned…?": the question names who said it
_SAID_BY = re.compile(
    r"^\W*(?:did|does|has|had|have|would)\s+(.+?)\s+(?:ever\s+|really\s+|actually\s+)?"
    r"(?:say|said|tell|told|mention|mentioned|suggest|suggested|ask|asked|write|wrote|"
    r"claim|claimed|admit|admitted|recommend|recommended)\b",
    re.I,
)


def said_by_named(question: str, names: Sequence[str]) -> str | None:
    """The known person a "did X say…" question names as the speaker, if it does."""
    m = _SAID_BY.match(question)
    if m is None:
        return None
    who = person_key(m.group(1))
    return next((n for n in names if person_key(n) == who), None)
