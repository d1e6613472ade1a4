"""The judge seam: meaning judged by the trained model, the configured LLM or the old rules.

``judge_for(settings, call)`` picks one: ``auto`` is the LLM when one is
configured (every judged path then uses it), else the rules: the trained model
shipped in the package is chosen with ``model``. On whole conversations it does
not beat the rules yet (docs/judge.md: fewer state probes answered, lower
LoCoMo evidence recall), so it is not the default. ``rules`` returns None, and
callers keep their phrase rules.
"""

from __future__ import annotations

from functools import lru_cache

from ..config import Settings
from .base import (
    KIND_LABELS,
    LABELS,
    RELATION_LABELS,
    SUPPORT_LABELS,
    Judge,
    RelationPair,
    Statement,
    SupportPair,
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
    "SUPPORT_LABELS",
    "Judge",
    "LLMJudge",
    "RelationPair",
    "Statement",
    "SupportPair",
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
    return "llm" if has_llm else "rules"


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
