"""LoCoMo question answering: archivist against plain-RAG and full-context baselines.

Every system answers through the same answer model in the same run (an LLM
when given, else extractive answers; full context needs an LLM). Scores are
the official LoCoMo token F1 (bench.metrics.locomo_f1), BLEU-1 and, with a
judge model, the LLM-judge score J, per true category. Context tokens are
whitespace tokens of what the answerer read (a documented approximation of
model tokens: about 0.75 of them for English).
"""

from __future__ import annotations

import platform
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from ..llm.accounting import Accounting
from ..llm.base import ChatModel, LLMError
from ..llm.cache import StoreResponseCache
from ..model import Hit
from ..read.answer import Answer, answer_from, extractive_answer, llm_answer, retrieve
from ..service import MemoryService
from .locomo import CATEGORY_NAMES, remember
from .metrics import bleu1, by_category, locomo_f1, mean, percentile, says_abstain

SYSTEMS = ("archivist", "plain-rag", "full-context")
ANSWERABLE = (1, 2, 3, 4)
RAG_K = 10
FULL_CONTEXT_WINDOW = 100_000  # whitespace tokens kept for full context (most recent first)
Progress = Callable[[str, int, int], None]


@dataclass
class Tally:
    """One system's per-question records."""

    rows: list[dict] = field(default_factory=list)
    search_ms: list[float] = field(default_factory=list)
    answer_ms: list[float] = field(default_factory=list)


def _timed(fn: Callable[[], object]) -> tuple[object, float]:
    t = time.perf_counter()
    value = fn()
    return value, (time.perf_counter() - t) * 1000


def _calls(memory: MemoryService) -> int:
    return memory.llm_ledger.totals().get("calls", 0)


def _record(tally: Tally, q: dict, a: Answer, calls: int, search_ms: float, answer_ms: float):
    tally.rows.append(
        {
            "category": q["category"],
            "question": q["question"],
            "gold": q["answer"],
            "answer": a.answer,
            "abstain": a.abstain or says_abstain(a.answer),
            "named_owner": bool(a.abstain and a.reason.startswith("that was ")),
            "evidence": [m for _, m in a.evidence],
            "context_tokens": a.context_tokens,
            "llm_calls": calls,
            "method": a.method,
        }
    )
    tally.search_ms.append(search_ms)
    tally.answer_ms.append(answer_ms)


def _archivist(memory: MemoryService, cid: str, q: dict, llm: ChatModel | None) -> tuple:
    """Archivist's answer, its search and answer latency and LLM calls."""
    before = _calls(memory)  # search may call the model too (query rewrites)
    ev, search_ms = _timed(lambda: retrieve(memory.core, q["question"], conversation=cid))
    a, answer_ms = _timed(
        lambda: answer_from(memory.core, q["question"], ev, llm=llm, use_llm=llm is not None)
    )
    return a, search_ms, answer_ms, _calls(memory) - before


def _with_llm(memory, llm, question: str, hits: Sequence[Hit], fallback: bool = True) -> Answer:
    """An LLM answer from the hits (no claims: baselines see messages only)."""
    now = max(h.message.timestamp for h in hits)
    try:
        return llm_answer(memory.core, llm, question, hits, now, with_claims=False)
    except LLMError as e:
        if not fallback:
            raise
        a = extractive_answer(
            question, hits, memory.people(), verify=False, embedder=memory.embedder
        )
        return replace(a, method=f"extractive (llm failed: {type(e).__name__})")


def _plain_rag(memory: MemoryService, cid: str, q: dict, llm: ChatModel | None) -> tuple:
    """Top-10 messages by plain RRF, answered by the same answer model; no verification."""
    before = _calls(memory)
    hits, search_ms = _timed(
        lambda: memory.search(q["question"], conversation=cid, k=RAG_K, preset="rrf")
    )
    if llm is not None and hits:
        a, answer_ms = _timed(lambda: _with_llm(memory, llm, q["question"], hits))
    else:
        a, answer_ms = _timed(
            # the same reader as archivist's, embedder included; it only lacks what
            # the store knows (which claims still hold), which is what is compared
            lambda: extractive_answer(
                q["question"], hits, memory.people(), verify=False, embedder=memory.embedder
            )
        )
    return a, search_ms, answer_ms, _calls(memory) - before


def _full_context(memory, cid: str, q: dict, llm: ChatModel, window: int) -> tuple:
    """The whole conversation (the most recent ``window`` tokens of it) as context."""
    msgs = [m for _, m in memory.store.conversation_messages(cid)]
    kept, used = [], 0
    for m in reversed(msgs):
        used += len(m.indexed_text().split())
        if used > window:
            break
        kept.append(Hit(message=m, score=0.0))
    hits = list(reversed(kept))
    before = _calls(memory)
    a, answer_ms = _timed(lambda: _with_llm(memory, llm, q["question"], hits))
    return a, 0.0, answer_ms, _calls(memory) - before


def _judge(memory, judge: ChatModel, ledger: Accounting, q: dict, a: Answer) -> float:
    """1.0 when the fixed judge prompt labels the answer CORRECT (abstentions are WRONG)."""
    from ..llm.structured import call_structured
    from ..prompts import judge_answer as prompt

    if a.abstain:
        return 0.0
    out = call_structured(
        judge,
        task=prompt.NAME,
        version=prompt.VERSION,
        messages=prompt.build(q["question"], q["answer"], a.answer),
        output_type=prompt.JudgeOut,
        cache=StoreResponseCache(memory.store),
        ledger=ledger,
    )
    return 1.0 if out.label == "CORRECT" else 0.0


def _ingest(memory: MemoryService, convs: list, progress: Progress | None) -> dict:
    """Idempotent add, extraction and one consolidation round, as the recall benchmark does."""
    done = remember(memory, convs, progress)
    return {
        "messages_added": done["ingest"]["messages_added"],
        "ingest_seconds": done["ingest"]["seconds"],
        "extraction": done["extraction"],
        "consolidation": done["consolidation"],
    }


def select_questions(qa: dict[str, list[dict]], limit: int | None) -> list[tuple[str, dict]]:
    """Every question, or the first ``limit`` of each conversation (deterministic)."""
    return [(cid, q) for cid, items in qa.items() for q in (items[:limit] if limit else items)]


def run_locomo_qa(
    memory: MemoryService,
    path: str | Path,
    *,
    answer_llm: ChatModel | None = None,
    judge_llm: ChatModel | None = None,
    limit: int | None = None,
    progress: Progress | None = None,
    window: int = FULL_CONTEXT_WINDOW,
) -> dict:
    """Ingest ``path`` (idempotent), answer every question with each system, and score them."""
    from ..load import load_file
    from ..load.locomo import load_qa

    convs = load_file(path, "locomo")
    ingest = _ingest(memory, convs, progress)
    questions = select_questions(load_qa(path), limit)
    tallies = {s: Tally() for s in SYSTEMS if s != "full-context" or answer_llm is not None}
    judge_ledger = Accounting()
    j_scores: dict[str, list[tuple[int, float]]] = {s: [] for s in tallies}
    for i, (cid, q) in enumerate(questions):
        for system, tally in tallies.items():
            if system == "archivist":
                a, s_ms, a_ms, calls = _archivist(memory, cid, q, answer_llm)
            elif system == "plain-rag":
                a, s_ms, a_ms, calls = _plain_rag(memory, cid, q, answer_llm)
            else:
                a, s_ms, a_ms, calls = _full_context(memory, cid, q, answer_llm, window)
            _record(tally, q, a, calls, s_ms, a_ms)
            if judge_llm is not None and q["category"] in ANSWERABLE:
                j_scores[system].append(
                    (q["category"], _judge(memory, judge_llm, judge_ledger, q, a))
                )
        if progress:
            progress("questions", i + 1, len(questions))
    systems = {s: _summarise(t, j_scores[s] if judge_llm else None) for s, t in tallies.items()}
    if answer_llm is None:
        systems["full-context"] = {"status": "not applicable: needs an answer model (LLM)"}
    return {
        "benchmark": "locomo-qa",
        "file": str(path),
        "conversations": len(convs),
        "messages": sum(len(c.messages) for c in convs),
        "questions": len(questions),
        "limit_per_conversation": limit,
        "categories": {str(c): n for c, n in CATEGORY_NAMES.items()},
        "answer_model": answer_llm.name if answer_llm is not None else None,
        "judge_model": judge_llm.name if judge_llm is not None else None,
        "judge_llm": judge_ledger.totals() if judge_llm is not None else None,
        "systems": systems,
        "ingest": ingest,
        "embedder": memory.embedder.name,
        "machine": {"python": platform.python_version(), "platform": platform.platform()},
        "run_at": memory.core.clock().astimezone().isoformat(timespec="seconds"),
        "items": {s: t.rows for s, t in tallies.items()},
    }


def _summarise(t: Tally, judged: list[tuple[int, float]] | None) -> dict:
    """Scores per category and the costs of one system."""
    answerable = [r for r in t.rows if r["category"] in ANSWERABLE]
    adversarial = [r for r in t.rows if r["category"] == 5]
    f1 = by_category(
        (str(r["category"]), locomo_f1(r["answer"], r["gold"], r["category"])) for r in answerable
    )
    if adversarial:
        f1["5"] = round(mean(locomo_f1(r["answer"], r["gold"], 5) for r in adversarial), 4)
    rate = lambda rows, key: round(mean(float(r[key]) for r in rows), 4) if rows else None  # noqa: E731
    return {
        "questions": len(t.rows),
        "f1": f1,
        "bleu1": by_category(
            (str(r["category"]), bleu1(r["answer"], r["gold"])) for r in answerable
        ),
        "j": None if judged is None else by_category((str(c), v) for c, v in judged),
        "adversarial_abstention": rate(adversarial, "abstain"),
        "adversarial_named_owner": rate(adversarial, "named_owner"),
        "false_abstention": rate(answerable, "abstain"),
        "context_tokens_per_question": round(mean(r["context_tokens"] for r in t.rows), 1),
        "llm_calls_per_question": round(mean(r["llm_calls"] for r in t.rows), 3),
        "latency_ms": {
            "search": _pcts(t.search_ms),
            "answer": _pcts(t.answer_ms),
        },
    }


def _pcts(ms: list[float]) -> dict:
    return {"p50": round(percentile(ms, 50), 2), "p95": round(percentile(ms, 95), 2)}
