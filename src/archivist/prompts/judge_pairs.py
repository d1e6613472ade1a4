"""Task: judge for the judge seam (relation: does newer end older; support: does a
sentence settle a question; kind: what kind of memory a sentence is; when: does a time named
without its direction lie ahead or behind; serves: does something a person did or does move
them toward a goal of theirs). A short reason comes before each verdict in the schema."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, Field

NAME = "judge_pairs"
VERSION = "3"


class RelationOut(BaseModel):
    item: int = Field(description="The number of the pair judged.")
    reason: str = Field(description="One short sentence: what the newer statement does.")
    verdict: Literal["ends", "continues", "unrelated"]
    confidence: float = Field(0.8, ge=0.0, le=1.0)


class SupportOut(BaseModel):
    item: int = Field(description="The number of the pair judged.")
    reason: str = Field(description="One short sentence: what the sentence says of the question.")
    verdict: Literal["yes", "no", "answers", "neither"]
    confidence: float = Field(0.8, ge=0.0, le=1.0)


class KindOut(BaseModel):
    item: int = Field(description="The number of the sentence judged.")
    reason: str = Field(description="One short sentence: what memory, if any, it gives.")
    verdict: Literal[
        "state", "preference", "habit", "goal", "value", "lesson", "plan", "event", "chit-chat"
    ]
    confidence: float = Field(0.8, ge=0.0, le=1.0)


class WhenOut(BaseModel):
    item: int = Field(description="The number of the sentence judged.")
    reason: str = Field(description="One short sentence: when the named time is.")
    verdict: Literal["ahead", "behind"]
    confidence: float = Field(0.8, ge=0.0, le=1.0)


class ServeOut(BaseModel):
    item: int = Field(description="The number of the pair judged.")
    reason: str = Field(description="One short sentence: what the item does for the goal.")
    verdict: Literal["serves", "hinders", "unrelated"]
    confidence: float = Field(0.8, ge=0.0, le=1.0)


class ServesOut(BaseModel):
    judgements: list[ServeOut] = Field(default_factory=list)


class WhensOut(BaseModel):
    judgements: list[WhenOut] = Field(default_factory=list)


class KindsOut(BaseModel):
    judgements: list[KindOut] = Field(default_factory=list)


class RelationsOut(BaseModel):
    judgements: list[RelationOut] = Field(default_factory=list)


class SupportsOut(BaseModel):
    judgements: list[SupportOut] = Field(default_factory=list)


RELATION_SYSTEM = """You keep a person's long-term memory. Each item is an OLDER and a NEWER
statement by the same speaker. Decide what the newer one does to the state the older one
describes:
- ends: the older state no longer holds (replaced, ended, reversed, or over by implication:
  a broken leg ends cycling to work, a new job ends the old one);
- continues: the older state still holds (progress, restated, an addition to it, a
  temporary pause, or a word that only looks like an ending: "finished my shift");
- unrelated: the newer statement says nothing about it (another topic, or another
  person's state: "my sister went vegan").
Give a one-sentence reason first, then the verdict and your confidence. JSON only."""

SUPPORT_SYSTEM = """You answer from a person's long-term memory. Each item is a QUESTION about
a named person and one SENTENCE someone said (the speaker is named). Decide:
- yes / no: the sentence settles the yes/no question, also by implication ("Dry January,
  not a drop till Feb" answers "Is Gil drinking?" with no);
- answers: the sentence answers the wh-question (what, where, who, when, how...);
- neither: it does not settle it (off topic, only a wish or plan, or the speaker talks
  about themselves when the question is about someone else).
Give a one-sentence reason first, then the verdict and your confidence. JSON only."""


KIND_SYSTEM = """You keep people's long-term memory. Each item is one sentence someone said in
a chat (or the assistant said). Decide what kind of memory it is:
- state: a standing fact or circumstance (job, home, family, pets, health, diet, belongings,
  constraints), or news that changes one ("started at the council monday", "we broke up");
- preference: a like, dislike or taste; habit: a routine or recurring behaviour;
- goal: an objective pursued over time; value: a belief or principle;
- lesson: a past experience and the behaviour it changed;
- plan: a specific intended future action or event; event: something that happened once;
- chit-chat: nothing to remember: greetings, thanks, reactions, encouragement, sympathy,
  questions to the other, an assistant's filler, advice or general knowledge.
A sentence about another person is judged the same way ("my sister went vegan": state).
Give a one-sentence reason first, then the verdict and your confidence. JSON only."""


WHEN_SYSTEM = """You place the dates people mention on a calendar. Each item is one sentence
someone said on a given day and a TIME it names without saying which one ("in May", "monday",
"at Christmas", "on the 14th"). Decide from the meaning whether that time lies:
- ahead: after the day it was said (not happened yet: "signed up for the 10k in May",
  "the wedding's in June", "can't make saturday");
- behind: before the day it was said (already happened or began: "went in May", "since
  March", "how was saturday?").
Give a one-sentence reason first, then the verdict and your confidence. JSON only."""


SERVES_SYSTEM = """You keep a person's long-term memory. Each item is a GOAL of a person and
another ITEM memory holds of the same person (something they did, do, have, bought, decided
or plan). Decide what the item does for the goal:
- serves: it moves them toward the goal, directly or by clear implication ("picked up
  weekend shifts" serves "pay off my credit card"; "signed up for couch to 5k" serves "run a
  half marathon");
- hinders: it works against the goal ("booked a last-minute trip to Ibiza" hinders "save
  for a deposit");
- unrelated: neither, also when it only shares the goal's topic: a feeling or opinion about
  it, a question, the goal wished again, news, or someone else's action ("my sister bought a
  flat").
Give a one-sentence reason first, then the verdict and your confidence. JSON only."""


def _numbered(system: str, items: Sequence[str]) -> list[dict]:
    """The system message and one user message of ``items`` as "Item 1: …", "Item 2: …"."""
    blocks = [f"Item {i}: {item}" for i, item in enumerate(items, start=1)]
    return [
        {"role": "system", "content": system},
        {"role": "user", "content": "\n\n".join(blocks)},
    ]


def build_whens(rows: Sequence[tuple[str, str, str, str]]) -> list[dict]:
    """Messages for (speaker, sentence, time, date) rows, numbered from 1."""
    return _numbered(
        WHEN_SYSTEM,
        [f"{who} said ({when}): {sentence}\n  TIME: {time}" for who, sentence, time, when in rows],
    )


def build_kinds(rows: Sequence[tuple[str, str, str]]) -> list[dict]:
    """Messages for (speaker, sentence, date) rows, numbered from 1."""
    return _numbered(
        KIND_SYSTEM, [f"{who} said ({when}): {sentence}" for who, sentence, when in rows]
    )


def build_relations(pairs: Sequence[tuple[str, str, str, str, str]]) -> list[dict]:
    """Messages for (speaker, older, older date, newer, newer date) pairs, numbered from 1."""
    return _numbered(
        RELATION_SYSTEM,
        [
            f"speaker {who}\n  OLDER ({was}): {older}\n  NEWER ({now}): {newer}"
            for who, older, was, newer, now in pairs
        ],
    )


def build_supports(pairs: Sequence[tuple[str, str, str, str]]) -> list[dict]:
    """Messages for (question, speaker, sentence, date) pairs, numbered from 1."""
    return _numbered(
        SUPPORT_SYSTEM,
        [
            f"QUESTION: {question}\n  {who} said ({when}): {sentence}"
            for question, who, sentence, when in pairs
        ],
    )


def build_serves(rows: Sequence[tuple[str, str, str]]) -> list[dict]:
    """Messages for (speaker, goal, item) rows, numbered from 1."""
    return _numbered(
        SERVES_SYSTEM,
        [f"person {who}\n  GOAL: {goal}\n  ITEM: {item}" for who, goal, item in rows],
    )
