"""Task: one episode → third-person narrative, atomic claims, entities, QA pairs."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

from ..model import Message
from .render import render_messages

NAME = "extract_episode"
VERSION = "4"  # 3: optional read-only context before the episode; 4: each claim's facet

Kind = Literal["fact", "event", "preference", "plan", "question", "theory", "foresight"]
Source = Literal["first_hand", "reported", "assistant_suggested"]
Facet = Literal["value", "goal", "state", "lesson", "habit", "preference", "plan", "event", "none"]


class EntityOut(BaseModel):
    name: str
    kind: Literal["person", "place", "organisation", "object", "project", "event", "other"] = (
        "other"
    )
    aliases: list[str] = Field(default_factory=list)
    role: str = ""
    state: str = ""


class ClaimOut(BaseModel):
    text: str = Field(description="One self-contained statement, names instead of pronouns.")
    speaker: str = Field(description="Who said it: exactly one participant's name.")
    subject: str = Field(description="Whom or what it is about.")
    kind: Kind = "fact"
    facet: Facet = "none"
    source: Source = "first_hand"
    evidence: list[int] = Field(description="Aliases of the messages that support it.")
    importance: int = Field(5, ge=1, le=10)
    salience: int = Field(5, ge=1, le=10, description="Emotional weight.")
    valid_from: str | None = Field(None, description="YYYY-MM-DD when it started to hold.")
    valid_to: str | None = Field(None, description="YYYY-MM-DD when it stops holding.")
    entities: list[EntityOut] = Field(default_factory=list)
    supports: list[int] = Field(
        default_factory=list,
        description="For a theory: the 1-based numbers of the claims it rests on.",
    )


class QAOut(BaseModel):
    question: str
    answer: str


class ExtractOut(BaseModel):
    title: str = ""
    narrative: str = Field(description="Third-person account of the episode, 1-4 sentences.")
    claims: list[ClaimOut] = Field(default_factory=list)
    qa: list[QAOut] = Field(default_factory=list)


SYSTEM = """You are an archivist keeping long-term memory of conversations.
From the episode below, write:
- narrative: a third-person account (1-4 sentences) naming who said what.
- claims: atomic statements worth remembering. For each claim:
  * speaker = the participant who said it (exactly as named); never attribute one
    person's words, experiences or plans to another;
  * subject = whom it is about (the speaker, the other participant, or someone else);
  * source = first_hand (about the speaker's own life), reported (about someone
    else's life, as told by the speaker), assistant_suggested (an assistant's idea);
  * kind = fact | event | preference | plan | question (open question) |
    theory (an interpretation; list the 1-based numbers of the claims it rests
    on, in your claims list, in supports) |
    foresight (a plan or state with an end date, e.g. medication for 10 days);
  * facet = what it tells of the person: value (a belief or principle), goal (an
    objective pursued over time), state (a standing fact: health, home, work,
    a constraint), lesson (an experience and the behaviour it changed), habit,
    preference, plan, event, or none;
  * valid_from / valid_to: absolute dates (YYYY-MM-DD). Resolve relative time
    against the timestamp of the message that says it ("yesterday" in a message
    of 8 May 2023 is 2023-05-07; "next month" is the following month; "for ten
    days" sets valid_to). Leave null when unknown;
  * evidence = the bracketed aliases of the messages that state it;
  * write names, not pronouns; no claim for greetings or small talk;
  * do not invent anything the messages do not say.
- qa: up to 3 question/answer pairs this episode answers (optional).
Reply with JSON only."""


CONTEXT_NOTE = (
    "Earlier in this session, already archived (context only: it has no aliases, "
    "extract nothing from it and never cite it as evidence):"
)


def build(
    messages: Sequence[Message],
    participants: Sequence[str],
    now: datetime,
    context: Sequence[Message] = (),
) -> list[dict]:
    """Chat messages asking for the extraction of one episode.

    ``context``: the messages before the episode (a session that grew), shown
    without aliases so names and references resolve but nothing cites them.
    """
    start = messages[0].session_start or messages[0].timestamp
    earlier = f"{CONTEXT_NOTE}\n{render_messages(context, aliases=False)}\n" if context else ""
    user = (
        f"Current time: {now:%Y-%m-%d %H:%M}. Session started {start:%A %d %B %Y %H:%M}.\n"
        f"Participants: {', '.join(participants)}.\n{earlier}"
        f"Episode ({len(messages)} messages):\n{render_messages(messages)}"
    )
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]
