"""Whose a sentence is, read off its grammatical subject.

Speaker verification and answer ranking ask whose a sentence is. A first-person
word anywhere ("my", "I") used to make it the speaker's, so "My brother Kofi
just started as a paramedic" was Amara's job and "Big news from Ingrid: she
finally sold the Volvo" could not be told from Lars selling his. Chat sentences
mostly open with their subject, so the subject is read from the clause's
first words:

- "my (new) flatmate Carla / my flatmate is Carla" → Carla; "my mum", "Mum
  had a fall" → the speaker's mum (named when the evidence says "my mum Halina");
- "she / he" → the one person named earlier in the sentence;
- a name the evidence introduced ("Inês moved out") → that person;
- a clause opening with a past-tense verb and no subject ("Landed in Lisbon",
  "Cancelled PureGym") → the speaker, as diaries and chats drop the "I".

Anything else is left to the caller's older rule (read/owners.py sentence_owner).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence

from .text import KIN, fold, words

# a word speaking to someone, in chat's spellings too: whom it is about may be them
SECOND_PERSON = re.compile(r"\b(?:you|your|yours|u|ur|ya|y'all)\b", re.IGNORECASE)
_ADJ = frozenset(
    "new old best little big older younger eldest oldest youngest elder twin ex other late".split()
)
_OPENERS = frozenset(
    "so and but oh well also then anyway update btw ok okay yes yeah no hey just finally "
    "already officially actually".split()
)
_THIRD = frozenset("he she they".split())
_FIRST = frozenset("i i'm i've i'd i'll we we're we've we'll".split())
# past forms that do not end in -ed, for "Sold the car!"-style openings
_IRREGULAR = frozenset(
    """got went had made took ran sold bought left began won lost met found broke
    came did drove flew gave kept quit spent swam threw wrote been saw felt heard""".split()
)
# "Doctor says crutches for six weeks": what is reported is about the speaker
_REPORTS = frozenset(
    "says said thinks thought reckons told tells wants wanted asked asks suggested "
    "recommended prescribed".split()
)
# "Kids are resilient": a plural opening a sentence speaks of people in general
_GENERIC = frozenset("kids children parents siblings friends colleagues coworkers".split())
_CLAUSE = re.compile(r"^(?:[^:]{1,60}):\s+(?=\S+\s+\S)")  # "Big news from Ingrid: she …"
_NAME = re.compile(r"[A-ZÀ-Þ][\w'’-]*")


def _kin(word: str) -> str | None:
    w = fold(word).removesuffix("'s").removesuffix("’s")
    return w if w in KIN else None


def kin_names(texts: Iterable[tuple[str, str]]) -> dict[tuple[str, str], str]:
    """(speaker, kin word) -> the name the speaker gave them: "my mum Halina", "my
    new flatmate is Carla". ``texts`` are (speaker, sentence) pairs."""
    out: dict[tuple[str, str], str] = {}
    for speaker, text in texts:
        toks = text.split()
        for i, tok in enumerate(toks):
            if fold(tok) not in ("my", "our"):
                continue
            j = i + 1
            while j < len(toks) and fold(toks[j]) in _ADJ:
                j += 1
            if j >= len(toks) or not (kin := _kin(toks[j].strip(",.!?"))):
                continue
            name = _named_after(toks, j + 1)
            if name:
                out[(speaker.casefold(), kin)] = name
    return out


def _named_after(toks: Sequence[str], j: int) -> str | None:
    """The name right after a kin word: "my mum Halina", "my flatmate is Carla"; none
    past the kin word's sentence ("… my kids. How are yours?")."""
    if 0 < j <= len(toks) and toks[j - 1][-1:] in ".!?;:,":
        return None
    if j < len(toks) and fold(toks[j]) == "is":
        j += 1
    if j < len(toks) and (m := _NAME.fullmatch(toks[j].strip(",.!?;:"))):
        name = m.group(0).removesuffix("'s").removesuffix("’s")
        return name if fold(name) not in _FIRST and fold(name) not in _THIRD else None
    return None


def clause_subject(
    sentence: str,
    speaker: str,
    known: Sequence[str] = (),
    kin: Mapping[tuple[str, str], str] | None = None,
    *,
    by_kin: bool = True,
) -> str | None:
    """Whose the sentence is by its subject, or None when its first words do not say.

    ``known``: names of people (the store's, and those the evidence introduced).
    ``kin``: from kin_names, to name "my mum" as Halina. ``by_kin`` False keeps
    "my brother" sentences out (the question asks about the brother).
    """
    text = sentence.strip()
    head = ""
    if m := _CLAUSE.match(text):
        head, text = text[: m.end()], text[m.end() :]
    toks = [t for t in text.split() if t.strip(",.!?;:\"'")]
    i = 0
    while i < len(toks) and fold(toks[i].strip(",")) in _OPENERS:
        i += 1
    if i >= len(toks):
        return None
    first = fold(toks[i].strip(",.!?"))
    if first in _FIRST:
        return speaker
    if first in ("my", "our"):
        return _possessed(toks, i + 1, speaker, kin or {}) if by_kin else speaker
    if by_kin and i == 0 and (k := _kin(toks[i])) and toks[i][:1].isupper() and k not in _GENERIC:
        if _reports(toks, i + 1):
            return None
        return _relative(speaker, k, kin or {})  # "Mum had a fall in January"
    if first in _THIRD:
        named = [n for n in _names(head + " " + " ".join(toks[:i]), known) if n != speaker]
        return named[0] if len(set(named)) == 1 else None
    word = toks[i].strip(",.!?;:").removesuffix("'s").removesuffix("’s")
    for name in known:
        if fold(name) == fold(word) and i + 1 < len(toks) and not toks[i].endswith(","):
            return name
    if (toks[i][:1].isupper() or i > 0) and _past(first) and i + 1 < len(toks):
        # "Landed in Lisbon for the conference!", "Just got some new shoes": a sentence
        # that opens on a past verb has left out its "I"
        return speaker
    return None


def _possessed(toks: Sequence[str], j: int, speaker: str, kin: Mapping) -> str:
    """The subject "my …" opens: the speaker, unless it is a relative and not "and I"."""
    while j < len(toks) and fold(toks[j]) in _ADJ:
        j += 1
    k = _kin(toks[j].strip(",.!?")) if j < len(toks) else None
    if k is None:
        return speaker  # "My flight was delayed" is the speaker's
    rest = " ".join(fold(t) for t in toks[j + 1 : j + 4])
    if re.match(r"(?:\w+ )?and (?:i|me)\b", rest):
        return speaker  # "my kids and I went camping"
    name = _named_after(toks, j + 1)
    if _reports(toks, j + (3 if name and fold(toks[j + 1]) == "is" else 2 if name else 1)):
        return speaker  # "My doctor says no driving" is about the speaker
    return name or _relative(speaker, k, kin)


def _reports(toks: Sequence[str], j: int) -> bool:
    return j < len(toks) and fold(toks[j].strip(",.!?")) in _REPORTS


def _relative(speaker: str, k: str, kin: Mapping[tuple[str, str], str]) -> str:
    return kin.get((speaker.casefold(), k)) or f"{speaker}'s {k}"


def _names(text: str, known: Sequence[str]) -> list[str]:
    low = {fold(w) for w in words(text)}
    return [n for n in known if fold(n) in low]


def _past(word: str) -> bool:
    return word in _IRREGULAR or (len(word) > 4 and word.endswith("ed"))


def relative_subject(
    sentence: str, speaker: str, kin: Mapping[tuple[str, str], str] | None = None
) -> str | None:
    """The speaker's relative or housemate the sentence is about, by its subject:
    "My mum Halina still lives alone" → Halina, "Mum had a fall" → Halina (or
    "Marta's mum" when no message named her); None when the subject is the
    speaker, someone else, or unclear. Extraction files such a claim under the
    relative, so a later "she moved into a care home" ends the relative's home,
    not the speaker's."""
    who = clause_subject(sentence, speaker, (), kin)
    return who if who is not None and fold(who) != fold(speaker) else None


def mentions_kin(question: str) -> bool:
    """The question asks about someone's relative ("Where does Amara's brother work?")."""
    return any(_kin(w) for w in words(question))


# ", and I still live in Leeds", "; my partner eats meat": a clause joined on with its own
# first-person subject, written as chat writes it too (", and i still live in leeds")
_OWN_CLAUSE = re.compile(
    r"\s*(?:,\s*(?:and|but|plus)|;)\s+"
    r"(?=(?i:i|i'm|i’m|im|i've|i’ve|ive|i'll|i’ll|i'd|i’d|we|we're|we’re|we've|we’ve|my|our)\s)"
)


def split_clauses(sentence: str) -> list[str]:
    """A sentence's clauses that each have their own first-person subject ("Still a
    tester at Northgate Bank, and I still live in Leeds"): one fact each, so a
    change to one ends only it. Parts of fewer than three words stay joined."""
    parts: list[str] = []
    start = 0
    for m in _OWN_CLAUSE.finditer(sentence):
        head, tail = sentence[start : m.start()], sentence[m.end() :]
        if len(head.split()) >= 3 and len(tail.split()) >= 3:
            parts.append(head.strip(" ,;"))
            start = m.end()
    parts.append(sentence[start:].strip())
    return [p for p in parts if p]
