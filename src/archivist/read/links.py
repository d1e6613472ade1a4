"""Rankers over consolidation output and entity links: scenes, dossiers, named entities.

Each turns a coarse match into a ranking of messages, the way claims and
episodes vote in read/search.py: links narrow the candidates, and the query's
own similarity orders them.

    scenes      the query's nearest scenes (centroid cosine) let through their
                member messages, in the dense ranking's order: a theme filter
                (silent where the filters leave no other scene to exclude)
    dossiers    entities whose dossier shares the query's rarer words (IDF-weighted;
                the names of people the query names do not count)
    entities    entities the query names (name or alias, as a phrase)
    entity_hop  entities of the top claims the claim rankers found, one hop out

The three entity rankers let the claims that mention their entities vote for
those claims' evidence, the claims nearest the query first. Claims that do not
hold at ``at`` (``Claim.holds_at``: an expired foresight, a superseded fact) do
not vote, and every message passes the search's filters. The stores index no
dossier text, so ``dossiers`` scores the (capped) dossiers of the filtered
conversations here.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from functools import lru_cache
from typing import TYPE_CHECKING, TypeVar

import numpy as np

from ..lang.text import STOPWORDS
from ..lang.text import match_words as words
from ..model import Claim, Entity
from ..profile import claim_as_of
from ..store.base import Store
from ..store.sql import Filters

K = TypeVar("K")

if TYPE_CHECKING:
    from .search_config import SearchConfig

LINK_RANKERS = ("scenes", "dossiers", "entities", "entity_hop")
DOSSIERS_SCANNED = 2000  # most-mentioned entities whose dossiers are scored per search


# -- pure matching ---------------------------------------------------------------------


@lru_cache(maxsize=2 * DOSSIERS_SCANNED)
def _word_set(text: str) -> frozenset[str]:
    """The distinct words of a dossier (dossiers change rarely: searches reuse the cut)."""
    return frozenset(words(text))


def _contains(seq: Sequence[str], part: Sequence[str]) -> bool:
    n = len(part)
    return any(list(seq[i : i + n]) == list(part) for i in range(len(seq) - n + 1))


def named_entities(query: str, entities: Iterable[Entity]) -> list[Entity]:
    """The entities whose name or an alias occurs in ``query`` as a phrase.

    Longer matches first ("Jack Russell" before "Jack"), then the more mentioned.
    A name made only of stopwords ("The", "May I") never matches.
    """
    q = words(query)
    found: list[tuple[int, Entity]] = []
    for e in entities:
        best = 0
        for name in (e.name, *e.aliases):
            w = words(name)
            if w and any(x not in STOPWORDS for x in w) and _contains(q, w):
                best = max(best, len(w))
        if best:
            found.append((best, e))
    found.sort(key=lambda p: (-p[0], -p[1].mentions, p[1].id or 0))
    return [e for _, e in found]


def keyword_scores(
    query: str, docs: Sequence[tuple[int, str]], ignore: Iterable[str] = ()
) -> list[tuple[int, float]]:
    """Documents sharing a word with ``query``, scored by the IDF of the words they share.

    Dossiers are short and capped, so term frequency and length say little;
    each shared word adds its IDF within ``docs`` (FTS5's formula, floored at
    1e-6), so words most dossiers hold count for ~nothing. Words of ``ignore``
    (the people the query names: dossiers attribute every claim to a speaker)
    do not match at all.
    """
    skip = {w for name in ignore for w in words(name)}
    terms = {w for w in words(query) if w not in STOPWORDS and len(w) > 1} - skip
    if not terms or not docs:
        return []
    shared = [(i, terms & _word_set(text)) for i, text in docs]
    df = Counter(t for _, s in shared for t in s)
    n = len(docs)
    idf = {t: max(math.log((n - d + 0.5) / (d + 0.5)), 1e-6) for t, d in df.items()}
    scored = [(i, sum(idf[t] for t in s)) for i, s in shared if s]
    return sorted(scored, key=lambda p: (-p[1], p[0]))


def interleave(lists: Iterable[Sequence[int]], limit: int) -> list[int]:
    """The first ``limit`` distinct ids taking each list's next item in turn."""
    out: dict[int, None] = {}
    pending = [list(x) for x in lists if x]
    i = 0
    while pending and len(out) < limit:
        lst = pending[i % len(pending)]
        out.setdefault(lst.pop(0), None)
        if not lst:
            pending.remove(lst)
        else:
            i += 1
    return list(out)[:limit]


# -- the rankers -----------------------------------------------------------------------


def link_rankings(
    store: Store,
    model: str | None,
    query: str,
    query_vector: np.ndarray | None,
    filters: Filters,
    config: SearchConfig,
    rankings: dict[str, list[int]],
    matched: dict[int, list[int]],
    found_claims: Mapping[str, list[int]],
    at: datetime | None,
    names: Sequence[str] = (),
) -> None:
    """Add the preset's link rankers to ``rankings`` (in place), and the claims that voted
    to ``matched`` (message rowid -> claim ids). ``found_claims``: the claim rankers'
    claim ids, best first (what ``entity_hop`` expands); ``names``: people the query
    names (not dossier content)."""
    wanted = [r for r in LINK_RANKERS if r in config.rankers]
    if not wanted:
        return
    if "scenes" in wanted and query_vector is not None and model is not None:
        rankings["scenes"] = _scene_ranking(store, model, query_vector, filters, config, rankings)
    entity_lists: dict[str, tuple[list[int], set[int]]] = {}
    if "dossiers" in wanted:
        docs = store.dossier_texts(filters, DOSSIERS_SCANNED)
        hits = keyword_scores(query, docs, names)[: config.entity_top]
        entity_lists["dossiers"] = ([i for i, _ in hits], set())
    if "entities" in wanted:
        named = named_entities(query, store.entity_search(query, filters, 100))
        entity_lists["entities"] = ([e.id for e in named[: config.entity_top] if e.id], set())
    if "entity_hop" in wanted and found_claims:
        seeds = interleave(found_claims.values(), config.hop_from)
        links = store.claim_entity_ids(seeds)
        hop = list(dict.fromkeys(e for c in seeds for e in links.get(c, ())))
        entity_lists["entity_hop"] = (hop[: config.entity_top], set(seeds))
    if not entity_lists:
        return
    claim_ids = store.entity_claim_ids(
        {e for ids, _ in entity_lists.values() for e in ids}, config.entity_claims
    )
    voters = open_claims(store, [c for cs in claim_ids.values() for c in cs], at)
    near = _closeness(store, model, query_vector, voters)
    evidence = store.claim_evidence_rowids(voters)
    allowed = store.filter_rowids({r for rs in evidence.values() for r in rs}, filters)
    for name, (entity_ids, skip) in entity_lists.items():
        # entity by entity, then nearest the query first (a stable sort: ties keep that order)
        mine = [c for e in entity_ids for c in claim_ids.get(e, ()) if c in voters]
        mine = sorted(dict.fromkeys(c for c in mine if c not in skip), key=lambda c: -near[c])
        rankings[name] = vote(mine, evidence, matched, allowed)


def vote(
    claim_ids: Iterable[int],
    evidence: Mapping[int, Sequence[int]],
    matched: dict[int, list[int]],
    allowed: set[int] | None = None,
) -> list[int]:
    """The claims' evidence messages in the claims' order (those in ``allowed`` only, when
    given): each claim votes for its evidence at its own rank. Records in ``matched``
    (message rowid -> claim ids) which claims voted for each message."""
    ranked: dict[int, None] = {}
    for c in claim_ids:
        for r in evidence.get(c, ()):
            if allowed is None or r in allowed:
                ranked.setdefault(r, None)
                if c not in matched.setdefault(r, []):
                    matched[r].append(c)
    return list(ranked)


def _scene_ranking(
    store: Store,
    model: str,
    query_vector: np.ndarray,
    filters: Filters,
    config: SearchConfig,
    rankings: Mapping[str, list[int]],
) -> list[int]:
    """The dense ranking cut to the members of the query's ``scene_top`` nearest scenes.

    Where the filters leave no more scenes than that, the cut would exclude
    nothing and only count the dense ranking twice: the ranker abstains.
    """
    found = store.scene_search(query_vector, filters, config.scene_top + 1)
    if len(found) <= config.scene_top:
        return []
    scenes = [s for s, _ in found[: config.scene_top]]
    members = {r for rs in store.scene_message_rowids(scenes).values() for r in rs}
    dense = rankings.get("dense")
    if dense is None:
        dense = [r for r, _ in store.vector_search(model, query_vector, filters, config.candidates)]
    return [r for r in dense if r in members]


def open_claims(store: Store, ids: Iterable[int], at: datetime | None) -> set[int]:
    """The claims that may vote: all of them, or as of ``at`` those holding then."""
    ids = set(ids)
    if at is None:
        return ids
    known = {c.id: c for c in as_known(store, store.claims_by_id(ids).values(), at)}
    return {c for c in ids if c in known and known[c].holds_at(at)}


def as_known(store: Store, claims: Iterable[Claim], at: datetime | None) -> list[Claim]:
    """``claims`` as memory knew them at ``at`` (``profile.claim_as_of``, the one rule):
    one superseded by a claim said after ``at`` was still current then, though its
    close date, the newer value's start, may lie before ``at`` ("I went vegan this
    month" said on the 20th closes pescatarian on the 1st, yet on the 10th memory
    knew only pescatarian)."""
    claims = list(claims)
    if at is None:
        return claims
    replaced = [c.id for c in claims if c.status != "current" and c.replaced_by is not None]
    if not replaced:
        return claims
    histories = store.claim_histories(replaced)
    return [claim_as_of(c, histories.get(c.id, ()), at)[0] for c in claims]


def as_known_by(
    store: Store, found: Mapping[K, Sequence[Claim]], at: datetime | None
) -> dict[K, list[Claim]]:
    """``as_known`` over claims grouped by a key (a message), in one read."""
    known = {c.id: c for c in as_known(store, [c for cs in found.values() for c in cs], at)}
    return {k: [known.get(c.id, c) for c in cs] for k, cs in found.items()}


def _closeness(
    store: Store, model: str | None, query_vector: np.ndarray | None, ids: Iterable[int]
) -> dict[int, float]:
    """Claim id -> cosine of its vector to the query (all 0 without a query vector)."""
    ids = list(ids)
    out = dict.fromkeys(ids, -2.0)  # a claim without a vector comes last
    if query_vector is None or model is None or not ids:
        return dict.fromkeys(ids, 0.0)
    q = np.asarray(query_vector, dtype=np.float32).reshape(-1)
    for c, v in store.claim_vectors(model, ids).items():
        if v.shape[0] == q.shape[0]:
            out[c] = float(v @ q)
    return out
