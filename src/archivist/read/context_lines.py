"""What the lines of a context say: how a claim or a message is written as a line,
and the sentences of a line a turn bears on or a request already holds.

Pure text work over the candidates a context is packed from (``without``, ``bearing_on``,
``fragments_as_turns``);
the assembly itself (gathering, ranking, packing) is ``read.context``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime

from ..lang.text import person_key, query_terms, share_in, stem
from ..lang.timeground import dated, last_day, spoken_day
from ..model import Claim, Message
from .sentences import SENTENCE_BREAK


@dataclass(frozen=True)
class Candidate:
    """Something that could be shown, with the signals that rank it."""

    kind: str
    id: str
    text: str
    relevance: float = 0.0
    usefulness: float = 0.5
    importance: float = 0.5  # 0..1
    salience: float = 0.5  # 0..1
    when: datetime | None = None
    conversation: str = ""
    skippable: bool = False  # may be dropped when a shown summary already says it
    body: str = ""  # the content words judged against summaries (default: ``text``)
    # taken first in its section (the conversation's last turns); key info: the
    # requester's, shown first, with a share of its own, never cut to the turn's words
    pinned: bool = False
    reply: bool = False  # an assistant's message: often an echo of what it was told
    # the question a short reply answers ("Two of them." to "How many kids?"): the reply
    # is shown with it or not at all
    prompt: Candidate | None = None
    # a long message's line cut to the sentences the turn bears on (``excerpt``): shown
    # in its place where the whole line does not fit; "" when there is none
    excerpt: str = ""
    covers: frozenset[int] = field(default_factory=frozenset)  # summaries: sessions spanned
    # the messages it stands for, (conversation, message id): a claim's evidence, a
    # message itself; what the request already holds, or a last turn, is not said again
    evidence: frozenset[tuple[str, str]] = field(default_factory=frozenset)


def claim_line(c: Claim) -> str:
    """``[8 May 2023] Ana (plan, reported): text (until 31 May 2023)``: a window's last
    day (its stored end is exclusive), as key info writes it; a relative time in the
    text resolved ("last Saturday [6 May 2023]")."""
    tags = ", ".join(t for t in (c.kind, "" if c.source == "first_hand" else c.source) if t)
    last = last_day(c.valid_to) if c.valid_to else None
    until = f" (until {spoken_day(last)})" if c.kind == "foresight" and last else ""
    text = dated(c.text, c.said_at, (c.valid_from,) if c.valid_from else ())
    return f"[{spoken_day(c.said_at)}] {c.speaker} ({tags}): {text}{until}"


def message_line(
    m: Message, everyone: Collection[str] = (), placed: tuple[datetime, ...] = ()
) -> str:
    """``[8 May 2023] Ana → Lee: text``, a relative time in the text resolved ("see you
    tomorrow [9 May 2023]"), as the message's claims placed it (``placed``: their starts,
    ``timeground.as_placed``). The day, not the hour: the lines' order tells the rest.

    ``everyone``: the conversation's participants. A message to all the others
    (every message of a two-person chat) is written ``Ana: text``: the arrow would
    repeat the same names on every line, a tenth of a short line's words.
    """
    others = {person_key(p) for p in everyone} - {person_key(m.speaker)}
    to = (
        f" → {', '.join(m.addressees)}"
        if m.addressees and {person_key(a) for a in m.addressees} != others
        else ""
    )
    role = " (system)" if m.role == "system" else ""
    text = dated(m.indexed_text(), m.timestamp, placed)
    return f"[{spoken_day(m.timestamp)}] {m.speaker}{role}{to}: {text}"


DAY = re.compile(r"\[(\d{1,2} [A-Z][a-z]+ \d{4})\] ")  # a line's "[25 May 2023] "


def day_of(line: str) -> tuple[str, str]:
    """A dated line's day and the rest: ("25 May 2023", "Ana → Lee: …"); ("", line)
    for a line that does not start with its day."""
    found = DAY.match(line)
    return (found.group(1), line[found.end() :]) if found else ("", line)


def days_once(lines: Sequence[str]) -> list[str]:
    """Lines in time order with each day written once, on its first line: "[25 May
    2023] Ana → Lee: …" then "Lee → Ana: …" (a line without a day is of the day above),
    as a chat log reads; the day cost a line about a sixth of its words on LoCoMo."""
    out, last = [], ""
    for line in lines:
        day, rest = day_of(line)
        out.append(rest if day and day == last else line)
        last = day or last
    return out


def same_text(text: str) -> str:
    """``text`` in the form two sayings of one thing share: case and spacing folded."""
    return " ".join(text.casefold().split())


def in_request(request: Sequence[Message]) -> tuple[set[tuple[str, str]], set[str]]:
    """What a stored message repeating one of ``request``'s has: its (conversation, id)
    among the first set, or its words (``same_text``) among the second (the same
    words stored under another id)."""
    keys = {(m.conversation, m.id) for m in request}
    return keys, {t for m in request if (t := same_text(m.indexed_text()))}


def without(
    sections: Mapping[str, Sequence[Candidate]],
    request: Sequence[Message],
    share: float,
) -> dict[str, list[Candidate]]:
    """The sections less what only repeats the ``request``'s messages.

    A message of the request (same conversation and id, or the same words stored
    elsewhere) and a claim whose evidence is only such messages are left out; so
    is each sentence of key info, a summary or an entity whose content words the
    request holds (``share`` of them), and an item with nothing else left.
    """
    keys, texts = in_request(request)
    for c in (*sections.get("message", ()), *sections.get("log", ())):
        if same_text(c.body or c.text) in texts:
            keys |= c.evidence  # the same words stored under another id
    said = " ".join(f"{m.speaker} {' '.join(m.addressees)} {m.indexed_text()}" for m in request)
    words = set(query_terms(said))  # who said it is in front of the assistant too
    out: dict[str, list[Candidate]] = {}
    for kind, cands in sections.items():
        if kind in ("message", "claim", "log"):
            out[kind] = [
                replace(c, prompt=None) if c.prompt and c.prompt.evidence <= keys else c
                for c in cands
                if not (c.evidence and c.evidence <= keys)
            ]  # a reply's question in the request is in front of the assistant already
            continue
        out[kind] = []
        for c in cands:
            text = unsaid(c.text, words, share)
            if text:
                body = unsaid(c.body, words, share) if c.body else ""
                out[kind].append(replace(c, text=text, body=body))
    return out


NOTE = re.compile(r"\([^()]*\)")  # "(since 2024-03-11; reported by Ana)": no content


def unsaid(text: str, words: set[str], share: float) -> str:
    """``text`` without the sentences whose content words are mostly in ``words``."""
    return sentences_where(text, lambda terms: not terms or share_in(terms, words) < share)


def bearing(text: str, stems: set[str]) -> str:
    """``text`` with only the sentences that share a content word (by stem) with the turn."""
    return sentences_where(text, lambda terms: bool(stems & {stem(t) for t in terms}))


ELIDED = "…"


def excerpt(text: str, stems: set[str], longest: int) -> str:
    """A message line longer than ``longest`` words cut to the sentences that share a
    content word (by stem) with the turn, each left-out run of sentences marked "…"
    where it was; the whole line when none or all of them do.

    A long chatty turn usually answers the question in one sentence: where the whole
    line does not fit, that sentence is worth more to a reader than the first words
    cut short ("… [cut]"). Its head ("[8 May 2023] Ana: ") stays.
    """
    head, sep, body = text.partition(": ")
    if not sep:
        head, body = "", text
    if not stems or len(body.split()) <= longest:
        return text
    sentences = SENTENCE_BREAK.split(body)
    keep = [bool(stems & {stem(t) for t in query_terms(s)}) for s in sentences]
    if all(keep) or not any(keep):
        return text
    parts: list[str] = []
    for i, (sentence, kept) in enumerate(zip(sentences, keep, strict=True)):
        if kept:
            parts.append(sentence)
        elif i == 0 or keep[i - 1]:
            parts.append(ELIDED)
    return f"{head}{sep}{' '.join(parts)}"


def sentences_where(text: str, keep: Callable[[set[str]], bool]) -> str:
    """``text`` with only the sentences whose content words (history and "(since …)"
    notes aside) ``keep`` accepts; its head ("Ana: ", "4 March 2024 to 11 March 2024: ") is
    kept while a sentence with content words remains, else ""."""
    head, sep, body = text.partition(": ")
    if not sep:
        head, body = "", text
    kept = [
        sentence
        for sentence in SENTENCE_BREAK.split(body)
        if keep(set(query_terms(NOTE.sub(" ", sentence))))
    ]
    if not any(query_terms(k) for k in kept):
        return ""
    rest = " ".join(kept)
    return f"{head}{sep}{rest}" if sep else rest


def turn_words(query: str, people: Sequence[str]) -> set[str]:
    """The turn's content words less people's names: naming Priya would make every
    sentence or claim about Priya share a word with it."""
    names = {stem(w) for p in people for w in query_terms(p)}
    return {w for w in query_terms(query) if stem(w) not in names}


def in_key_info(claim_text: str, key_info: str) -> bool:
    """Does ``key_info`` say the claim (key info writes a claim's text as its sentence)?"""
    body = " ".join(claim_text.split()).rstrip(".!?")
    return bool(body) and body in key_info


def bearing_on(
    sections: dict[str, list[Candidate]], query: str, people: Sequence[str]
) -> dict[str, list[Candidate]]:
    """Key info and summaries cut to the sentences the turn bears on.

    Whole, they are a general portrait that spends the budget on what this turn
    does not ask about (on LoCoMo, showing them whole lowered the share of
    evidence turns a context holds at every budget). A sentence stays when it
    shares a content word with the turn, people's names aside: naming Priya
    makes every sentence about Priya share a word. A turn with no word but names
    ("Where is Ana?", "Tell me about Ana") asks about the person: all of it stays.
    The requester's own key info (pinned) stays whole: what the assistant should
    know of whom it is talking to at all times.
    """
    stems = {stem(w) for w in turn_words(query, people)}
    if not stems:
        return sections
    out = dict(sections)
    for kind in ("key_info", "summary"):
        out[kind] = [
            c if c.pinned else replace(c, text=text)
            for c in sections[kind]
            if c.pinned or (text := bearing(c.text, stems))
        ]
    return out


def fragments_as_turns(
    claims: Sequence[Candidate], turns: Mapping[tuple[str, str], Message], share: float
) -> tuple[list[Candidate], dict[tuple[str, str], tuple[Message, float]]]:
    """The claims that say what their turn says, and the turns of the rest, with the
    relevance their claims found.

    A claim of one sentence of a longer turn ("Highly recommend it for sure!" of a
    message naming the book) is a fragment: shown alone it hides what the turn
    says around it. Its turn is shown whole instead, as a message, ranked by what
    the claim matched; a claim holding most of its turn's words (``share``)
    stands for the turn itself, in fewer words.
    """
    kept: list[Candidate] = []
    found: dict[tuple[str, str], tuple[Message, float]] = {}
    said: dict[tuple[str, str], set[str]] = {}  # a turn's words, read once for its claims
    for c in claims:
        m = turns.get(next(iter(c.evidence))) if len(c.evidence) == 1 else None
        if m is None:
            kept.append(c)
            continue
        key = (m.conversation, m.id)
        if key not in said:
            said[key] = set(query_terms(m.indexed_text()))
        if share_in(said[key], set(query_terms(c.body))) >= share:
            kept.append(c)
            continue
        found[key] = (m, max(c.relevance, found.get(key, (m, 0.0))[1]))
    return kept, found
