"""Reciprocal rank fusion: a tiny pure function over ranked lists."""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence


def rrf(
    rankings: Mapping[str, Sequence[Hashable]],
    *,
    k: int = 60,
    weights: Mapping[str, float] | None = None,
) -> dict[Hashable, float]:
    """Fuse ranked lists: score(d) = sum over lists of weight / (k + rank(d)), rank from 1.

    RRF needs no score calibration between BM25 and cosine, which is why it is
    the default fusion; ``weights`` lets a preset trust one ranker more.
    """
    scores: dict[Hashable, float] = {}
    for name, ranked in rankings.items():
        w = 1.0 if weights is None else weights.get(name, 1.0)
        if not w:
            continue
        for rank, item in enumerate(ranked, start=1):
            scores[item] = scores.get(item, 0.0) + w / (k + rank)
    return scores
