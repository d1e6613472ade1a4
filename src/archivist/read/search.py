"""Hybrid message search: rankers -> RRF -> conversation-aware rescoring.

Settings are frozen presets (``PRESETS``), never mutated per call. The I/O is
confined to ``search``; the rescoring steps are pure functions over score maps
so they can be tested and reused by an async front end.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np

from ..embed.base import Embedder
from ..model import Hit, Message
from ..store.base import Store
from ..store.sql import Filters, person_key
from ..write.timeground import find_times
from .fusion import rrf
from .query import asks_when, names_in

RANKERS = ("bm25", "dense")
CLAIM_RANKERS = ("claims_bm25", "claims_dense")
EPISODE_RANKERS = ("episodes_bm25", "episodes_dense")


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


PRESETS: Mapping[str, SearchConfig] = {
    "bm25": SearchConfig("bm25", rankers=("bm25",)),
    "dense": SearchConfig("dense", rankers=("dense",)),
    "rrf": SearchConfig("rrf"),
    "claims": SearchConfig("claims", rankers=CLAIM_RANKERS),
    "episodes": SearchConfig("episodes", rankers=EPISODE_RANKERS),
    # Measured on the LoCoMo development subset (README, "Retrieval choices"):
    # a sharper RRF (k=20) lets the speaker boost and neighbour smoothing act
    # on well-ranked hits instead of reshuffling the long tail; claim vectors
    # vote for their evidence messages (claim BM25 measured worse: left out);
    # "when" questions favour messages that carry a time expression.
    "archivist": SearchConfig(
        "archivist",
        rankers=("bm25", "dense", "claims_dense"),
        rrf_k=20,
        person_boost=0.5,
        neighbour_weight=0.5,
        when_boost=0.2,
    ),
    "archivist-messages": SearchConfig(
        "archivist-messages",
        rrf_k=20,
        person_boost=0.5,
        neighbour_weight=0.5,
    ),
}


def get_preset(name: str) -> SearchConfig:
    from ..errors import ConfigError

    try:
        return PRESETS[name]
    except KeyError:
        raise ConfigError(
            f"unknown search preset {name!r}; choose one of {', '.join(PRESETS)}"
        ) from None


@dataclass
class SearchTrace:
    """Timings and ranker outputs of one search, for benchmarks and debugging."""

    rankings: dict[str, list[int]] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    names: list[str] = field(default_factory=list)


# -- pure rescoring steps ------------------------------------------------------------


def smooth_neighbours(
    scores: Mapping[int, float],
    position: Mapping[int, tuple[str, int]],
    weight: float,
    span: int = 1,
) -> dict[int, float]:
    """Each message inherits ``weight`` × the best score among turns within ``span``.

    An answer is often the reply right after the turn that matches the question
    ("Did you go?" / "Yes, last Friday"); smoothing lifts it without a model.
    """
    if not weight:
        return dict(scores)
    by_pos = {position[r]: s for r, s in scores.items() if r in position}
    out: dict[int, float] = {}
    for r, pos in position.items():
        conv, seq = pos
        best = max(
            (by_pos.get((conv, seq + d), 0.0) for d in range(-span, span + 1) if d),
            default=0.0,
        )
        out[r] = scores.get(r, 0.0) + weight * best
    return out


def boost_speakers(
    scores: Mapping[int, float],
    speakers: Mapping[int, str],
    names: Iterable[str],
    boost: float,
) -> dict[int, float]:
    """Raise messages spoken by a person the question names (claims are the speaker's)."""
    wanted = {person_key(n) for n in names}
    if not boost or not wanted:
        return dict(scores)
    return {
        r: s * (1.0 + boost) if person_key(speakers.get(r, "")) in wanted else s
        for r, s in scores.items()
    }


def mentions_time(text: str, at) -> bool:
    """Does the text carry a time expression ("yesterday", "last May", "in 2022")?"""
    return bool(find_times(text, at))


def top_items(scores: Mapping[int, float], k: int) -> list[tuple[int, float]]:
    return sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))[:k]


# -- the search ----------------------------------------------------------------------


def search(
    store: Store,
    embedder: Embedder | None,
    query: str,
    filters: Filters,
    k: int,
    config: SearchConfig,
    people: Iterable[str] = (),
    trace: SearchTrace | None = None,
    query_vector: np.ndarray | None = None,
) -> list[Hit]:
    """Top-k messages for ``query`` under ``filters``, scored by ``config``."""
    trace = trace if trace is not None else SearchTrace()
    rankings: dict[str, list[int]] = {}
    if "bm25" in config.rankers:
        t = time.perf_counter()
        rankings["bm25"] = [r for r, _ in store.keyword_search(query, filters, config.candidates)]
        trace.seconds["bm25"] = time.perf_counter() - t
    dense_wanted = {"dense", "claims_dense", "episodes_dense"} & set(config.rankers)
    if dense_wanted and embedder is not None and query_vector is None:
        t = time.perf_counter()
        query_vector = embedder.embed_batch([query])[0]
        trace.seconds["embed"] = time.perf_counter() - t
    if "dense" in config.rankers and embedder is not None:
        t = time.perf_counter()
        rankings["dense"] = [
            r
            for r, _ in store.vector_search(embedder.name, query_vector, filters, config.candidates)
        ]
        trace.seconds["dense"] = time.perf_counter() - t
    matched_claims = _claim_rankings(
        store, embedder, query, query_vector, filters, config, rankings
    )
    trace.rankings = rankings
    t = time.perf_counter()
    scores = rrf(rankings, k=config.rrf_k, weights=dict(config.weights) or None)
    messages = store.messages_by_rowid(scores)
    expanded_from: dict[int, str] = {}
    if config.neighbour_weight:
        for r, _ in top_items(scores, config.expand_top):
            for nr, nm in store.neighbours(
                r, config.neighbour_span, config.neighbour_span, filters
            ):
                if nr not in messages:
                    messages[nr] = nm
                    expanded_from[nr] = messages[r].id
        position = {r: (m.conversation, m.seq) for r, m in messages.items()}
        scores = smooth_neighbours(scores, position, config.neighbour_weight, config.neighbour_span)
    if config.when_boost and asks_when(query):
        # Only the head can change places in the top k; parsing times costs ~0.2 ms a message.
        head = [r for r, _ in top_items(scores, max(k, config.expand_top) * 2)]
        timed = {r for r in head if mentions_time(messages[r].text, messages[r].timestamp)}
        scores = {r: s * (1.0 + config.when_boost) if r in timed else s for r, s in scores.items()}
    if config.person_boost:
        trace.names = names_in(query, people)
        speakers = {r: m.speaker for r, m in messages.items()}
        scores = boost_speakers(scores, speakers, trace.names, config.person_boost)
    ranks = {name: {r: i for i, r in enumerate(lst, 1)} for name, lst in rankings.items()}
    top = top_items(scores, k)
    claims = store.claims_by_id(c for r, _ in top for c in matched_claims.get(r, ()))
    episodes = store.episodes_for_messages(r for r, _ in top)
    hits = [
        Hit(
            message=messages[r],
            score=s,
            sources={n: rk[r] for n, rk in ranks.items() if r in rk},
            expanded_from=expanded_from.get(r),
            claims=tuple(claims[c] for c in matched_claims.get(r, ()) if c in claims),
            episode=episodes.get(r),
        )
        for r, s in top
        if r in messages
    ]
    trace.seconds["rescore"] = time.perf_counter() - t
    return hits


def _find_derived(
    kind: str,
    store: Store,
    embedder: Embedder | None,
    query: str,
    query_vector: np.ndarray | None,
    filters: Filters,
    config: SearchConfig,
) -> dict[str, list[int]]:
    """Ids of ``kind`` ("claims" or "episodes") ranked by its keyword and vector rankers."""
    keyword, vector = {
        "claims": (store.claim_keyword_search, store.claim_vector_search),
        "episodes": (store.episode_keyword_search, store.episode_vector_search),
    }[kind]
    found: dict[str, list[int]] = {}
    if f"{kind}_bm25" in config.rankers:
        found[f"{kind}_bm25"] = [i for i, _ in keyword(query, filters, config.candidates)]
    if f"{kind}_dense" in config.rankers and embedder is not None and query_vector is not None:
        found[f"{kind}_dense"] = [
            i for i, _ in vector(embedder.name, query_vector, filters, config.candidates)
        ]
    return found


def _claim_rankings(
    store: Store,
    embedder: Embedder | None,
    query: str,
    query_vector: np.ndarray | None,
    filters: Filters,
    config: SearchConfig,
    rankings: dict[str, list[int]],
) -> dict[int, list[int]]:
    """Rank claims and episodes and turn each ranking into one over their messages.

    Index fine, return coarse: a claim found at rank r votes for its evidence
    messages at rank r (an episode for its messages), so they lift the messages
    that support them without crowding them out of the k results. Returns
    message rowid -> claim ids.
    """
    args = (store, embedder, query, query_vector, filters, config)
    episodes = _find_derived("episodes", *args)
    if episodes:
        members = store.episode_message_rowids({e for ids in episodes.values() for e in ids})
        # an episode passes the filters if one of its messages does; each message must too
        allowed = store.filter_rowids({r for rs in members.values() for r in rs}, filters)
        for name, ids in episodes.items():
            rankings[name] = list(
                dict.fromkeys(r for e in ids for r in members.get(e, ()) if r in allowed)
            )
    found = _find_derived("claims", *args)
    if not found:
        return {}
    evidence = store.claim_evidence_rowids({c for ids in found.values() for c in ids})
    matched: dict[int, list[int]] = {}
    for name, ids in found.items():
        ranked: dict[int, None] = {}
        for c in ids:
            for r in evidence.get(c, ()):
                ranked.setdefault(r, None)
                matched.setdefault(r, [])
                if c not in matched[r]:
                    matched[r].append(c)
        rankings[name] = list(ranked)
    return matched


def hit_messages(hits: Iterable[Hit]) -> list[Message]:
    return [h.message for h in hits]
