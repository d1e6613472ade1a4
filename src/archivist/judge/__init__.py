"""The judge seam: meaning judged by the trained model, the configured LLM or the old rules.

``judge_for(settings, call)`` picks one: ``auto`` is the LLM when one is
configured (every judged path then uses it), else the trained model shipped in
the package. ``rules`` returns None, and callers keep their phrase rules (the
baseline docs/judge.md compares against).
"""

from __future__ import annotations

from functools import lru_cache

from ..config import Settings
from .base import (
    KIND_LABELS,
    LABELS,
    RELATION_LABELS,
    SERVES_LABELS,
    SUPPORT_LABELS,
    WHEN_LABELS,
    GoalPair,
    Judge,
    RelationPair,
    Statement,
    SupportPair,
    TimeMention,
    Verdict,
    kind,
    relation,
    support,
)
from .llm import Caller, LLMJudge
from .trained import TrainedJudge

__all__ = [
    "KIND_LABELS",
    "LABELS",
    "RELATION_LABELS",
    "SERVES_LABELS",
    "SUPPORT_LABELS",
    "WHEN_LABELS",
    "GoalPair",
    "Judge",
    "LLMJudge",
    "RelationPair",
    "Statement",
    "SupportPair",
    "TimeMention",
    "TrainedJudge",
    "Verdict",
    "judge_for",
    "judge_name",
    "kind",
    "relation",
    "support",
]


@lru_cache(maxsize=1)
def shared_model() -> TrainedJudge:
    """One trained judge per process: every memory opened shares its loaded network."""
    return TrainedJudge()


def judge_name(settings: Settings, has_llm: bool) -> str:
    """What ``settings.judge`` resolves to: model, llm or rules."""
    if settings.judge != "auto":
        return settings.judge
    return "llm" if has_llm else "model"


def judge_for(settings: Settings, call: Caller | None = None) -> Judge | None:
    """The judge ``settings`` choose (None for the rules); ``call`` asks the LLM, when one
    is configured."""
    name = judge_name(settings, call is not None)
    if name == "rules":
        return None
    model = shared_model()
    if name == "llm" and call is not None:
        return LLMJudge(call, fallback=model)
    return model
