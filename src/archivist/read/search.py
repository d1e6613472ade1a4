"""Hybrid message search: rankers -> RRF -> conversation-aware rescoring.

Settings are frozen presets (``PRESETS``), never mutated per call. The I/O is
confined to ``search``; the rescoring steps are pure functions over score maps
so they can be tested and reused by an async front end.
"""

from __future__ import annotations

import time
import weakref
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

import numpy as np

from ..embed.base import Embedder
from ..embed.base import query_vector as query_vector_of
from ..lang.query import asks_when, names_in
from ..lang.temporal import TimeIntent
from ..lang.text import person_key
from ..lang.timeground import find_times
from ..model import Hit, Message
from ..store.base import Store
from ..store.sql import Filters
from .fusion import rrf
from .links import LINK_RANKERS, as_known_by, link_rankings, open_claims, vote
from .rerank import RerankConfig, features, rerank
from .route import Route
from .search_config import RANKERS, SearchConfig

CLAIM_RANKERS = ("claims_bm25", "claims_dense")
EPISODE_RANKERS = ("episodes_bm25", "episodes_dense")
ALL_RANKERS = (*RANKERS, *CLAIM_RANKERS, *EPISODE_RANKERS, *LINK_RANKERS)
# Rankers that use the query's vector (a front end embeds the query only for these):
# "scenes" needs it, the entity rankers order their claims by it when they have it.
VECTOR_RANKERS = frozenset({"dense", "claims_dense", "episodes_dense", *LINK_RANKERS})
# Where a store's keyword search takes a while (a large store), the query is embedded
# and the dense ranking run on another thread meanwhile: the model and the database
# both run outside the GIL, so the search waits for the slower side instead of both
# (at a million messages on PostgreSQL, 28 -> 20 ms p50 a one-conversation search). A
# fast keyword search is mostly Python, and the two threads would take turns at the
# GIL instead (1.5 ms more a search on a store of 50 messages). Threads are started as
# concurrent searches need them (a server's requests), up to 32.
_EMBEDDING = ThreadPoolExecutor(max_workers=32, thread_name_prefix="archivist-query")
OVERLAP_FROM = 0.003  # seconds the store's last keyword search took
_KEYWORD_SECONDS: weakref.WeakKeyDictionary[Store, float] = weakref.WeakKeyDictionary()


PRESETS: Mapping[str, SearchConfig] = {
    "bm25": SearchConfig("bm25", rankers=("bm25",)),
    "dense": SearchConfig("dense", rankers=("dense",)),
    "rrf": SearchConfig("rrf"),
    "claims": SearchConfig("claims", rankers=CLAIM_RANKERS),
    "episodes": SearchConfig("episodes", rankers=EPISODE_RANKERS),
    "scenes": SearchConfig("scenes", rankers=("scenes",)),
    "dossiers": SearchConfig("dossiers", rankers=("dossiers",)),
    "entities": SearchConfig("entities", rankers=("entities",)),
    # Measured on the LoCoMo development subset (README, "Retrieval choices"):
    # a sharper RRF (k=20) lets the speaker boost and neighbour smoothing act
    # on well-ranked hits instead of reshuffling the long tail; claim vectors
    # vote for their evidence messages (claim BM25 measured worse: left out);
    # "when" questions favour messages that carry a time expression; a period the
    # question names (routed searches) boosts messages inside it, soft (a hard
    # filter measured worse); as of a time, messages whose claims had all
    # closed are left out unless the question asks about the past; the head is
    # re-ranked by claim importance (salience, recency measured no better).
    "archivist": SearchConfig(
        "archivist",
        rankers=("bm25", "dense", "claims_dense"),
        rrf_k=20,
        person_boost=0.5,
        neighbour_weight=0.5,
        when_boost=0.2,
        time_boost=1.0,
        time_grace_days=31.0,
        stale_weight=0.0,
        rerank=RerankConfig("importance", importance=0.2),
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
    route: Route | None = None  # set by a routed search (MemoryService.search(route=True))


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
    *,
    intent: TimeIntent | None = None,
    at: datetime | None = None,
) -> list[Hit]:
    """Top-k messages for ``query`` under ``filters``, scored by ``config``.

    ``intent`` is the period the question asks about (soft unless the preset
    filters on explicit windows); ``at`` searches memory as it stood then:
    nothing said later, no vote from claims closed by then.
    """
    trace = trace if trace is not None else SearchTrace()
    people = tuple(people)
    filters = _narrowed(filters, config, intent, at)
    rankings, query_vector = _message_rankings(
        store, embedder, query, filters, config, trace, query_vector
    )
    probe = _Probe(store, embedder, query, query_vector, filters, config)
    matched_claims, found_claims = _claim_rankings(probe, rankings, at)
    model = embedder.name if embedder is not None else None
    link_rankings(
        store,
        model,
        query,
        query_vector,
        filters,
        config,
        rankings,
        matched_claims,
        found_claims,
        at,
        names_in(query, people) if "dossiers" in config.rankers else (),
    )
    trace.rankings = rankings
    t = time.perf_counter()
    scores = rrf(rankings, k=config.rrf_k, weights=dict(config.weights) or None)
    messages = store.messages_by_rowid(scores)
    expanded_from: dict[int, str] = {}
    if config.neighbour_weight:
        span = config.neighbour_span
        top = [r for r, _ in top_items(scores, config.expand_top) if r in messages]
        spots = ((messages[r].conversation, messages[r].seq) for r in top)
        near = store.around(spots, span, span, filters)
        for r in top:
            source = messages[r]
            for nr, nm in near:
                if (
                    nr not in messages
                    and nm.conversation == source.conversation
                    and abs(nm.seq - source.seq) <= span
                ):
                    messages[nr] = nm
                    expanded_from[nr] = source.id
        position = {r: (m.conversation, m.seq) for r, m in messages.items()}
        scores = smooth_neighbours(scores, position, config.neighbour_weight, config.neighbour_span)
    head = [r for r, _ in top_items(scores, max(k, config.expand_top) * 2)]
    if config.when_boost and asks_when(query):
        # Only the head can change places in the top k; parsing times costs ~0.2 ms a message.
        timed = {r for r in head if mentions_time(messages[r].text, messages[r].timestamp)}
        scores = {r: s * (1.0 + config.when_boost) if r in timed else s for r, s in scores.items()}
    if config.time_boost and intent is not None:
        inside = in_window(messages, head, intent, timedelta(days=config.time_grace_days))
        scores = {r: s * (1.0 + config.time_boost) if r in inside else s for r, s in scores.items()}
    if config.person_boost:
        trace.names = names_in(query, people)
        speakers = {r: m.speaker for r, m in messages.items()}
        scores = boost_speakers(scores, speakers, trace.names, config.person_boost)
    scores = _as_of(store, scores, messages, query, config, intent, at, k)
    top = top_items(scores, k)
    hits = _hits(store, top, messages, rankings, matched_claims, expanded_from)
    trace.seconds["rescore"] = time.perf_counter() - t
    return hits


def _narrowed(
    filters: Filters, config: SearchConfig, intent: TimeIntent | None, at: datetime | None
) -> Filters:
    """The caller's filters, cut at ``at`` and, for a hard preset, to an explicit window."""
    if at is not None and (filters.until is None or filters.until > at):
        filters = replace(filters, until=at)
    if config.hard_time and intent is not None and intent.explicit:
        grace = timedelta(days=config.time_grace_days)
        since = max((d for d in (filters.since, intent.since) if d), default=None)
        ends = [d for d in (filters.until, intent.until and intent.until + grace) if d]
        filters = replace(filters, since=since, until=min(ends, default=None))
    return filters


def _message_rankings(
    store: Store,
    embedder: Embedder | None,
    query: str,
    filters: Filters,
    config: SearchConfig,
    trace: SearchTrace,
    query_vector: np.ndarray | None,
) -> tuple[dict[str, list[int]], np.ndarray | None]:
    """BM25 and dense rankings over messages, and the query vector (embedded once).

    Where the store's keyword search is slow, the vector side (embedding the query,
    then the dense ranking) runs on another thread meanwhile (``_EMBEDDING``)."""
    rankings: dict[str, list[int]] = {}
    embed = bool(VECTOR_RANKERS & set(config.rankers)) and query_vector is None
    dense = "dense" in config.rankers
    if embedder is None:
        embed = dense = False
    side = (filters, config.candidates, embed, dense)
    beside = None
    if (
        (embed or dense)
        and "bm25" in config.rankers
        and _KEYWORD_SECONDS.get(store, 0) >= OVERLAP_FROM
    ):
        beside = _EMBEDDING.submit(_vector_side, store, embedder, query, query_vector, *side)
    if "bm25" in config.rankers:
        t = time.perf_counter()
        rankings["bm25"] = [r for r, _ in store.keyword_search(query, filters, config.candidates)]
        trace.seconds["bm25"] = _KEYWORD_SECONDS[store] = time.perf_counter() - t
    if beside is not None:
        query_vector, seconds, ranked = beside.result()
    else:
        query_vector, seconds, ranked = _vector_side(store, embedder, query, query_vector, *side)
    trace.seconds.update(seconds)
    if ranked is not None:
        rankings["dense"] = ranked
    return rankings, query_vector


def _vector_side(
    store: Store,
    embedder: Embedder | None,
    query: str,
    query_vector: np.ndarray | None,
    filters: Filters,
    candidates: int,
    embed: bool,
    dense: bool,
) -> tuple[np.ndarray | None, dict[str, float], list[int] | None]:
    """The query's vector (embedded when ``embed``, else as given) and, when ``dense``,
    the dense ranking; with the seconds each took."""
    seconds: dict[str, float] = {}
    if embed and embedder is not None:
        t = time.perf_counter()
        query_vector = query_vector_of(embedder, query)
        seconds["embed"] = time.perf_counter() - t
    if not dense or embedder is None:
        return query_vector, seconds, None
    t = time.perf_counter()
    found = store.vector_search(embedder.name, query_vector, filters, candidates)
    seconds["dense"] = time.perf_counter() - t
    return query_vector, seconds, [r for r, _ in found]


def in_window(
    messages: Mapping[int, Message], rowids: Iterable[int], intent: TimeIntent, grace: timedelta
) -> set[int]:
    """Messages said inside the window, or mentioning a time that falls inside it."""
    out = set()
    for r in rowids:
        m = messages[r]
        if intent.contains(m.timestamp, grace) or any(
            intent.overlaps(t.start, t.end, timedelta(0)) for t in find_times(m.text, m.timestamp)
        ):
            out.add(r)
    return out


def _as_of(
    store: Store,
    scores: dict[int, float],
    messages: Mapping[int, Message],
    query: str,
    config: SearchConfig,
    intent: TimeIntent | None,
    at: datetime | None,
    k: int,
) -> dict[int, float]:
    """Demote stale messages (as of ``at``), then re-rank the head by the preset's weights."""
    history = intent is not None or asks_when(query)
    stale_on = at is not None and config.stale_weight != 1.0 and not history
    if not stale_on and config.rerank is None:
        return scores
    depth = max(k * 2, config.rerank.depth if config.rerank else 0, config.expand_top)
    head = [r for r, _ in top_items(scores, depth)]
    claims = as_known_by(store, store.claims_for_messages(head), at)
    if stale_on:
        stale = {r for r in head if claims.get(r) and not any(c.holds_at(at) for c in claims[r])}
        w = config.stale_weight  # 0 leaves them out, even when nothing else matches
        scores = {r: s * w if r in stale else s for r, s in scores.items() if w or r not in stale}
    if config.rerank is not None:
        rc = config.rerank
        ids = {c.id for r in head for c in claims.get(r, ()) if c.id is not None}
        useful = store.usefulness_scores("claim", ids) if rc.usefulness else {}
        now = at or max((messages[r].timestamp for r in head), default=None)
        feats = {
            r: features(claims.get(r, ()), useful, messages[r].timestamp, now, rc)  # type: ignore[arg-type]
            for r in head[: rc.depth]
        }
        scores = rerank(scores, feats, rc)
    return scores


def _hits(
    store: Store,
    top: list[tuple[int, float]],
    messages: Mapping[int, Message],
    rankings: Mapping[str, list[int]],
    matched_claims: Mapping[int, list[int]],
    expanded_from: Mapping[int, str],
) -> list[Hit]:
    """Hits with their provenance: ranker ranks, matched claims, episode."""
    ranks = {name: {r: i for i, r in enumerate(lst, 1)} for name, lst in rankings.items()}
    claims = store.claims_by_id(c for r, _ in top for c in matched_claims.get(r, ()))
    episodes = store.episodes_for_messages(r for r, _ in top)
    return [
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


@dataclass(frozen=True)
class _Probe:
    """One search's query, its vector and where it looks: what every ranker reads."""

    store: Store
    embedder: Embedder | None
    query: str
    query_vector: np.ndarray | None
    filters: Filters
    config: SearchConfig


def _find_derived(kind: str, p: _Probe) -> dict[str, list[int]]:
    """Ids of ``kind`` ("claims" or "episodes") ranked by its keyword and vector rankers."""
    keyword, vector = {
        "claims": (p.store.claim_keyword_search, p.store.claim_vector_search),
        "episodes": (p.store.episode_keyword_search, p.store.episode_vector_search),
    }[kind]
    found: dict[str, list[int]] = {}
    limit = p.config.candidates
    if f"{kind}_bm25" in p.config.rankers:
        found[f"{kind}_bm25"] = [i for i, _ in keyword(p.query, p.filters, limit)]
    if (
        f"{kind}_dense" in p.config.rankers
        and p.embedder is not None
        and p.query_vector is not None
    ):
        found[f"{kind}_dense"] = [
            i for i, _ in vector(p.embedder.name, p.query_vector, p.filters, limit)
        ]
    return found


def _claim_rankings(
    p: _Probe, rankings: dict[str, list[int]], at: datetime | None = None
) -> tuple[dict[int, list[int]], dict[str, list[int]]]:
    """Rank claims and episodes and turn each ranking into one over their messages.

    Index fine, return coarse: a claim found at rank r votes for its evidence
    messages at rank r (an episode for its messages), so they lift the messages
    that support them without crowding them out of the k results. Returns
    message rowid -> claim ids, and each claim ranker's claim ids (best first).
    As of ``at``, claims closed by then do not vote.
    """
    store, filters = p.store, p.filters
    episodes = _find_derived("episodes", p)
    if episodes:
        members = store.episode_message_rowids({e for ids in episodes.values() for e in ids})
        # an episode passes the filters if one of its messages does; each message must too
        allowed = store.filter_rowids({r for rs in members.values() for r in rs}, filters)
        for name, ids in episodes.items():
            rankings[name] = list(
                dict.fromkeys(r for e in ids for r in members.get(e, ()) if r in allowed)
            )
    found = _find_derived("claims", p)
    if not found:
        return {}, {}
    if at is not None:  # claims that do not hold at ``at`` (Claim.holds_at) do not vote
        voters = open_claims(store, (c for ids in found.values() for c in ids), at)
        found = {n: [c for c in ids if c in voters] for n, ids in found.items()}
    evidence = store.claim_evidence_rowids({c for ids in found.values() for c in ids})
    matched: dict[int, list[int]] = {}
    for name, ids in found.items():
        rankings[name] = vote(ids, evidence, matched)
    return matched, found
