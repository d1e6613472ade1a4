"""What the holder of an answer said since: a later statement that denies what a yes
rests on, ends whom or what it named, or tells of a turn (read/extractive.py's yes/no
and open answers about now). Pure functions of the evidence sentences; the relevance
floors are the answerer's.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from ..lang.denial import denies
from ..lang.evidence import CLAUSES
from ..lang.phrasing import ADDED, TURN
from ..lang.text import CALENDAR_WORDS, ended_objects, fold, is_stopword, names_thing
from .sentences import Sentence, coverage

# two sentences this close in meaning (cosine, bundled model) speak of one aspect of a
# life: measured here, a diet and "started eating chicken again" 0.38, a stay and "moved
# into his own place" 0.48, a new flat and a new job 0.21 (a change of one is not of the
# other); below it a later change is not read as ending an earlier yes
SAME_ASPECT = 0.3


def asks(s: Sentence) -> bool:
    return s.text.rstrip().endswith("?")


def speaks_of(s: Sentence, wanted: Sequence[str]) -> bool:
    """Whether the sentence (with the question it replies to) holds an asked word."""
    return coverage(f"{s.text} {s.asked}", wanted) > 0


def overtaken(
    best: Sentence,
    ranked: Sequence[Sentence],
    wanted: Sequence[str],
    person: str | None,
    near: Callable[[Sentence, Sentence], float],
    floor: float,
) -> Sentence | None:
    """A later sentence of the same holder that tells of a change bearing on the
    question, without the asked words: the yes ``best`` gave has been overtaken.

    "Is Ama vegetarian?" - "Ten years vegetarian" (December), then "Plot twist:
    started eating chicken again" (April): no. Memory holds no link between the two
    (no attribute names "eating chicken" a diet), so the later sentence must be of
    the same person (said by or naming them), relevant to the question, close in
    meaning to ``best`` (``SAME_ASPECT``: "Started a new job at the museum" does not
    end "Settled into the flat in Kyoto"), say that something began or changed, and
    add nothing ("also", "another"): an addition leaves the older state holding.
    ``floor``: the relevance a later sentence needs.
    """
    holder, said = said_later(best, ranked, person, floor)
    later = [
        s
        for s in said
        if not speaks_of(s, wanted)
        and (fold(s.owner or s.message.speaker) in holder or any(h in fold(s.text) for h in holder))
        and TURN.search(s.text)
        and not ADDED.search(s.text)
        and near(s, best) >= SAME_ASPECT
    ]
    return max(later, key=lambda s: s.relevance, default=None)


def said_later(
    best: Sentence, ranked: Sequence[Sentence], person: str | None, floor: float
) -> tuple[set[str], list[Sentence]]:
    """Who holds what ``best`` says (its owner, and the person asked about), and the
    statements relevant past ``floor`` said after it (no questions, not the
    assistant's): where a change or a denial of it may be told."""
    holder = {fold(best.owner or best.message.speaker)} | ({fold(person)} if person else set())
    said = [
        s
        for s in ranked
        if s.message.timestamp > best.message.timestamp
        and s.message.role != "assistant"
        and not asks(s)
        and s.relevance >= floor
    ]
    return holder, said


def denied_later(
    best: Sentence,
    ranked: Sequence[Sentence],
    asked_of: Sequence[str],
    person: str | None,
    floor: float,
) -> Sentence | None:
    """A later statement of the same holder that speaks of what is asked and denies it
    ("Closed the shop for good" after "Opened my bike repair shop"), if any: the
    newest word on a thing decides whether it holds now. ``floor``: the relevance such
    a statement needs (one that ends a name ``best`` gave needs none)."""
    # a name the thing was given ends it however few of the question's words it shares
    holder, said = said_later(best, ranked, person, floor=0.0)
    named = _named_with(best, holder)
    later = [
        s
        for s in said
        if (
            fold(s.owner or s.message.speaker) in holder
            and s.relevance >= floor
            and any(_denied_in(clause, asked_of) for clause in CLAUSES.split(s.text))
        )
        # the holder's word that what they named is gone: "Bea moved in with her boyfriend"
        or (fold(s.message.speaker) in holder and _ends_one_of(s.text, asked_of, named))
    ]
    return max(later, key=lambda s: s.message.timestamp, default=None)


def _named_with(best: Sentence, holder: set[str]) -> set[str]:
    """The names ``best`` gives what it speaks of ("Picked up my first car today, a red
    Corsa": Corsa), but its first word and the people who hold it."""
    people = holder | {fold(p) for p in (best.message.speaker, *best.message.addressees)}
    return {
        w
        for w in re.findall(r"(?<=\s)[A-Z][\w-]{2,}", best.text)
        if fold(w) not in people and not is_stopword(w) and fold(w) not in CALENDAR_WORDS
    }


def _ends_one_of(text: str, asked_of: Sequence[str], named: set[str]) -> bool:
    """Whether ``text`` says that the asked thing, or a name it was given, ended
    (``text.ended_objects``): "The Corsa failed its MOT so badly it's been scrapped"
    ends the car of "my first car today, a red Corsa"."""
    for thing in ended_objects(text):
        head = thing.split()[-1]  # "dog walker" is no dog
        # "Cancelled the gym membership" ended the PureGym it was named by
        if (
            any(names_thing(thing, n) or names_thing(n, thing) for n in named)
            or coverage(head, asked_of) > 0
        ):
            return True
    return False


def _denied_in(clause: str, asked_of: Sequence[str]) -> bool:
    """Whether a clause speaks of what is asked and denies it."""
    return coverage(clause, asked_of) > 0 and denies(clause, asked_of)
