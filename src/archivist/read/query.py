"""Question analysis (pure): whom a question names and whether it asks "when"."""

from __future__ import annotations

import re
from collections.abc import Iterable

_WHEN = re.compile(
    r"^\s*(when|what (year|month|day|date|time)|which (year|month|day|date)|how long ago)\b"
    r"|\b(what|which) (year|month|date|day)\b|\bhow long (ago|before|after)\b",
    re.IGNORECASE,
)


_EDGE = "\"'“”‘’()[]{}<>,;:!?."
_POSSESSIVE = ("'s", "’s", "s'", "s’")
_MAX_NAME_WORDS = 4


def _tokens(text: str) -> list[str]:
    """Lower-cased words with edge punctuation and possessives stripped ("Melanie’s" → melanie)."""
    out = []
    for raw in text.lower().split():
        word = raw.strip(_EDGE)
        for suffix in _POSSESSIVE:
            if word.endswith(suffix) and len(word) > len(suffix):
                word = word[: -len(suffix)] + ("s" if suffix[0] == "s" else "")
                break
        if word:
            out.append(word.strip(_EDGE))
    return out


def names_in(query: str, people: Iterable[str]) -> list[str]:
    """Known people the query names (whole words, case-insensitive, possessives too).

    Linear in the query: its word n-grams are looked up in a set, so a store
    with thousands of people costs no more than one with two.
    """
    words = _tokens(query)
    grams = {
        " ".join(words[i : i + n])
        for n in range(1, _MAX_NAME_WORDS + 1)
        for i in range(len(words) - n + 1)
    }
    found = []
    for p in people:
        key = " ".join(_tokens(p))
        if key and key in grams:
            found.append(p)
    return found


def asks_when(query: str) -> bool:
    """True for questions about time ("When did…", "What year…", "How long ago…")."""
    return bool(_WHEN.search(query))
