"""Whose a piece of evidence is: the owner of each sentence and claim of the hits.

The answerer (read/answer.py) reads evidence as units, each owned by a person or
by nobody, to tell "that was Y's, not X's" and to read a person's own word.
Ownership comes from the sentence's subject (lang/subject.py), else its pronouns,
else the one person it names; a name used to address someone is left out.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ..lang.query import names_in
from ..lang.subject import clause_subject, kin_names
from ..lang.text import fold, stem, words
from ..lang.whose import FIRST_PERSON_WORDS, SECOND_PERSON_WORDS, VOCATIVE
from ..model import Hit
from .sentences import SENTENCE_BREAK


@dataclass(frozen=True)
class Unit:
    """One piece of evidence: a message sentence or a claim, and whose it is."""

    text: str
    owner: str | None  # a claim's subject if a person, else its speaker; see sentence_owner
    hit: Hit
    rank: int  # position of its hit in the search results
    valid_from: datetime | None = None  # claims: when it happened


def sentence_owner(
    sentence: str, speaker: str, addressees: Sequence[str], people: Sequence[str], **how: Any
) -> str | None:
    """Whose a sentence is: see owner_and_subject (``how``: its ``kin`` and ``by_kin``)."""
    return owner_and_subject(sentence, speaker, addressees, people, **how)[0]


def owner_and_subject(
    sentence: str,
    speaker: str,
    addressees: Sequence[str],
    people: Sequence[str],
    *,
    kin: Mapping[tuple[str, str], str] | None = None,
    by_kin: bool = True,
) -> tuple[str | None, bool]:
    """Whose a sentence is, and whether its subject said so (archivist/subject.py).

    Failing a subject: "I/my" anywhere → the speaker, "you/your" → the one
    addressee, a named person, else nobody (None: "That race sounds great!"
    could be about anyone).
    """
    said = said_to(sentence)
    known = [*people, *(kin or {}).values()]
    subject = clause_subject(said, speaker, known, kin, by_kin=by_kin)
    if subject is not None:
        return subject, True
    low = {fold(w) for w in words(sentence)}
    if low & FIRST_PERSON_WORDS:
        return speaker, False
    if low & SECOND_PERSON_WORDS:
        return (addressees[0] if len(addressees) == 1 else None), False
    named = [p for p in names_in(said, people) if p != speaker]
    return (named[0] if len(named) == 1 else None), False


def focus_owner(
    text: str, speaker: str, addressees: Sequence[str], wanted: Sequence[str]
) -> str | None:
    """Whose the asked words are in a sentence that speaks of both sides: the person of
    the nearest "I/my" or "you/your" before the first asked word ("I hope I find
    something I'm as passionate about as you are with watercolor painting" puts the
    watercolor painting on the one addressed), or None when no pronoun comes first."""
    tokens = [fold(t) for t in re.findall(r"[\w'’]+", text)]
    first = next((i for i, t in enumerate(tokens) if stem(t) in wanted), None)
    for t in reversed(tokens[:first] if first is not None else []):
        if t in FIRST_PERSON_WORDS:
            return speaker
        if t in SECOND_PERSON_WORDS:
            return addressees[0] if len(addressees) == 1 else None
    return None


def evidence_kin(hits: Sequence[Hit]) -> dict[tuple[str, str], str]:
    """The relatives the evidence names ("my mum Halina"), for "Mum had a fall"."""
    return kin_names(
        (h.message.speaker, s) for h in hits for s in SENTENCE_BREAK.split(h.message.indexed_text())
    )


def said_to(sentence: str) -> str:
    """The sentence without a name used to address someone ("Hey Gina, I ..." is not Gina's)."""
    for vocative in VOCATIVE:
        sentence = vocative.sub(" ", sentence)
    return sentence


def evidence_units(
    hits: Sequence[Hit], people: Sequence[str], *, by_kin: bool = True
) -> list[Unit]:
    """Every hit's sentences and claims as units, each owned by a person (or nobody)."""
    known = {p.casefold(): p for p in people}
    kin = evidence_kin(hits)
    units = []
    for rank, h in enumerate(hits):
        m = h.message
        for sentence in SENTENCE_BREAK.split(m.indexed_text()):
            if sentence.strip():
                owner = sentence_owner(
                    sentence, m.speaker, m.addressees, people, kin=kin, by_kin=by_kin
                )
                if owner is None and sentence.lstrip().startswith("[image"):
                    owner = m.speaker  # a photo someone shares is usually of their own life
                units.append(Unit(sentence.strip(), owner, h, rank))
        for c in h.claims:
            # heuristic claims rewrite pronouns mechanically: their subject is no evidence
            owner = None if c.method == "heuristic" else known.get(c.subject.casefold(), c.speaker)
            units.append(Unit(c.text, owner, h, rank, c.valid_from))
    return units


def own_word(speaker: str, owner: str | None, person: str) -> bool:
    """Whether ``person`` said it about themselves: their message, and nobody else's
    by its subject (an unclear owner counts as the speaker's)."""
    return fold(speaker) == fold(person) == fold(owner or person)
