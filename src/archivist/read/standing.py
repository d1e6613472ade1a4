"""The person model's standing items in a turn's context, reached by meaning.

A value, a goal, a standing state or a lesson is said once and matters for months,
when a later turn needs it without sharing its words ("let my nephew cut the
queue" needs "I believe in fair treatment"). Search by words misses it and key info
cut to the turn's words drops it. So a context built for a person's own turn offers
that person's standing items that search did not reach: their current first-hand
claims whose facet (the judge's kind of the sentence) is one of
``FACETS``, ranked by how much the turn bears on them (``judge/bears.py``: the
embedder's space mapped from turns toward what they need, learned from cue/trigger
pairs), with their own share of the budget (``ContextConfig`` caps ``standing``).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import numpy as np

from ..embed.base import query_vector as query_vector_of
from ..judge.bears import bearing, turn_map
from ..model import Claim, Hit, Person
from .context_lines import Candidate, claim_line

FACETS = ("value", "goal", "lesson", "state", "habit", "preference")
MAX_ITEMS = 400  # a person's standing items scored per turn, newest first
OFFERED = 40  # the best scored of them offered to the section (it holds a handful)
# an item the turn bears on less than this (the cosine in the map's space; the floor was
# measured there, so without a map for the embedder there is none) is not offered: on the dev
# cue/trigger set, cue in a 1,000-token context 0.628 with none, 0.65 at 0.07 and 0.1,
# 0.606 at 0.13, 0.561 at 0.2 (no item left from 0.3)
MIN_BEARING = 0.1


def standing_claims(store, persons: Sequence[Person], at: datetime) -> list[Claim]:
    """The persons' current first-hand standing claims about themselves at ``at``."""
    out: dict[int, Claim] = {}
    for p in persons:
        for c in store.self_claims(p.identities, FACETS):
            if c.holds_at(at) and c.id is not None:
                out[c.id] = c
    return sorted(out.values(), key=lambda c: c.said_at, reverse=True)[:MAX_ITEMS]


def standing(core, query: str, persons: Sequence[Person], at: datetime) -> list[Candidate]:
    """The candidates of the standing section: one per standing claim, scored by
    ``bearing`` (a claim with no stored vector is left out)."""
    claims = standing_claims(core.store, persons, at)
    if not claims or core.embedder is None:
        return []
    vectors = core.store.claim_vectors(core.embedder.name, [c.id for c in claims])
    kept = [c for c in claims if c.id in vectors]
    if not kept:
        return []
    query_vector = query_vector_of(core.embedder, query)
    w = turn_map(core.embedder.name, len(query_vector))
    scores = bearing(query_vector, np.stack([vectors[c.id] for c in kept]), w)
    floor = MIN_BEARING if w is not None else 0.0
    best = [i for i in np.argsort(-scores, kind="stable")[:OFFERED] if scores[i] >= floor]
    return [
        Candidate(
            "standing",
            str(c.id),
            claim_line(c),
            relevance=float(s),
            importance=c.importance / 10,
            salience=c.salience / 10,
            when=c.said_at,
            conversation=c.conversation,
            body=c.text,
            evidence=frozenset((c.conversation, e) for e in c.evidence),
        )
        for c, s in ((kept[i], scores[i]) for i in best)
    ]


def unreached(
    items: Sequence[Candidate], hits: Sequence[Hit], claims: Sequence[Candidate]
) -> list[Candidate]:
    """The standing items search did not reach: one whose claim is a candidate of the
    claims section, or whose turns are all search hits, is ranked there with the rest."""
    found = {(h.message.conversation, h.message.id) for h in hits}
    offered = {c.id for c in claims}
    return [c for c in items if c.id not in offered and not (c.evidence and c.evidence <= found)]
