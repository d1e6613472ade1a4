"""LoCoMo retrieval benchmark: evidence recall@k of archivist against its baselines.

All retrievers run in the same process over the same store and the same
query vectors, so the comparison is fair even on a noisy machine. Category 5
(adversarial) questions have no evidence to recall and are excluded from
recall; the report says how many were left out.
"""

from __future__ import annotations

import platform
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from pathlib import Path

from ..errors import ConfigError
from ..model import Conversation
from ..read.search import ALL_RANKERS, PRESETS, SearchConfig, SearchTrace, search
from ..service import MemoryService
from ..store.sql import Filters
from .metrics import by_category, evidence_recall, mean, percentile

BASELINES = ("bm25", "dense", "rrf")
# "archivist-routed": no conversation given, routing must find it (the figure
# the maintainers measure); both archivist rows search as of the question's
# time (the conversation's last session) with the question's period.
ROUTED = "archivist-routed"
RETRIEVERS = ("archivist", ROUTED, "archivist-messages", *BASELINES)
RECALL_CATEGORIES = (1, 2, 3, 4)
CATEGORY_NAMES = {
    1: "multi-hop",
    2: "temporal",
    3: "open-domain",
    4: "single-hop",
    5: "adversarial",
}


def plus(rankers: Sequence[str], base: str = "archivist") -> SearchConfig:
    """An ablation: preset ``base`` with ``rankers`` added, named ``base+r1+r2``."""
    unknown = [r for r in rankers if r not in ALL_RANKERS]
    if unknown:
        raise ConfigError(f"unknown ranker(s) {', '.join(unknown)}; choose from {ALL_RANKERS}")
    config = PRESETS[base]
    added = tuple(r for r in rankers if r not in config.rankers)
    return replace(config, name="+".join((base, *added)), rankers=(*config.rankers, *added))


def _ticker(
    progress: Callable[[str, int, int], None] | None, stage: str, total: int
) -> Callable[[int], None]:
    """A per-item progress callback reporting cumulative counts for one stage."""
    done = 0

    def tick(n: int) -> None:
        nonlocal done
        done += n
        if progress:
            progress(stage, done, total)

    return tick


def _run_questions(
    memory: MemoryService,
    questions: list[tuple[str, dict]],
    kmax: int,
    retrievers: Sequence[str],
    progress: Callable[[str, int, int], None] | None,
    extra: Mapping[str, SearchConfig] | None = None,
) -> tuple[dict[str, list[tuple[int, list[str]]]], dict[str, list[float]]]:
    """Each retriever's top-k message ids per question, and full-path latencies (archivist's
    and each ``extra`` config's, searched exactly as archivist is).

    Baselines reuse the question's vector, so only the full paths pay for embedding.
    """
    extra = dict(extra or {})
    names = [*retrievers, *(n for n in extra if n not in retrievers)]
    per_retriever: dict[str, list[tuple[int, list[str]]]] = {r: [] for r in names}
    latencies: list[float] = []
    timed: dict[str, list[float]] = {"archivist": latencies, **{n: [] for n in extra}}
    embedder = memory.embedder
    people = memory.people()
    asked = _question_times(memory)
    for i, (cid, q) in enumerate(questions):
        at = asked.get(cid)
        t = time.perf_counter()
        hits = memory.search(
            q["question"], conversation=cid, k=kmax, preset="archivist", at=at, route=True
        )
        latencies.append(time.perf_counter() - t)
        qvec = embedder.embed_batch([q["question"]])[0]
        for name in names:
            if name == "archivist":
                ids = [h.message.id for h in hits]
            elif name in extra:
                t = time.perf_counter()
                found = memory.search(
                    q["question"], conversation=cid, k=kmax, preset=extra[name], at=at, route=True
                )
                timed[name].append(time.perf_counter() - t)
                ids = [h.message.id for h in found]
            elif name == ROUTED:
                found = memory.search(q["question"], k=kmax, preset="archivist", at=at, route=True)
                # a hit in another conversation is a miss, even if its id matches
                ids = [h.message.id if h.message.conversation == cid else "" for h in found]
            else:
                found = search(
                    memory.store,
                    embedder,
                    q["question"],
                    Filters(conversation=cid),
                    kmax,
                    PRESETS[name],
                    people,
                    SearchTrace(),
                    query_vector=qvec,
                )
                ids = [h.message.id for h in found]
            per_retriever[name].append((q["category"], ids))
        if progress:
            progress("questions", i + 1, len(questions))

    return per_retriever, timed


def _question_times(memory: MemoryService) -> dict[str, datetime]:
    """When each conversation's questions are asked: its last message's time."""
    out: dict[str, datetime] = {}
    for c in memory.conversations():
        stamps = [m.timestamp for _, m in memory.store.conversation_messages(c["id"])]
        if stamps:
            out[c["id"]] = max(stamps)
    return out


def _extraction_report(memory: MemoryService, extraction, seconds: float, total: int) -> dict:
    """What the archivist did during the run, and what it cost in LLM calls."""
    calls = memory.llm_summary()["totals"].get("calls", 0)
    return {
        "archivist": extraction.method,
        "sessions_processed": extraction.sessions,
        "sessions_appended": extraction.sessions_appended,
        "sessions_replaced": extraction.sessions_replaced,
        "sessions_already_done": extraction.sessions_skipped,
        "episodes": extraction.episodes,
        "claims": extraction.claims,
        "claims_rejected": extraction.rejected,
        "heuristic_fallbacks": extraction.fallbacks,
        "seconds": round(seconds, 3),
        "claims_in_store": memory.stats()["claims"],
        "llm_calls_per_message": round(calls / total, 4) if total else 0.0,
    }


def _consolidate(memory: MemoryService, conversations: list[str], total: int) -> dict:
    """One consolidation round over the benchmark's conversations, with what it found.

    Reports entities before/after resolution, duplicate claims, conflicts,
    identity decisions, each job's outcome and the LLM calls per ingested
    message spent here (apart from extraction's).
    """
    calls_before = memory.llm_summary()["totals"].get("calls", 0)
    t0 = time.perf_counter()
    jobs = [j for cid in conversations for j in memory.consolidate(cid)]
    seconds = time.perf_counter() - t0
    calls = memory.llm_summary()["totals"].get("calls", 0) - calls_before
    sums: dict[str, dict[str, int]] = {}
    statuses: dict[str, dict[str, int]] = {}
    for j in jobs:
        st = statuses.setdefault(j.kind, {})
        st[j.status] = st.get(j.status, 0) + 1
        for key, value in j.result.items():
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                row = sums.setdefault(j.kind, {})
                row[key] = row.get(key, 0) + value
    rec = sums.get("reconcile", {})
    stats = memory.store.reconcile_stats()
    decisions = memory.store.list_decisions() if hasattr(memory.store, "list_decisions") else []
    return {
        "seconds": round(seconds, 3),
        "entity_names_before": rec.get("entity_names_before", 0),
        "entity_mentions": rec.get("entity_mentions", 0),
        "entities_after": stats["entities"],
        "duplicate_claims": rec.get("duplicates", 0),
        "refined_claims": rec.get("refinements", 0),
        "conflicts": stats["conflicts"],
        "decisions": {
            v: sum(1 for d in decisions if d.verdict == v) for v in ("MERGE", "SEPARATE")
        },
        "jobs": statuses,
        "results": sums,
        "llm_calls": calls,
        "llm_calls_per_message": round(calls / total, 4) if total else 0.0,
        "errors": [f"{j.kind} {j.key}: {j.error}" for j in jobs if j.error][:10],
    }


def run_locomo(
    memory: MemoryService,
    path: str | Path,
    ks: Sequence[int] = (5, 10, 25),
    retrievers: Sequence[str] = RETRIEVERS,
    progress: Callable[[str, int, int], None] | None = None,
    extra: Sequence[SearchConfig] = (),
) -> dict:
    """Ingest the file into ``memory`` (idempotent) and score every retriever.

    ``extra``: more search configs (ablations, see ``plus``), each scored and
    timed the way archivist is; a store that already holds the file is reused as is.
    """
    questions, head, reports = _prepare(memory, path, progress)
    per_retriever, timed = _run_questions(
        memory, questions, max(ks), retrievers, progress, {c.name: c for c in extra}
    )
    return {
        "benchmark": "locomo",
        **head,
        "retrieval": _recall(per_retriever, questions, ks),
        **reports,
        "search_latency_ms": {
            "retriever": "archivist (full path, query embedding included)",
            **_latency(timed["archivist"]),
        },
        "latency_ms": {name: _latency(xs) for name, xs in timed.items()},
        "embedder": memory.embedder.name,
        "store": memory.stats().get("path"),
        "llm": memory.llm_summary(),
        "machine": {"python": platform.python_version(), "platform": platform.platform()},
    }


def run_locomo_context(
    memory: MemoryService,
    path: str | Path,
    budgets: Sequence[int],
    limit: int | None = None,
    progress: Callable[[str, int, int], None] | None = None,
) -> dict:
    """Ingest the file (idempotent) and score the context each system would inject
    (bench/context_recall.py) at each budget; ``limit``: first N questions per
    conversation."""
    from .context_recall import run_context_recall

    questions, head, reports = _prepare(memory, path, progress)
    if limit is not None:
        taken: dict[str, int] = {}
        kept = []
        for cid, q in questions:
            taken[cid] = taken.get(cid, 0) + 1
            if taken[cid] <= limit:
                kept.append((cid, q))
        questions = kept
        head["questions_scored"] = len(questions)
    found = run_context_recall(memory, questions, budgets, progress)
    return {
        "benchmark": "locomo-context",
        **head,
        "budgets": found["budgets"],
        "counting": found["counting"],
        "context": found["recall"],
        "tokens_used": found["tokens_used"],
        "assembly_ms": found["assembly_ms"],
        **reports,
        "embedder": memory.embedder.name,
        "machine": {"python": platform.python_version(), "platform": platform.platform()},
    }


def _prepare(
    memory: MemoryService, path: str | Path, progress: Callable[[str, int, int], None] | None
) -> tuple[list[tuple[str, dict]], dict, dict]:
    """Ingest, extract and consolidate the file; the questions with evidence of categories
    1-4, the report's head (the file and what was scored) and what the ingest, the
    extraction and the consolidation reported."""
    from ..load import load_file
    from ..load.locomo import load_qa

    convs = load_file(path, "locomo")
    qa = load_qa(path)
    total = sum(len(c.messages) for c in convs)
    reports = remember(memory, convs, progress)
    questions = [
        (cid, q)
        for cid, items in qa.items()
        for q in items
        if q["category"] in RECALL_CATEGORIES and q["evidence"]
    ]
    skipped_adv = sum(1 for items in qa.values() for q in items if q["category"] == 5)
    no_evidence = sum(
        1
        for items in qa.values()
        for q in items
        if q["category"] in RECALL_CATEGORIES and not q["evidence"]
    )
    head = {
        "file": str(path),
        "conversations": len(convs),
        "messages": total,
        "questions_scored": len(questions),
        "questions_excluded": {"category_5_adversarial": skipped_adv, "no_evidence": no_evidence},
        "categories": {str(c): CATEGORY_NAMES[c] for c in RECALL_CATEGORIES},
    }
    return questions, head, reports


def remember(
    memory: MemoryService,
    convs: Sequence[Conversation],
    progress: Callable[[str, int, int], None] | None,
) -> dict:
    """Ingest (idempotent), extract and consolidate ``convs``; what each step reported."""
    total = sum(len(c.messages) for c in convs)
    t0 = time.perf_counter()
    results = memory.add(list(convs), progress=_ticker(progress, "ingest", total), extract=False)
    ingest_s = time.perf_counter() - t0
    added = sum(r.added for r in results)
    t0 = time.perf_counter()
    extraction = memory.extract(
        [c.id for c in convs], progress=_ticker(progress, "archivist", total)
    )
    extract_s = time.perf_counter() - t0
    return {
        "ingest": {
            "messages_added": added,
            "seconds": round(ingest_s, 3),
            "messages_per_s": round(added / ingest_s, 1) if added and ingest_s else None,
            "note": None if added else "store already held the data: nothing was re-embedded",
        },
        "extraction": _extraction_report(memory, extraction, extract_s, total),
        "consolidation": _consolidate(memory, [c.id for c in convs], total),
    }


def _recall(
    per_retriever: dict[str, list[tuple[int, list[str]]]],
    questions: Sequence[tuple[str, dict]],
    ks: Sequence[int],
) -> dict:
    """Each retriever's evidence recall@k per category, for every k."""
    return {
        name: {
            f"recall@{k}": by_category(
                (str(cat), evidence_recall(ids, q["evidence"], k))
                for (cat, ids), (_, q) in zip(rows, questions, strict=True)
            )
            for k in ks
        }
        for name, rows in per_retriever.items()
    }


def _latency(seconds: Sequence[float]) -> dict[str, float]:
    """p50, p95 and mean of full-path search latencies, in milliseconds."""
    ms = [x * 1000 for x in seconds]
    return {
        "p50": round(percentile(ms, 50), 2),
        "p95": round(percentile(ms, 95), 2),
        "mean": round(mean(ms), 2),
    }
