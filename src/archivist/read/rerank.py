"""Re-ranking without a model: fused relevance plus importance, salience, usefulness, recency.

No cross-encoder ships its weights on PyPI (see the research notes), so the
head of the fused ranking is rescored by a weighted sum of signals memory
already keeps. Each signal is centred on its neutral value, so a message with
no claims or no usefulness record keeps its fused relevance. Pure functions.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime

from ..model import Claim


@dataclass(frozen=True)
class RerankConfig:
    """Weights of the re-ranking score; relevance is the fused score over the head's best."""

    name: str
    depth: int = 50  # how many top hits are rescored
    importance: float = 0.0
    salience: float = 0.0
    usefulness: float = 0.0
    recency: float = 0.0
    half_life_days: float = 180.0


@dataclass(frozen=True)
class Features:
    """What memory knows about one message, each in [0, 1]; 0.5 is neutral."""

    importance: float = 0.5
    salience: float = 0.5
    usefulness: float = 0.5
    recency: float = 0.5


def recency(when: datetime, at: datetime, half_life_days: float) -> float:
    """1.0 at ``at``, halving every ``half_life_days`` before it."""
    age = max((at - when).total_seconds() / 86400.0, 0.0)
    return math.pow(0.5, age / half_life_days) if half_life_days > 0 else 0.5


def features(
    claims: Iterable[Claim],
    usefulness: Mapping[int, float],
    when: datetime,
    at: datetime,
    config: RerankConfig,
) -> Features:
    """A message's features from the claims it evidences (best of each) and its age."""
    cs = list(claims)
    if not cs:
        return Features(recency=recency(when, at, config.half_life_days))
    useful = [usefulness[c.id] for c in cs if c.id in usefulness]
    return Features(
        importance=max(c.importance for c in cs) / 10.0,
        salience=max(c.salience for c in cs) / 10.0,
        usefulness=max(useful) if useful else 0.5,
        recency=recency(when, at, config.half_life_days),
    )


def rerank(
    scores: Mapping[int, float], feats: Mapping[int, Features], config: RerankConfig
) -> dict[int, float]:
    """Head scores become relevance + Σ weight × (feature − 0.5); the tail keeps relevance."""
    if not scores:
        return {}
    top = max(scores.values()) or 1.0
    out = {}
    for r, s in scores.items():
        f = feats.get(r)
        bonus = 0.0
        if f is not None:
            bonus = (
                config.importance * (f.importance - 0.5)
                + config.salience * (f.salience - 0.5)
                + config.usefulness * (f.usefulness - 0.5)
                + config.recency * (f.recency - 0.5)
            )
        out[r] = s / top + bonus
    return out
