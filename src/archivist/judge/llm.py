"""The LLM judge: the configured chat model judges in batches (prompt judge_pairs).

Its schema puts a one-sentence reason before each verdict (a small model
judges contradictions far better so). An item the model leaves out or a batch
that fails gets the fallback judge's verdict, so one bad answer never leaves a
pair unjudged.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from ..llm.base import LLMError
from .base import GoalPair, Judge, RelationPair, Statement, SupportPair, TimeMention, Verdict

BATCH = 10  # pairs per call
# (prompt module, messages, output type) -> validated output; Core.llm_call fits
Caller = Callable[[Any, list[dict], Any], Any]


def _day(when: datetime | None) -> str:
    return f"{when:%Y-%m-%d}" if when else "date unknown"


class LLMJudge:
    """Judges through ``call`` (the store-cached, counted structured call of Core)."""

    def __init__(self, call: Caller, fallback: Judge | None = None, name: str = "llm") -> None:
        self.call = call
        self.fallback = fallback
        self.name = name

    def relations(self, pairs: Sequence[RelationPair]) -> list[Verdict]:
        """Verdicts for relation pairs, BATCH per call."""
        from ..prompts import judge_pairs as prompt  # pydantic, only when an LLM judges

        rows = [(p.speaker, p.older, _day(p.older_at), p.newer, _day(p.newer_at)) for p in pairs]
        return self._batched(
            pairs, rows, prompt.build_relations, prompt.RelationsOut, self._fallback_relations
        )

    def supports(self, pairs: Sequence[SupportPair]) -> list[Verdict]:
        """Verdicts for support pairs, BATCH per call."""
        from ..prompts import judge_pairs as prompt

        rows = [(p.question, p.speaker, p.sentence, _day(p.said_at)) for p in pairs]
        return self._batched(
            pairs, rows, prompt.build_supports, prompt.SupportsOut, self._fallback_supports
        )

    def kinds(self, statements: Sequence[Statement]) -> list[Verdict]:
        """Verdicts for statements, BATCH per call."""
        from ..prompts import judge_pairs as prompt

        rows = [
            ("assistant" if s.role == "assistant" else s.speaker, s.sentence, _day(s.said_at))
            for s in statements
        ]
        return self._batched(
            statements, rows, prompt.build_kinds, prompt.KindsOut, self._fallback_kinds
        )

    def whens(self, mentions: Sequence[TimeMention]) -> list[Verdict]:
        """Verdicts for time mentions, BATCH per call."""
        from ..prompts import judge_pairs as prompt

        rows = [(m.speaker, m.sentence, m.time, _day(m.said_at)) for m in mentions]
        return self._batched(
            mentions, rows, prompt.build_whens, prompt.WhensOut, self._fallback_whens
        )

    def serves(self, pairs: Sequence[GoalPair]) -> list[Verdict]:
        """Verdicts for goal pairs, BATCH per call."""
        from ..prompts import judge_pairs as prompt

        rows = [(p.speaker, p.goal, p.item) for p in pairs]
        return self._batched(
            pairs, rows, prompt.build_serves, prompt.ServesOut, self._fallback_serves
        )

    def _fallback_serves(self, pairs: Sequence[Any]) -> list[Verdict]:
        if self.fallback is None:
            return [Verdict("unrelated", 0.0, "not judged") for _ in pairs]
        return self.fallback.serves(pairs)

    def _fallback_whens(self, mentions: Sequence[Any]) -> list[Verdict]:
        if self.fallback is None:
            return [Verdict("ahead", 0.0, "not judged") for _ in mentions]
        return self.fallback.whens(mentions)

    def _fallback_kinds(self, statements: Sequence[Any]) -> list[Verdict]:
        if self.fallback is None:
            return [Verdict("state", 0.0, "not judged") for _ in statements]
        return self.fallback.kinds(statements)

    def _fallback_relations(self, pairs: Sequence[Any]) -> list[Verdict]:
        if self.fallback is None:
            return [Verdict("unrelated", 0.0, "not judged") for _ in pairs]
        return self.fallback.relations(pairs)

    def _fallback_supports(self, pairs: Sequence[Any]) -> list[Verdict]:
        if self.fallback is None:
            return [Verdict("neither", 0.0, "not judged") for _ in pairs]
        return self.fallback.supports(pairs)

    def _batched(self, pairs, rows, build, out_type, fallback) -> list[Verdict]:
        from ..prompts import judge_pairs as prompt

        verdicts: list[Verdict | None] = [None] * len(pairs)
        for at in range(0, len(rows), BATCH):
            chunk = rows[at : at + BATCH]
            try:
                answer = self.call(prompt, build(chunk), out_type)
            except LLMError:
                continue
            for j in answer.judgements:
                if 1 <= j.item <= len(chunk) and verdicts[at + j.item - 1] is None:
                    verdicts[at + j.item - 1] = Verdict(j.verdict, j.confidence, j.reason)
        missing = [i for i, v in enumerate(verdicts) if v is None]
        if missing:
            for i, v in zip(missing, fallback([pairs[i] for i in missing]), strict=True):
                verdicts[i] = v
        return verdicts  # type: ignore[return-value]
