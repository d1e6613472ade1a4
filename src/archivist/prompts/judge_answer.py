"""Task: judge a generated answer against the gold answer (the LoCoMo "J" score)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

NAME = "judge_answer"
VERSION = "1"


class JudgeOut(BaseModel):
    reasoning: str = Field("", description="One short sentence.")
    label: Literal["CORRECT", "WRONG"]


SYSTEM = """You grade answers to questions about past conversations.
You get a question, a gold answer and a generated answer. Label the generated answer CORRECT
when it refers to the same thing as the gold answer, even if it is longer, worded differently
or less precise; WRONG when it misses or contradicts the gold answer, or gives no answer.
For times and dates: CORRECT when it names the same date or period, whatever the format
("7 May 2023" and "May 7, 2023" match; "the week before 9 June 2023" matches a date in that
week).
Reply with JSON only: {"reasoning": "...", "label": "CORRECT" | "WRONG"}."""


def build(question: str, gold: str, generated: str) -> list[dict]:
    """Chat messages asking for a CORRECT/WRONG verdict (a fixed prompt, so J is comparable)."""
    user = f"Question: {question}\nGold answer: {gold}\nGenerated answer: {generated or '(none)'}"
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]
