"""A short reply and the question it answers: "Two of them." means nothing without "How
many kids do you have?". The answerer quotes such a reply with its question
(``reply_prompt``) and the context shows it with its question or not at all
(``follows_question``, ``REPLY_WORDS``).
"""

from __future__ import annotations

from datetime import timedelta

from ..lang.evidence import EMPTY_REPLY
from ..lang.text import fold, is_stopword, words
from ..model import Message
from .sentences import split_sentences

REPLY_WORDS = 8  # a reply this short may mean nothing without the question it answers
REPLY_WITHIN = timedelta(hours=12)  # ... when it comes this soon after it


def _says_something(reply: str, before: Message) -> bool:
    """Whether a reply holds a word of its own: not a function word, an interjection or
    a name ("My girlfriend!", "5 years already!"; not "Thanks, Melanie!")."""
    names = {fold(w) for p in (before.speaker, *before.addressees) for w in words(p)}
    return any(
        not is_stopword(w) and fold(w) not in EMPTY_REPLY and fold(w) not in names
        for w in words(reply)
    )


def follows_question(m: Message, before: Message | None) -> bool:
    """Whether ``before``, the message just before ``m``, is someone else's asking
    something in the same sitting: what a short reply may answer ("How many kids?" →
    "Two of them."). A question left months before, or in another session, is not
    what the next message answers."""
    return (
        before is not None
        and before.speaker != m.speaker
        and "?" in before.text
        and before.session == m.session
        and abs(m.timestamp - before.timestamp) <= REPLY_WITHIN
    )


def reply_prompt(m: Message, before: Message | None) -> str:
    """The question ``m`` opens by answering, as "Asker: question?", or "": the message
    just before it, by someone else, asking something, when ``m``'s first sentence is
    short ("My girlfriend!" after "So who's this Marisol you keep posting…?")."""
    if not follows_question(m, before):
        return ""
    first = split_sentences(m.indexed_text())[:1]
    if not first or len(first[0].split()) > REPLY_WORDS or not _says_something(first[0], before):
        return ""
    question = [t for t in split_sentences(before.text) if "?" in t]
    return f"{before.speaker}: {question[-1]}"
