"""The sentences of evidence messages, each with what memory knows of it: its owner,
when what it says stopped holding (its claims' end, or a window it sets), when its
event happened, and the question a short reply answers; and how an answer quotes,
dates and counts one, and how much of a question's words it holds (``coverage``).
The extractive answerer (read/extractive.py) ranks and reads them; history marks and
context lines split text at the same breaks.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from ..lang.denial import TOKEN
from ..lang.evidence import (
    ASKS_SINCE_WHEN,
    NUMBER_WORDS,
    ORDINAL_WORDS,
    UNTIL_WORD,
)
from ..lang.phrasing import INSTEAD, NO_LONGER_LEAD, NO_LONGER_TAIL, SWAPS
from ..lang.text import is_stopword, stem, words
from ..lang.timeground import as_placed, find_times
from ..model import Claim, Hit, Message

# Where one sentence ends and the next begins: the one split of answers and context.
# a stop, then space; not the stop of a title ("my head nurse, Dr. Okafor")
SENTENCE_BREAK = re.compile(
    r"(?<=[.!?])(?<!\bDr\.)(?<!\bMr\.)(?<!\bMs\.)(?<!\bMrs\.)(?<!\bSt\.)(?<!\bProf\.)\s+"
)
# claim kinds that tell nothing: a question asked, small talk the judge read as such
IDLE_KINDS = frozenset({"question", "chatter"})


@dataclass(frozen=True)
class Sentence:
    """One sentence of an evidence message, with what memory knows about it."""

    text: str
    message: Message
    owner: str | None  # whose it is (read/owners.py sentence_owner), None if unclear
    rank: int  # its hit's position in the search results
    ended: datetime | None = None  # when what it says stopped holding, as of ``at``
    when: datetime | None = None  # when its event happened, if a claim or the text says
    relevance: float = 0.0
    score: float = 0.0
    subject: bool = False  # the owner is the sentence's subject (archivist/subject.py)
    # the question a short reply answers, with who asked it ("Andrés: So who's this
    # Marisol?" for "My girlfriend!"): read with the reply, quoted beside it
    asked: str = ""
    # all it states is small talk or a question (its claims' kinds): it tells nothing
    idle: bool = False


def window_end(text: str, said: datetime) -> datetime | None:
    """The end of a window the sentence sets ("until the end of July"), if it names one."""
    if not UNTIL_WORD.search(text):
        return None
    for ref in find_times(text, said):
        i = text.find(ref.text)
        # the time may hold its "until" ("until the 20th") or follow it ("until she is back
        # from Peru on the 20th")
        if i >= 0 and (UNTIL_WORD.match(ref.text) or UNTIL_WORD.search(text[max(0, i - 40) : i])):
            return ref.end or ref.start
    return None


def _overlap(claim: Claim, sentence: str) -> float:
    """Share of a claim's content stems the sentence holds. Claims rewrite pronouns as
    names, so the speaker's and subject's names count only where the sentence has them:
    "Gem is pregnant!" is stated by "I'm pregnant!"."""
    mine = {stem(w) for w in words(claim.text) if not is_stopword(w)}
    have = {stem(w) for w in words(sentence)}
    names = {stem(w) for w in words(f"{claim.speaker} {claim.subject}")} - have
    mine = (mine - names) or mine
    return len(mine & have) / len(mine) if mine else 0.0


def sentence_claims(sentence: str, claims: Sequence[Claim]) -> list[Claim]:
    """The message's claims this sentence states (most of the claim's words in it)."""
    return [c for c in claims if c.status != "duplicate" and _overlap(c, sentence) >= 0.6]


def ended_at(claims: Sequence[Claim], at: datetime) -> datetime | None:
    """When the claims stopped holding, if all of them have by ``at`` (None when there
    are none, or one still holds: an event always does, it stays true as history)."""
    if not claims or any(c.holds_at(at) for c in claims):
        return None
    return min((c.valid_to for c in claims if c.valid_to is not None), default=None)


def split_sentences(text: str) -> list[str]:
    return [p.strip() for p in SENTENCE_BREAK.split(text) if p.strip()]


def message_sentences(
    hits: Sequence[Hit],
    claims: Mapping[tuple[str, str], Sequence[Claim]],
    at: datetime,
    owner_of,
    prompts: Mapping[tuple[str, str], str] | None = None,
) -> list[Sentence]:
    """Every sentence of the hits, with its owner, its claims' end and event time;
    ``prompts`` (``reply_prompt`` by message key) gives a reply's first sentence
    the question it answers."""
    out = []
    for rank, h in enumerate(hits):
        m = h.message
        said = claims.get((m.conversation, m.id), ())
        prompt = (prompts or {}).get((m.conversation, m.id), "")
        for i, text in enumerate(split_sentences(m.indexed_text())):
            mine = sentence_claims(text, said)
            starts = [c.valid_from for c in mine if c.valid_from is not None]
            ended = ended_at(mine, at)
            if ended is None and (end := window_end(text, m.timestamp)) is not None and end <= at:
                ended = end  # "on night shifts until the end of July", asked in August
            owner, subject = owner_of(text, m)
            out.append(
                Sentence(
                    text=text,
                    message=m,
                    owner=owner,
                    rank=rank,
                    ended=ended,
                    when=min(starts) if starts else None,
                    subject=subject,
                    asked=prompt if i == 0 else "",
                    idle=bool(mine) and all(c.kind in IDLE_KINDS for c in mine),
                )
            )
    return out


_SEASONS = {m: season for season, ms in (("winter", (12, 1, 2)), ("spring", (3, 4, 5)),
             ("summer", (6, 7, 8)), ("autumn", (9, 10, 11))) for m in ms}  # fmt: skip


def format_when(when: datetime, granularity: str = "day") -> str:
    """Dates the way LoCoMo writes them: "7 May 2023", "May 2023", "2022"."""
    if granularity == "year":
        return str(when.year)
    if granularity == "season":  # "next spring": the season said, not its first month
        return f"{_SEASONS[when.month]} {when.year}"
    if granularity == "month":
        return f"{when:%B} {when.year}"
    if granularity == "week":
        return f"the week of {when.day} {when:%B} {when.year}"
    return f"{when.day} {when:%B} {when.year}"


# "Since when…?", "By when…?": the time said with that word ("since February", "out
# by July 10th") answers first, even in a later sentence of the message.
_WHEN_WORDS = {"since": "since|from", "from": "since|from", "by": "by|until|till|before"}
_WHEN_WORDS |= {"until": _WHEN_WORDS["by"], "till": _WHEN_WORDS["by"]}


def after_in_message(s: Sentence) -> str:
    """What its message says after the sentence ("" if the sentence is not found in it)."""
    text = s.message.indexed_text()
    start = text.find(s.text)
    return text[start + len(s.text) :] if start >= 0 else ""


def event_time(s: Sentence, question: str = "", wanted: Sequence[str] = ()) -> tuple[datetime, str]:
    """When the sentence's event happened: a time it names, else one the sentences after
    it in its message name ("I got promoted! Officially from the 1st of November."),
    else its claim's start, else its date. Of several times in a sentence, the one
    nearest an asked word (``wanted`` stems): "Japanese classes on Thursday nights for
    my Tokyo trip next spring" dates the trip in spring. "Since when…?" and "By
    when…?" take a time said with "since" or "by" first ("fell in January… been
    there since February")."""
    said = s.message.timestamp
    parts = [s.text, after_in_message(s)]
    found = []
    for part in parts:
        asked = [t.start() for t in TOKEN.finditer(part) if stem(t.group(0).lower()) in wanted]
        refs = find_times(part, said)
        if asked:
            refs.sort(key=lambda r: min(abs(part.find(r.text) - a) for a in asked))
        found += [(part, ref) for ref in refs]
    if m := ASKS_SINCE_WHEN.match(question):
        cue = _WHEN_WORDS[m[1].lower()]
        said_with = re.compile(rf"\b(?:{cue})\s+$", re.I)
        with_cue = [
            (p, r)
            for p, r in found
            if re.match(rf"(?:{cue})\b", r.text, re.I) or said_with.search(p[: p.find(r.text)])
        ]
        found = with_cue + found
    if found:
        part, ref = found[0]
        if s.when is not None and part is parts[0]:  # as its claim placed it
            ref = as_placed(part, said, ref, (s.when,))
        return ref.start, ref.granularity
    if s.when is not None:
        return s.when, "day"
    return s.message.timestamp, "day"


def quoted(s: Sentence, *, drop_replaced: bool = False, wanted: Sequence[str] = ()) -> str:
    """The sentence as said; ``drop_replaced`` cuts what it replaced ("instead of the
    ThinkPad") and what stopped, unless that bears on more of ``wanted`` (stems).

    Speaker and date travel beside it (``Answer.speaker``, ``Answer.said_at``):
    a scorer of short answers should not pay for them, a reader sees them.
    """
    text = s.text.strip()
    if s.asked:
        return f"{text} (in reply to {s.asked})"
    if drop_replaced:
        text = INSTEAD.sub("", text).strip()
        for swap, said in SWAPS:  # "Traded the Fiesta in for a Kia" - "Traded it for a Kia"
            if (kept := swap.sub(said, text, count=1)) != text:
                if _stems(text) & set(wanted) <= _stems(kept):
                    text = kept
        # "I'm no longer managing the support team, I moved over to the data team"
        # answers "What team is she on?" with its second clause alone, but not "Which
        # team does she manage now?": what stopped is cut only when what is left
        # holds every asked word it held
        for cut, lead in ((NO_LONGER_LEAD, True), (NO_LONGER_TAIL, False)):
            if (kept := cut.sub("", text, count=1)) != text and words(kept):
                if _stems(text) & set(wanted) <= _stems(kept):
                    text = kept[0].upper() + kept[1:] if lead else kept
                break
    return text


def _stems(text: str) -> set[str]:
    return {stem(w) for w in words(text)}


def count_in(text: str) -> int | None:
    """A count the sentence states: a number ("two cats", "3 kids") or an ordinal
    ("a second cat")."""
    for w in words(text.lower()):
        if w.isdigit() and len(w) < 4:
            return int(w)
        if w in NUMBER_WORDS:
            return NUMBER_WORDS[w]
    for w in words(text.lower()):
        if w in ORDINAL_WORDS:
            return ORDINAL_WORDS[w]
    return None


def coverage(
    text: str,
    wanted: Sequence[str],
    weights: Mapping[str, float] | None = None,
    *,
    extend: bool = True,
) -> float:
    """Share of the wanted stems the text holds, each weighted (rarer words weigh more).

    ``extend``: a text word whose stem extends a wanted one counts too ("movers"
    for "move": stems "mover", "mov"). Speaker verification keeps exact stems,
    as measured.
    """
    if not wanted:
        return 0.0
    have = {stem(w) for w in words(text)}
    weight = (lambda x: weights[x]) if weights is not None else (lambda x: 1.0)
    total = sum(weight(x) for x in wanted)
    found = sum(weight(x) for x in wanted if x in have or (extend and _extends(x, have)))
    return found / total if total else 0.0


def _extends(want: str, have: set[str]) -> bool:
    return len(want) >= 3 and any(h.startswith(want) and len(h) <= len(want) + 2 for h in have)
