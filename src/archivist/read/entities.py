"""Entity listings derived from claims (pure): until reconciliation, an aggregate view."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from ..model import Claim


def entity_rows(claims: Iterable[Claim]) -> list[dict]:
    """Aggregate entity mentions of claims by lower-cased name (pure)."""
    agg: dict[str, dict] = {}
    for c in claims:
        for e in c.entities:
            key = e.name.strip().lower()
            row = agg.setdefault(
                key,
                {
                    "name": e.name,
                    "kinds": Counter(),
                    "aliases": set(),
                    "speakers": set(),
                    "mentions": 0,
                },
            )
            row["kinds"][e.kind] += 1
            row["aliases"].update(a for a in e.aliases if a.lower() != key)
            row["speakers"].add(c.speaker)
            row["mentions"] += 1
    return sorted(
        (
            {
                "name": r["name"],
                "kind": r["kinds"].most_common(1)[0][0],
                "aliases": sorted(r["aliases"]),
                "speakers": sorted(r["speakers"]),
                "mentions": r["mentions"],
            }
            for r in agg.values()
        ),
        key=lambda r: (-r["mentions"], r["name"]),
    )
