"""Answers chosen by the judge seam: which evidence sentence settles the question.

The ranked evidence sentences (read/extractive.py ``rank_sentences``) are put to
the judge with the question. ``reordered`` moves the sentences it is sure
answer nothing last, for a question about what holds now; ``judged`` gives a
yes or a no from the best ranked sentence it is sure settles the question and
whose claim still holds at the time asked. Both act only at a confidence the
caller trusts, and by default none yet (see SURE): the composer then reads the
evidence as ranked, from claims the judge helped reconcile.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from ..judge import Judge, SupportPair, Verdict
from .extractive import Shape
from .sentences import Sentence, quoted

CANDIDATES = 12  # ranked sentences put to the judge
# How probable a verdict must be to act on it. On the judge's dev split a "yes" at 0.7
# was right two times in three, "no" four in five; "neither" at 0.9 nineteen times in
# twenty. Yet on a third of the bundled state suite, yes and no read off the judge lost
# answers even at 0.95 (a right "no" quoting the wrong sentence), and moving aside what
# it says answers nothing at 0.9 lost one: both stay off (above 1: never) until a
# better support model wins there (docs/judge.md)
SURE_YES_NO = 1.01
SURE = 1.01
SURE_ANSWERS = 1.01
SURE_FLIP = 1.01  # how sure the judge must be to turn the composer's yes into a no or back


def _holds(s: Sentence, at: datetime) -> bool:
    return s.ended is None or s.ended > at


def judged(
    question: str,
    shape: Shape,
    ranked: Sequence[Sentence],
    judge: Judge,
    at: datetime,
    sure: float | None = None,
) -> tuple[str, list[Sentence], str] | None:
    """A yes or no from the best ranked sentence the judge says settles the question,
    with the sentence it rests on and why; None when none does with confidence.

    Only yes/no questions about what holds now are taken here, and only with
    ``sure`` confidence; others are read by the extractive composer over
    ``reordered`` evidence."""
    sure = SURE_YES_NO if sure is None else sure
    if shape.form != "yes_no" or shape.before or shape.past or sure > 1:
        return None
    pool = _pool(ranked, at)
    verdicts = _verdicts(question, pool, judge)
    settled = [
        (s, v) for s, v in zip(pool, verdicts, strict=True) if _settles(v, ("yes", "no"), sure)
    ]
    if not settled:
        return None
    s, v = settled[0]  # the ranker's order: relevance, then what was said last
    why = f"judge {judge.name}: {v.label} p={v.p:.2f}"
    yes = (v.label == "yes") != shape.negated
    return f"{'Yes' if yes else 'No'}: {quoted(s)}", [s], why


def reordered(
    question: str,
    shape: Shape,
    ranked: Sequence[Sentence],
    judge: Judge,
    at: datetime,
    sure: float | None = None,
    answers_sure: float | None = None,
) -> list[Sentence]:
    """The ranked evidence with the sentences the judge is sure answer nothing moved
    last (ranked order kept otherwise), for a question about what holds now that is no
    yes/no question. Putting what it is sure answers first lost answers on the bundled
    state suite: a veto only, until the support model is better (docs/judge.md)."""
    sure = SURE if sure is None else sure
    answers_sure = SURE_ANSWERS if answers_sure is None else answers_sure
    if shape.form != "open" or shape.before or shape.past or shape.plural:
        return list(ranked)
    if sure > 1 and answers_sure > 1:
        return list(ranked)
    pool = ranked[:CANDIDATES]
    verdicts = _verdicts(question, pool, judge)
    idle = [s for s, v in zip(pool, verdicts, strict=True) if _settles(v, ("neither",), sure)]
    sure_answers = [
        (v.p, i)
        for i, (s, v) in enumerate(zip(pool, verdicts, strict=True))
        if _settles(v, ("answers",), answers_sure)
        and _holds(s, at)
        and s.message.role != "assistant"
    ]
    first = [pool[max(sure_answers)[1]]] if sure_answers else []
    rest = [s for s in ranked if s not in idle and s not in first]
    return [*first, *rest, *idle]


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


def polarity(
    question: str,
    shape: Shape,
    composed: tuple[str, list[Sentence], str],
    judge: Judge,
    at: datetime,
    sure: float | None = None,
) -> tuple[str, list[Sentence], str]:
    """The composer's yes or no, turned when the judge is sure its one quoted sentence
    settles the question the other way (the composer chose the sentence; the judge
    reads what it means: "those antibiotics were long done" is a no)."""
    sure = SURE_FLIP if sure is None else sure
    text, used, why = composed
    if shape.form != "yes_no" or sure > 1 or len(used) != 1 or "(ended " in text:
        return composed
    if shape.past or shape.before or shape.during or shape.ends:
        return composed  # the judge reads a sentence, not the time a question asks about
    said_yes = text.startswith("Yes: ")
    if not (said_yes or text.startswith("No: ")):
        return composed
    (s,) = used
    if s.message.role == "assistant":
        return composed
    (v,) = _verdicts(question, [s], judge)
    if v.label not in ("yes", "no") or v.p < sure:
        return composed
    yes = (v.label == "yes") != shape.negated
    if yes == said_yes or (yes and not _holds(s, at)):
        return composed
    flipped = f"{'Yes' if yes else 'No'}: {text.split(': ', 1)[1]}"
    return flipped, used, f"{why}; judge {judge.name}: {v.label} p={v.p:.2f}"
