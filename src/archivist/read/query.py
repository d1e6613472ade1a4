"""Question analysis (pure): whom a question names and whether it asks "when"."""

from __future__ import annotations

import re
from collections.abc import Iterable

_WHEN = re.compile(
    r"^\s*(when|what (year|month|day|date|time)|which (year|month|day|date)|how long ago)\b"
    r"|\b(what|which) (year|month|date|day)\b|\bhow long (ago|before|after)\b",
    re.IGNORECASE,
)


def names_in(query: str, people: Iterable[str]) -> list[str]:
    """Known people the query names (whole-word, case-insensitive, possessives too)."""
    found = []
    low = query.lower()
    for p in people:
        name = p.strip()
        if not name:
            continue
        if re.search(r"(?<!\w)" + re.escape(name.lower()) + r"(?:'s|’s|s')?(?!\w)", low):
            found.append(p)
    return found


def asks_when(query: str) -> bool:
    """True for questions about time ("When did…", "What year…", "How long ago…")."""
    return bool(_WHEN.search(query))
