"""Judge benchmark: how well a judge labels written pairs, per task, label and confusion.

``archivist bench judge FILE [--judge model|rules|llm]``. FILE holds
``{"items": [...]}`` (or JSON lines) in the format of archivist/judge/items.py.
The rules baseline is the old phrase rules as the product runs them: a relation
pair becomes two claims of the same speaker put through claim reconciliation
(a logged conflict: ``ends``; a duplicate or shared aspect word: ``continues``;
else ``unrelated``), and a support pair becomes a one-message memory asked
the question with no LLM (a "Yes"/"No" answer, an answer, or an abstention).
A kind item becomes a one-message chat read by the rule extractor (no claim:
``chit-chat``; else its claim's kind). A when item is placed by the sentence's
tense, as the time reader did before the judge (``ahead`` when it lands after
the day it was said). No rule links a goal to what serves it: a serves item is
``unrelated`` to the rules. Timing is the median wall time per pair
of the judge's batched calls.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

from ..config import Settings
from ..embed.base import Embedder
from ..judge import (
    GoalPair,
    Judge,
    RelationPair,
    Statement,
    SupportPair,
    TimeMention,
    Verdict,
)
from ..judge.items import Item
from ..judge.metrics import score_task
from ..lang.timeground import find_times, tense
from ..model import Claim, Conversation, Message
from ..service import MemoryService
from ..write.reconcile import aspect_stems, reconcile_claims
from .metrics import percentile

TASKS = ("relation", "support", "kind", "when", "serves")
# the claim kinds of the rule-based extractor, as the kind task names them
RULE_KINDS = {
    "fact": "state",
    "preference": "preference",
    "plan": "plan",
    "foresight": "plan",
    "event": "event",
    "theory": "value",
    "question": "chit-chat",
}
CHUNK = 16  # pairs per timed call


class RulesJudge:
    """The old phrase rules behind the Judge interface (a baseline for the benchmark)."""

    name = "rules"

    def __init__(self, embedder: Embedder, settings: Settings | None = None) -> None:
        self.embedder = embedder
        self.settings = (settings or Settings()).with_(llm="none", judge="rules")

    def relations(self, pairs: Sequence[RelationPair]) -> list[Verdict]:
        return [self._relation(p) for p in pairs]

    def supports(self, pairs: Sequence[SupportPair]) -> list[Verdict]:
        return [self._support(p) for p in pairs]

    def kinds(self, statements: Sequence[Statement]) -> list[Verdict]:
        return [self._kind(s) for s in statements]

    def whens(self, mentions: Sequence[TimeMention]) -> list[Verdict]:
        return [self._when(m) for m in mentions]

    def serves(self, pairs: Sequence[GoalPair]) -> list[Verdict]:
        """No rule ever linked a goal to what serves it: unrelated, unsure."""
        return [Verdict("unrelated", 0.0, "no rule") for _ in pairs]

    def _when(self, m: TimeMention) -> Verdict:
        """The time reader without the judge: the sentence's tense places the time."""
        when = m.said_at or datetime(2024, 1, 1, tzinfo=UTC)
        refs = find_times(m.sentence, when)
        ref = next((r for r in refs if r.text.casefold() == m.time.casefold()), None)
        if ref is None:
            return Verdict("ahead" if tense(m.sentence) == "future" else "behind", 0.5)
        return Verdict("ahead" if ref.start > when else "behind", 0.5)

    def _kind(self, s: Statement) -> Verdict:
        """The rule extractor on a one-message chat: no claim is chit-chat."""
        from ..write.heuristic import heuristic_claims

        who = s.speaker or "Sam"
        when = s.said_at or datetime(2024, 1, 1, tzinfo=UTC)
        msg = Message("S1:1", "bench", 1, who, s.sentence, when, role=s.role)
        claims = heuristic_claims([msg])
        if not claims:
            return Verdict("chit-chat", 0.5)
        return Verdict(RULE_KINDS.get(claims[0].kind, "state"), 0.5)

    def _relation(self, p: RelationPair) -> Verdict:
        was = p.older_at or datetime(2024, 1, 1, tzinfo=UTC)
        now = p.newer_at or was + timedelta(days=30)
        who = p.speaker or "Sam"
        old, new = (
            Claim(text, who, who, "bench", (f"m{i}",), when, id=i)
            for i, (text, when) in enumerate(((p.older, was), (p.newer, now)), start=1)
        )
        vectors = dict(zip((1, 2), self.embedder.embed_batch([p.older, p.newer]), strict=True))
        out = reconcile_claims([old], [new], vectors)
        if out.conflicts:
            return Verdict("ends", 1.0)
        if out.counts["duplicates"] or out.counts["refinements"]:
            return Verdict("continues", 1.0)
        shared = aspect_stems(old) & aspect_stems(new)
        return Verdict("continues" if shared else "unrelated", 0.5)

    def _support(self, p: SupportPair) -> Verdict:
        who = p.speaker or "Sam"
        when = p.said_at or datetime(2024, 1, 1, tzinfo=UTC)
        msg = Message("S1:1", "bench", 1, who, p.sentence, when)
        with tempfile.TemporaryDirectory(prefix="archivist-judge-") as tmp:
            memory = MemoryService(
                Path(tmp) / "judge.db", settings=self.settings, embedder=self.embedder
            )
            try:
                memory.add([Conversation("bench", (who,), (msg,))])
                answer = memory.ask(p.question, at=when + timedelta(days=1))
            finally:
                memory.close()
        if answer.abstain:
            return Verdict("neither", 0.5)
        head = answer.answer.split(":", 1)[0].strip().lower()
        if head in ("yes", "no"):
            return Verdict(head, 1.0)
        return Verdict("answers", 0.5)


def run_judge(judge: Judge, items: Sequence[Item], name: str, source: str = "") -> dict:
    """Score ``judge`` on ``items``: per task accuracy, macro-F1, per label, confusion, timing."""
    tasks: dict[str, dict] = {}
    for task in TASKS:
        chosen = [it for it in items if it.task == task]
        if not chosen:
            continue
        said: list[str] = []
        per_pair: list[float] = []
        for at in range(0, len(chosen), CHUNK):
            chunk = [it.pair for it in chosen[at : at + CHUNK]]
            t0 = time.perf_counter()
            ask = {
                "relation": judge.relations,
                "support": judge.supports,
                "kind": judge.kinds,
                "when": judge.whens,
                "serves": judge.serves,
            }
            verdicts = ask[task](chunk)  # type: ignore[operator]
            per_pair.append((time.perf_counter() - t0) * 1000 / len(chunk))
            said += [v.label for v in verdicts]
        result = score_task(task, [it.label for it in chosen], said)
        result["ms_per_pair_p50"] = round(percentile(per_pair, 50), 2)
        result["wrong"] = [
            {"id": it.id, "label": it.label, "said": s}
            for it, s in zip(chosen, said, strict=True)
            if s != it.label
        ]
        tasks[task] = result
    return {"judge": name, "file": source, "tasks": tasks}


def judge_table(result: dict) -> str:
    """The benchmark as text: a summary line and a confusion matrix per task."""
    lines = [f"judge: {result['judge']}  file: {result['file']}"]
    for task, r in result["tasks"].items():
        lines.append(
            f"\n{task}: accuracy {r['accuracy']:.3f}  macro-F1 {r['macro_f1']:.3f}  "
            f"n={r['n']}  {r['ms_per_pair_p50']} ms/pair (p50)"
        )
        labels = list(r["by_label"])
        width = max(len(x) for x in labels) + 2
        lines.append(" " * width + "said→ " + " ".join(f"{x:>9}" for x in labels) + "    F1")
        for g in labels:
            row = " ".join(f"{r['confusion'][g][s]:>9}" for s in labels)
            lines.append(f"{g:<{width}}      {row}  {r['by_label'][g]['f1']:.2f}")
    return "\n".join(lines)
