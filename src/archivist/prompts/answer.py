"""Task: answer a question from numbered evidence snippets, citing them, or abstain."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from pydantic import BaseModel, Field

NAME = "answer_question"
VERSION = "2"


@dataclass(frozen=True)
class Snippet:
    """One piece of evidence as the model sees it: a message and the claims drawn from it."""

    speaker: str
    said_at: datetime
    text: str
    # (claim text, valid_from, when it stopped holding as of the current time or None)
    claims: tuple[tuple[str, datetime | None, datetime | None], ...] = ()
    ended: datetime | None = None  # what the message states no longer holds, since then


class AnswerOut(BaseModel):
    answer: str = Field(description="A short answer (a few words), or '' when abstaining.")
    evidence: list[int] = Field(
        default_factory=list, description="Numbers of the snippets that support the answer."
    )
    abstain: bool = Field(False, description="True when the snippets do not support an answer.")
    speaker: str | None = Field(
        None, description="Whose statement, experience or action the answer is about."
    )


SYSTEM = """You answer questions about past conversations from numbered memory snippets.
Rules:
- Use only the snippets. Answer in as few words as possible (a name, a date, a short phrase);
  no full sentences, no explanations.
- Cite the numbers of the snippets that support the answer in evidence.
- Check who did or said what: if the question attributes to one person something the snippets
  attribute to someone else, set abstain to true and name the real person in speaker.
- If the snippets do not contain the answer, set abstain to true and answer "".
- A snippet or claim marked [history] no longer holds at the current time: a newer one
  replaced it or its window passed. Answer a question about now from what still holds
  (never from history); use history only for questions about the past or what came before.
- Time: answer with when something happened, not when it was mentioned. Resolve relative
  dates ("yesterday", "last week", "next month") against the date of the snippet that says
  them, and write dates like "7 May 2023", months like "May 2023", years like "2022".
Reply with JSON only."""


def _history(ended: datetime | None) -> str:
    return f" [history: no longer holds from {ended:%d %B %Y}]" if ended else ""


def _render(snippets: Sequence[Snippet]) -> str:
    lines = []
    for i, s in enumerate(snippets, start=1):
        lines.append(f"[{i}] ({s.said_at:%d %B %Y}) {s.speaker}: {s.text}{_history(s.ended)}")
        for text, valid_from, ended in s.claims:
            when = f" (happened {valid_from:%d %B %Y})" if valid_from else ""
            lines.append(f"    claim: {text}{when}{'' if s.ended else _history(ended)}")
    return "\n".join(lines)


def build(question: str, snippets: Sequence[Snippet], now: datetime) -> list[dict]:
    """Chat messages asking for an answer to ``question`` from ``snippets`` (aliases 1..n)."""
    user = (
        f"Current time: {now:%Y-%m-%d %H:%M}.\n"
        f"Memory snippets ({len(snippets)}):\n{_render(snippets) or '(none)'}\n\n"
        f"Question: {question}"
    )
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]
