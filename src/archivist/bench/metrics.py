"""Benchmark metrics (pure): evidence recall and latency percentiles."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence


def evidence_recall(retrieved: Sequence[str], evidence: Iterable[str], k: int) -> float:
    """Share of the evidence ids found among the first k retrieved ids."""
    gold = set(evidence)
    if not gold:
        raise ValueError("evidence_recall needs at least one evidence id")
    return len(gold & set(retrieved[:k])) / len(gold)


def percentile(values: Sequence[float], p: float) -> float:
    """Nearest-rank percentile (p in 0..100); 0.0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(1, min(len(ordered), math.ceil(p / 100 * len(ordered))))
    return ordered[rank - 1]


def mean(values: Iterable[float]) -> float:
    vals = list(values)
    return sum(vals) / len(vals) if vals else 0.0


def by_category(rows: Iterable[tuple[str, float]]) -> dict[str, float]:
    """Mean per category plus "overall" (mean over all rows, not over categories)."""
    groups: dict[str, list[float]] = defaultdict(list)
    everything: list[float] = []
    for cat, value in rows:
        groups[str(cat)].append(value)
        everything.append(value)
    out = {"overall": round(mean(everything), 4)}
    out.update({c: round(mean(v), 4) for c, v in sorted(groups.items())})
    return out
