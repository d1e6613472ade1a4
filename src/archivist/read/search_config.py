"""SearchConfig: a named retrieval recipe (frozen; the presets live in read/search.py).

Apart from search.py so the rankers it configures (read/links.py) can take
one without importing the search that runs them.
"""

from __future__ import annotations

from dataclasses import dataclass

from .rerank import RerankConfig

RANKERS = ("bm25", "dense")


@dataclass(frozen=True)
class SearchConfig:
    """A named retrieval recipe."""

    name: str
    rankers: tuple[str, ...] = RANKERS
    candidates: int = 100  # per ranker, before fusion
    rrf_k: int = 60
    weights: tuple[tuple[str, float], ...] = ()
    person_boost: float = 0.0  # relative boost for messages spoken by a person the query names
    neighbour_weight: float = 0.0  # share of the best adjacent turn's score a message inherits
    neighbour_span: int = 1  # how many turns either side count as adjacent
    expand_top: int = 30  # how many top hits pull their neighbours in as candidates
    when_boost: float = 0.0  # for "when" questions: boost messages that mention a time
    # Temporal intent (read/temporal.py), given by the caller or the router:
    time_boost: float = 0.0  # soft: boost messages said (or mentioning a time) in the window
    time_grace_days: float = 0.0  # the window's end extended: things are told after they happen
    hard_time: bool = False  # explicit windows ("in May 2023") become filters
    # As of ``at``: messages none of whose claims holds then (Claim.holds_at: an
    # expired foresight, a superseded fact) are multiplied by this, unless the question
    # asks about the past; 1.0 = no effect. Closed claims never vote.
    stale_weight: float = 1.0
    rerank: RerankConfig | None = None
    # Link rankers (read/links.py): how many scenes let their members through, how
    # many entities (dossier-matched, named, or one hop from the top claims) vote, with
    # how many of their claims each, and how many top claims the hop starts from.
    scene_top: int = 3
    entity_top: int = 5
    entity_claims: int = 20
    hop_from: int = 10
