"""What the keyword and vector indexes see for a message (pure functions).

A bare chat turn ("I went yesterday, it was so powerful!") names neither who
spoke, to whom, nor when, and the question that needs it will ("When did
Caroline go to the support group?"). So each message is indexed as a
self-contained sentence: speaker and addressee named, first and second person
resolved to names, the session date spelled out, the image caption attached,
and (for the vector) the turn it answers. Each choice was measured on LoCoMo
(see README, "Retrieval choices").
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..lang.statement import (
    FIRST_PERSON_SWAPS,
    PRONOUN,
    SECOND_PERSON_SWAPS,
)
from ..model import Claim, Episode, Message, content_hash


@dataclass(frozen=True)
class IndexOptions:
    """How messages are turned into index text; frozen so an index is reproducible."""

    speaker_prefix: bool = True
    resolve_pronouns: bool = True
    date_words: bool = True
    embed_context: int = 1  # previous turns included in the embedded text
    context_chars: int = 150  # cap on each context turn's length (ingest speed: README)


DEFAULT_INDEX = IndexOptions()


def resolve_pronouns(text: str, speaker: str, addressee: str | None) -> str:
    """Replace first-person words with the speaker's name, second-person with the addressee's."""

    def sub(m: re.Match) -> str:
        word = m.group(0).lower().replace("’", "'")
        if word in FIRST_PERSON_SWAPS:
            return FIRST_PERSON_SWAPS[word].format(s=speaker)
        if addressee and word in SECOND_PERSON_SWAPS:
            return SECOND_PERSON_SWAPS[word].format(a=addressee)
        return m.group(0)

    return PRONOUN.sub(sub, text)


def date_words(m: Message) -> str:
    """The session date as words ("8 May 2023, Monday") so "in May 2023" can match."""
    when = m.session_start or m.timestamp
    return f"{when.day} {when:%B %Y, %A}"


def _sentence(m: Message, opts: IndexOptions, limit: int | None = None) -> str:
    addressee = m.addressees[0] if len(m.addressees) == 1 else None
    body = m.indexed_text()
    if limit is not None and len(body) > limit:
        body = body[:limit] + "…"
    if opts.resolve_pronouns:
        body = resolve_pronouns(body, m.speaker, addressee)
    if not opts.speaker_prefix:
        return body
    to = f" to {', '.join(m.addressees)}" if m.addressees else ""
    return f"{m.speaker}{to}: {body}"


def search_text(m: Message, opts: IndexOptions = DEFAULT_INDEX) -> str:
    """Keyword-index text for ``m``."""
    text = _sentence(m, opts)
    if opts.date_words:
        text += f" ({date_words(m)})"
    return text


def embed_text(m: Message, previous: list[Message], opts: IndexOptions = DEFAULT_INDEX) -> str:
    """Vector-index text: the message, preceded by the turns it answers."""
    parts = [
        _sentence(p, opts, opts.context_chars)
        for p in previous[-opts.embed_context :]
        if opts.embed_context
    ]
    parts.append(_sentence(m, opts))
    return "\n".join(parts)


def index_rows(
    messages: list[Message], opts: IndexOptions = DEFAULT_INDEX
) -> list[tuple[str, str]]:
    """(search_text, embed_text) for each message of one conversation, in order."""
    ordered = sorted(messages, key=lambda m: m.seq)
    out: dict[str, tuple[str, str]] = {}
    for i, m in enumerate(ordered):
        prev = [p for p in ordered[max(0, i - opts.embed_context) : i] if p.session == m.session]
        out[m.id] = (search_text(m, opts), embed_text(m, prev, opts))
    return [out[m.id] for m in messages]


def claim_search_text(c: Claim) -> str:
    """Keyword text of a claim: who said it, about whom, what, and when it holds."""
    when = c.valid_from or c.said_at
    about = f" about {c.subject}" if c.subject and c.subject != c.speaker else ""
    return f"{c.speaker}{about}: {c.text} ({when.day} {when:%B %Y})"


def claim_embed_text(c: Claim) -> str:
    """Embedded text of a claim: the attributed sentence."""
    return f"{c.speaker}: {c.text}"


def episode_search_text(e: Episode) -> str:
    """Keyword text of an episode: title, narrative, question/answer pairs and its date."""
    qa = " ".join(f"{q} {a}" for q, a in e.qa)
    return f"{e.title}: {e.narrative} {qa} ({e.start.day} {e.start:%B %Y})".strip()


def episode_embed_text(e: Episode) -> str:
    """Embedded text of an episode: its narrative (the title if there is none)."""
    return e.narrative or e.title


def text_hash(text: str) -> str:
    return content_hash(text)
