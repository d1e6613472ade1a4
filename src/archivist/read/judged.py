"""Answers chosen by the judge seam: which evidence sentence settles the question.

The ranked evidence sentences (read/extractive.py ``rank_sentences``) are put to
the judge with the question: a yes or a no is given only from a sentence the
judge says settles it, with confidence, whose claim still holds at the time
asked (the best ranked such sentence); for a question about what holds now
(where, what, who...) the sentences the judge is sure answer it go first and
those it is sure answer nothing go last, and the composer reads them in that
order. Nothing confident: the caller reads the evidence as ranked.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from ..judge import Judge, SupportPair, Verdict
from .extractive import Shape
from .sentences import Sentence, quoted

CANDIDATES = 12  # ranked sentences put to the judge
# How probable a verdict must be to act on it. On the judge's dev split a "yes" at 0.7
# was right two times in three, "no" four in five; at 0.9 both nearly always (but few
# reach it); "answers" and "neither" at 0.9, nineteen times in twenty. On the bundled
# state suite lower bars lost more answers than they won (docs/judge.md)
SURE_YES_NO = 0.95
SURE = 0.9


def _holds(s: Sentence, at: datetime) -> bool:
    return s.ended is None or s.ended > at


def judged(
    question: str,
    shape: Shape,
    ranked: Sequence[Sentence],
    judge: Judge,
    at: datetime,
) -> tuple[str, list[Sentence], str] | None:
    """A yes or no from the best ranked sentence the judge says settles the question,
    with the sentence it rests on and why; None when none does with confidence.

    Only yes/no questions about what holds now are taken here; others are read by
    the extractive composer over ``reordered`` evidence."""
    if shape.form != "yes_no" or shape.before or shape.past:
        return None
    pool = _pool(ranked, at)
    verdicts = _verdicts(question, pool, judge)
    sure = [
        (s, v)
        for s, v in zip(pool, verdicts, strict=True)
        if _settles(v, ("yes", "no"), SURE_YES_NO)
    ]
    if not sure:
        return None
    s, v = sure[0]  # the ranker's order: relevance, then what was said last
    why = f"judge {judge.name}: {v.label} p={v.p:.2f}"
    yes = (v.label == "yes") != shape.negated
    return f"{'Yes' if yes else 'No'}: {quoted(s)}", [s], why


def reordered(
    question: str, shape: Shape, ranked: Sequence[Sentence], judge: Judge, at: datetime
) -> list[Sentence]:
    """The ranked evidence with the sentences the judge is sure answer nothing moved
    last, and those it is sure answer the question first (ranked order kept within),
    for a question about what holds now that is no yes/no question."""
    if shape.form != "open" or shape.before or shape.past or shape.plural:
        return list(ranked)
    pool = ranked[:CANDIDATES]
    verdicts = _verdicts(question, pool, judge)
    answers = [s for s, v in zip(pool, verdicts, strict=True) if _settles(v, ("answers",))]
    idle = [s for s, v in zip(pool, verdicts, strict=True) if _settles(v, ("neither",))]
    middle = [s for s in ranked if s not in answers and s not in idle]
    return [*answers, *middle, *idle]


def _pool(ranked: Sequence[Sentence], at: datetime) -> list[Sentence]:
    return [s for s in ranked[:CANDIDATES] if s.message.role != "assistant" and _holds(s, at)]


def _verdicts(question: str, pool: Sequence[Sentence], judge: Judge) -> list[Verdict]:
    if not pool:
        return []
    return judge.supports(
        [SupportPair(question, s.text, s.message.speaker, s.message.timestamp) for s in pool]
    )


def _settles(v: Verdict, wanted: Sequence[str], sure: float = SURE) -> bool:
    return v.label in wanted and v.p >= sure
