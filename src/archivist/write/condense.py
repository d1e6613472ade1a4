"""What the consolidation jobs share: picking and trimming stored text, and guarded LLM calls.

Heuristics never invent content: they choose stored sentences (claims,
narratives) by a stated priority and cut them to a character cap. LLM calls go
through ``Core.llm_call``: the store's response cache and the core's
ledger; a failed call is counted and answered with None, so the caller falls
back to the heuristic for that one item.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeVar

from ..lang.text import normalised
from ..llm.base import LLMError
from ..model import Claim, content_hash

if TYPE_CHECKING:
    from types import ModuleType

    from pydantic import BaseModel

    from ..core import Core

T = TypeVar("T", bound="BaseModel")

_SENTENCE_END = re.compile(r"(?<=[.!?…])\s+")
_ENDS = (".", "!", "?", "…", '"', "”", ")")
ELLIPSIS = "…"


@dataclass(frozen=True)
class LLMPolicy:
    """How hard a consolidation job tries a model before falling back to its heuristic."""

    max_attempts: int = 3
    backoff: float = 1.0  # seconds before the first retry of a timeout or rate limit


def sentence(text: str) -> str:
    """``text`` stripped, with a full stop added when it ends without punctuation."""
    text = " ".join(text.split())
    return text if not text or text.endswith(_ENDS) else text + "."


def first_sentence(text: str) -> str:
    """The first sentence of ``text`` (all of it when there is no sentence break)."""
    text = " ".join(text.split())
    return _SENTENCE_END.split(text, maxsplit=1)[0] if text else ""


def trim(text: str, cap: int) -> str:
    """``text`` cut to at most ``cap`` characters at a word boundary, marked with an ellipsis."""
    text = " ".join(text.split())
    if len(text) <= cap:
        return text
    cut = text[: max(cap - 1, 0)]
    if " " in cut:
        cut = cut[: cut.rindex(" ")]
    return cut.rstrip(" ,;:") + ELLIPSIS


def pack_texts(texts: Iterable[str], cap: int) -> list[int]:
    """Positions of the texts that fit, greedily in the given order, joined by spaces in ``cap``.

    The first text is always taken (trimmed later if it alone is too long), so
    a cap never empties a summary that has something to say.
    """
    chosen, used = [], 0
    for i, text in enumerate(texts):
        extra = len(text) + (1 if chosen else 0)
        if not chosen or used + extra <= cap:
            chosen.append(i)
            used += extra
    return chosen


def join_capped(texts: Sequence[str], cap: int) -> str:
    """The texts (as sentences) joined by spaces, as many as fit, hard-capped at ``cap``."""
    parts = [sentence(t) for t in texts if t.strip()]
    keep = pack_texts(parts, cap)
    return trim(" ".join(parts[i] for i in keep), cap)


def claim_priority(c: Claim) -> tuple:
    """Sort key: more important first, then more salient, then newer."""
    return (-c.importance, -c.salience, -c.said_at.timestamp(), -(c.id or 0))


def newest_important(c: Claim) -> tuple:
    """Sort key: more important first, then newer (current state matters most)."""
    return (-c.importance, -c.said_at.timestamp(), -c.salience, -(c.id or 0))


def select_claims(
    claims: Sequence[Claim],
    cap: int,
    *,
    time_order: bool,
    key: Callable[[Claim], tuple] = claim_priority,
) -> str:
    """The highest-priority claims that fit in ``cap`` (one per wording), in time or rank order."""
    seen: set[str] = set()
    ranked: list[Claim] = []
    for c in sorted(claims, key=key):
        key = normalised(c.text)
        if key and key not in seen:
            seen.add(key)
            ranked.append(c)
    keep = [ranked[i] for i in pack_texts([claim_sentence(c) for c in ranked], cap)]
    if time_order:
        keep.sort(key=lambda c: (c.said_at, c.id or 0))
    return trim(" ".join(claim_sentence(c) for c in keep), cap)


def claim_sentence(c: Claim) -> str:
    """The claim as a sentence, prefixed "Speaker: " when its text does not name the speaker.

    Who said it is stored data, and a summary that drops it would blur attribution.
    """
    text = sentence(c.text)
    return text if c.speaker.casefold() in text.casefold() else f"{c.speaker}: {text}"


def claims_hash(claims: Iterable[Claim]) -> str:
    """Identity of a set of claims by id *and* text (ids alone may be reused after a rebuild)."""
    return content_hash(*sorted(f"{c.id}:{c.text}" for c in claims))


@dataclass
class Counts:
    """What a job did, returned by its handler (only non-zero counters are reported)."""

    values: dict[str, int] = field(default_factory=dict)

    def add(self, key: str, n: int = 1) -> None:
        self.values[key] = self.values.get(key, 0) + n

    def result(self, **always: int) -> dict:
        return {**always, **{k: v for k, v in self.values.items() if v}}


class Asker:
    """Guarded structured calls for one job run: None (and a counted fallback) on LLM errors."""

    def __init__(self, core: Core, counts: Counts, policy: LLMPolicy) -> None:
        self.core, self.counts, self.policy = core, counts, policy
        self.model = core.llm

    @property
    def method(self) -> str:
        return self.model.name if self.model is not None else "heuristic"

    def ask(self, prompt: ModuleType, messages: list[dict], output_type: type[T]) -> T | None:
        """The validated answer, or None after an LLM failure (counted as a fallback)."""
        if self.model is None:
            return None
        try:
            return self.core.llm_call(  # cached in the store, counted, usage persisted
                prompt,
                messages,
                output_type,
                max_attempts=self.policy.max_attempts,
                backoff=self.policy.backoff,
            )
        except LLMError as e:
            self.counts.add("llm_fallbacks")
            self.counts.add(f"llm_{type(e).__name__}")
            return None


@contextmanager
def llm_session(core: Core, counts: Counts, policy: LLMPolicy) -> Iterator[Asker]:
    """An Asker for one job run (kept as a context so a job's calls read as one block)."""
    yield Asker(core, counts, policy)


def conversations(core: Core, payload: dict) -> list[str]:
    """The payload's conversation, or every stored conversation when it names none."""
    cid = payload.get("conversation")
    return [cid] if cid else [c["id"] for c in core.store.conversations()]
