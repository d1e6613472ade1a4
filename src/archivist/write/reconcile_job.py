"""The reconcile job: layers 1-2 for each conversation with claims not yet reconciled.

Reads the conversation's claims and vectors, decides (write/reconcile.py and
write/entities.py, pure), and writes everything in one transaction. A claim is
marked reconciled in that same transaction, so a crash leaves it to the next
run and a second run with nothing new changes nothing. Nothing is locked while
deciding (an LLM judge may take a while): the write checks that what was read
still holds, and when another process reconciled or re-extracted the
conversation meanwhile, the decision is made again from what it wrote.
"""

from __future__ import annotations

import logging
import random
import time
from typing import TYPE_CHECKING

import numpy as np

from ..errors import StaleReconciliation
from ..lang.text import person_key
from ..llm.base import LLMError
from ..model import Claim
from ..prompts import judge_claims as judge_prompt
from ..prompts import same_entity as entity_prompt
from ..store.base import ReconcileBatch
from ..store.records import ReconcileBasis
from .entities import EntityWork, Verifier, entity_text, resolve_mentions
from .index_text import text_hash
from .reconcile import Judge, ReconcileConfig, reconcile_claims

if TYPE_CHECKING:
    from ..core import Core

log = logging.getLogger("archivist.write")

JUDGE_BATCH = 12  # items per judge_claims call
VERIFY_BATCH = 20  # pairs per same_entity call
# A stale decision is made again up to this many times, after a random pause of up to
# RETRY_PAUSE_S x 2**try (capped at 64x): each stale write means another writer
# committed a reconciliation, so a few tries see the claims judged by someone.
RECONCILE_TRIES = 30
RETRY_PAUSE_S = 0.005


def run_reconcile(core: Core, payload: dict) -> dict:
    """Reconcile one conversation (``payload["conversation"]``) or all of them."""
    convs = (
        [payload["conversation"]]
        if payload.get("conversation")
        else [c["id"] for c in core.store.conversations()]
    )
    totals: dict[str, int] = {}
    config = ReconcileConfig(policy=core.settings.conflict_policy)
    for cid in convs:
        for k, v in reconcile_conversation(core, cid, config).items():
            totals[k] = totals.get(k, 0) + v
    if not totals.get("claims"):
        return {"skipped": "no new claims to reconcile"}
    return totals


def _vector_fn(core: Core):
    def vectors(texts: list[str]) -> np.ndarray:
        hashes = [text_hash(t) for t in texts]
        got, _ = core.embed_missing(dict(zip(hashes, texts, strict=True)), None)
        mat = np.stack([got[h] for h in hashes]).astype(np.float32)
        norms = np.linalg.norm(mat, axis=1, keepdims=True)
        return mat / np.where(norms == 0, 1, norms)

    return vectors


def reconcile_conversation(core: Core, cid: str, config: ReconcileConfig) -> dict:
    """Layers 1-2 for one conversation; returns what was found.

    A decision gone stale before it was written (another writer reconciled the
    conversation meanwhile) is made again; past RECONCILE_TRIES its claims are
    left unreconciled, for the next run (``deferred``).
    """
    for attempt in range(RECONCILE_TRIES):
        try:
            return _reconcile_once(core, cid, config)
        except StaleReconciliation:
            time.sleep(random.uniform(0, RETRY_PAUSE_S * 2 ** min(attempt, 6)))
    log.warning("%s: reconciliation left to the next run after %d stale tries", cid, attempt + 1)
    return {"deferred": 1}


def _reconcile_once(core: Core, cid: str, config: ReconcileConfig) -> dict:
    """Read, decide and write one conversation's reconciliation (StaleReconciliation when
    what was read changed before the write)."""
    done, todo = core.store.claims_to_reconcile(cid)
    if not todo:
        return {}
    # a user declared one person across chats: their other chats' current claims are
    # judged too ("Quit St Mary's!" in one ends "I'm a nurse at St Mary's" in another)
    elsewhere = core.store.claims_of_declared_elsewhere(cid, {c.speaker for c in todo})
    model = core.embedder.name
    vectors = core.store.claim_vectors(model, [c.id for c in (*elsewhere, *done, *todo)])
    meaning = core.judge
    judge = _judge(core) if core.llm is not None and meaning is None else None
    before = sorted([*elsewhere, *done], key=lambda c: (c.said_at, c.id or 0))
    outcome = reconcile_claims(before, todo, vectors, config, judge, meaning)
    existing = core.store.list_entities(conversation=cid, limit=1_000_000)
    work = EntityWork(entities=list(existing))
    before = {(person_key(c.speaker), person_key(m.name)) for c in todo for m in c.entities}
    now = max(c.said_at for c in todo)
    resolve_mentions(work, todo, _vector_fn(core), _verifier(core, now) if core.llm else None)
    entities = []
    wanted: dict[str, str] = {}
    for i in sorted(work.changed):
        e = work.entities[i]
        text = entity_text(e.name, e.kind, e.roles)
        wanted[text_hash(text)] = text
        search = " ".join([e.name, *e.aliases, *e.roles, e.kind])
        entities.append((e, tuple(sorted(work.links.get(i, ()))), search, text_hash(text)))
    vecs, _ = core.embed_missing(wanted, None)
    core.store.save_reconciliation(
        ReconcileBatch(
            conversation=cid,
            updates={k: v for k, v in outcome.updates.items() if k is not None},
            events=outcome.events,
            conflicts=outcome.conflicts,
            entities=entities,
            reconciled=[c.id for c in todo if c.id is not None],
            model=model,
            vectors=vecs,
            basis=ReconcileBasis(
                todo=tuple(c.id for c in todo if c.id is not None),
                done=len(done),
                entities=len(existing),
                top_entity=max((e.id or 0 for e in existing), default=0),
            ),
        )
    )
    return {
        **outcome.counts,
        "entity_mentions": work.mentions,
        "entity_names_before": len(before),
        "entities_new": work.stages["new"],
        **{f"entities_matched_{k}": v for k, v in work.stages.items() if k != "new"},
    }


def _judge(core: Core) -> Judge:
    """The LLM's claim verdicts in batches; a failed batch leaves its claims as new."""

    def judge(items: list[tuple[Claim, list[Claim]]]):
        verdicts: list[tuple[str, int | None, str, str, str]] = []
        for i in range(0, len(items), JUDGE_BATCH):
            batch = items[i : i + JUDGE_BATCH]
            now = max(c.said_at for c, _ in batch)
            got: dict[int, tuple[str, int | None, str, str, str]] = {}
            try:
                out = core.llm_call(
                    judge_prompt, judge_prompt.build(batch, now), judge_prompt.JudgeOut
                )
                for j in out.judgements:
                    target = j.target - 1 if j.target is not None else None
                    got[j.item - 1] = (j.verdict, target, j.attribute, j.old_value, j.new_value)
            except LLMError:
                pass
            verdicts += [got.get(k, ("new", None, "", "", "")) for k in range(len(batch))]
        return verdicts

    return judge


def _verifier(core: Core, now) -> Verifier:
    def verify(pairs: list[tuple[str, str, str]]) -> list[bool]:
        answers: list[bool] = []
        for i in range(0, len(pairs), VERIFY_BATCH):
            batch = pairs[i : i + VERIFY_BATCH]
            try:
                out = core.llm_call(
                    entity_prompt,
                    entity_prompt.build(batch, now),
                    entity_prompt.SameEntityOut,
                )
                same = {p.pair - 1: p.same for p in out.pairs}
            except LLMError:
                same = {}
            answers += [same.get(k, False) for k in range(len(batch))]
        return answers

    return verify
