"""Extraction: the archivist reads sessions it has not read (or that grew) and its output is saved.

A session that only grew at its end is read from where the last run stopped
and its new episodes and claims are added (write/extract_plan.py); one that
changed otherwise is read again whole. Each session's episodes, claims and
progress marker are written in one transaction, so an interrupted run resumes
where it stopped. Sessions run in parallel batches (LLM calls overlap within
the concurrency limit); each finished session is saved, in order, by the
calling thread alone.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime
from functools import lru_cache

from ..core import Core, Progress
from ..errors import StaleExtraction
from ..lang.subject import kin_names
from ..lang.text import query_terms
from ..llm.structured import run_parallel
from ..model import Claim, Message, date_in_range
from ..store.base import IndexedClaim, IndexedEpisode
from .archivist import Archivist, HeuristicArchivist, SessionResult
from .extract_plan import ExtractReport, SessionPlan, plan_session, waits
from .heuristic import echoes
from .index_text import (
    DEFAULT_INDEX,
    IndexOptions,
    claim_embed_text,
    claim_search_text,
    episode_embed_text,
    episode_search_text,
    text_hash,
)
from .pending import embed_pending


def default_archivist(core: Core) -> Archivist:
    """The LLM archivist when a model is configured, else the heuristic one."""
    if core.llm is None:
        return HeuristicArchivist(judge=core.judge)
    from .llm_archivist import LLMArchivist  # pydantic only when used

    return LLMArchivist(
        core.llm,
        cache=core.response_cache,
        ledger=core.ledger,
        concurrency=core.settings.llm_concurrency,
    )


def _by_session(messages: Sequence[Message]) -> dict[int, list[Message]]:
    out: dict[int, list[Message]] = {}
    for m in sorted(messages, key=lambda m: m.seq):
        out.setdefault(m.session, []).append(m)
    return out


def extract(
    core: Core,
    archivist: Archivist,
    conversations: Sequence[str] | None = None,
    progress: Progress | None = None,
    *,
    hold_short_tails: bool = False,
    index: IndexOptions = DEFAULT_INDEX,
) -> ExtractReport:
    """Run ``archivist`` over the sessions of ``conversations`` (default: all) that need it.

    ``hold_short_tails`` (a server's live chats, with an LLM): see Settings.extract_min_tail.
    """
    report = ExtractReport(method=archivist.name)
    ids = (
        list(conversations)
        if conversations is not None
        else [c["id"] for c in core.store.conversations()]
    )
    hold_at = core.clock() if hold_short_tails and core.llm is not None else None
    todo = [p for cid in ids for p in _plans(core, archivist.name, cid, report, hold_at, index)]
    before = core.ledger.summary()
    try:
        _extract_sessions(core, archivist, todo, report, progress)
        if core.settings.reconcile_on_write:
            reconcile_written(core, sorted({p.conversation for p in todo}))
    finally:  # what was spent is recorded even when the run is interrupted
        core.persist_llm_usage(before)
    return report


def reconcile_written(core: Core, conversations: Sequence[str]) -> None:
    """Reconcile the claims just written, so a read right after ``add`` sees the new truth.

    The cheap layers (entity filing; duplicate, refinement and conflict
    judgement of new claims against current ones) run here rather than in the
    next consolidation round, which keeps the heavy jobs (people, scenes,
    summaries, dossiers, key info) and finds these claims already reconciled.
    When a claim was superseded, the conversation's dossiers and key info are
    queued for a refresh at once (run with the next jobs, not a round later).
    """
    from ..jobs import enqueue_refresh
    from .reconcile import ReconcileConfig
    from .reconcile_job import reconcile_conversation

    config = ReconcileConfig(policy=core.settings.conflict_policy)
    changed = [
        cid for cid in conversations if reconcile_conversation(core, cid, config).get("conflicts")
    ]
    if changed:  # a digest may still show what was just replaced: refresh it now
        enqueue_refresh(core.store, changed, f"changed-{time.time_ns()}")


def _plans(
    core: Core,
    method: str,
    cid: str,
    report: ExtractReport,
    hold_at: datetime | None,
    index: IndexOptions,
) -> list[SessionPlan]:
    """The sessions of ``cid`` to read now (skipped and waiting ones are counted in ``report``).

    ``hold_at``: the time by which a short new tail waits for more turns; None: none waits.
    """
    settings = core.settings
    marks = core.store.extraction_marks(cid)
    msgs = [m for _, m in core.store.conversation_messages(cid)]
    embed_pending(core, cid, msgs, index)  # messages stored with embed=False: vectors first
    # A message dated outside MIN_YEAR..MAX_YEAR (stored before input was bounded) is
    # not read: nothing said then can be grounded. `stats` counts such messages.
    msgs = [m for m in msgs if date_in_range(m.timestamp)]
    people = sorted({m.speaker for m in msgs} | {a for m in msgs for a in m.addressees})
    kin = conversation_kin(msgs)
    todo: list[SessionPlan] = []
    for session, group in _by_session(msgs).items():
        plan = plan_session(cid, session, group, people, marks.get(session), method)
        if plan is None:
            report.sessions_skipped += 1
        elif hold_at is not None and waits(
            plan, settings.extract_min_tail, settings.extract_idle_s, hold_at
        ):
            report.sessions_waiting += 1
        else:
            todo.append(replace(plan, kin=kin) if kin else plan)
    return todo


@lru_cache(maxsize=1 << 16)
def _kin_of(speaker: str, text: str) -> tuple[tuple[tuple[str, str], str], ...]:
    return tuple(kin_names([(speaker, text)]).items())


def conversation_kin(msgs: Sequence[Message]) -> dict[tuple[str, str], str]:
    """Each speaker's relatives by name over the conversation ("my mum Halina"); a
    later introduction wins. Read on every extraction, so each message is read once."""
    return {k: name for m in msgs for k, name in _kin_of(m.speaker, m.text)}


def _extract_sessions(
    core: Core,
    archivist: Archivist,
    todo: list[SessionPlan],
    report: ExtractReport,
    progress: Progress | None,
) -> None:
    width = getattr(archivist, "concurrency", 1)
    step = max(1, width * 2)
    for i in range(0, len(todo), step):
        batch = todo[i : i + step]
        results = run_parallel(
            lambda p: archivist.process_session(
                p.messages, p.participants, context=p.context, kin=p.kin
            ),
            batch,
            max(1, width),
        )
        for plan, result in zip(batch, results, strict=True):
            if isinstance(result, Exception):
                raise result
            result = without_restated(core, plan, result)
            try:
                save_session(core, plan, result)
            except StaleExtraction:  # another process extracted it first; it is up to date
                report.sessions_skipped += 1
                continue
            report.add(result, plan)
            if progress:
                progress(len(plan.messages))


def without_restated(core: Core, plan: SessionPlan, result: SessionResult) -> SessionResult:
    """``result`` less the claims of assistant replies that only say back the memory the
    proxy showed them (the context log): "As you mentioned, you're vegan now" restates
    another conversation's fact and is no evidence of its own. A claim goes when every
    message it cites is such a reply and its words are an echo of what that reply was
    shown (``heuristic.echoes``), whichever archivist made it."""
    replies = {m.id: m.text for m in plan.messages if m.role == "assistant"}
    if not replies or not result.claims:
        return result
    shown = core.store.contexts_shown(plan.conversation, replies.values())
    if not shown:
        return result
    seen = {mid: set(query_terms(" ".join(shown.get(text, ())))) for mid, text in replies.items()}

    def restates(c: Claim) -> bool:
        cited = [seen.get(e) for e in c.evidence]
        if not cited or not all(cited):
            return False
        return echoes(c.text, set().union(*cited))

    kept = [(ep, c) for ep, c in result.claims if not restates(c)]
    if len(kept) == len(result.claims):
        return result
    dropped = len(result.claims) - len(kept)
    note = f"{dropped} claim(s) of assistant replies only restated the memory shown"
    return replace(result, claims=kept, notes=[*result.notes, note])


def save_session(core: Core, plan: SessionPlan, result: SessionResult) -> None:
    """Write one session's episodes and claims (with their vectors) and its progress mark."""
    rows = [
        IndexedClaim(c, ep, claim_search_text(c), text_hash(claim_embed_text(c)))
        for ep, c in result.claims
    ]
    episodes = [
        IndexedEpisode(e, episode_search_text(e), text_hash(episode_embed_text(e)))
        for e in result.episodes
    ]
    wanted = {r.embed_hash: claim_embed_text(r.claim) for r in rows}
    wanted |= {e.embed_hash: episode_embed_text(e.episode) for e in episodes}
    vectors, _ = core.embed_missing(wanted)
    core.store.save_extraction(
        plan.conversation,
        plan.session,
        episodes,
        rows,
        core.embedder.name,
        vectors,
        n_messages=plan.n_messages,
        method=result.method,
        rejected=result.rejected,
        last_message=plan.last_message,
        append_after=plan.append_after,
        if_mark=plan.mark or "none",  # a session another process extracted first is skipped
    )
