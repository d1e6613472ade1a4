"""Task: decide whether ambiguous entity mentions of one speaker name the same thing."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from pydantic import BaseModel, Field

NAME = "same_entity"
VERSION = "1"


class PairOut(BaseModel):
    pair: int = Field(description="The number of the pair judged.")
    same: bool


class SameEntityOut(BaseModel):
    pairs: list[PairOut] = Field(default_factory=list)


SYSTEM = """Each pair below is two names one speaker used in a conversation, each with
how it was described. Say whether both refer to the same real-world entity. Similar
is not the same: two different friends, two different cities, two different pets are
different. Reply with JSON only."""


def build(pairs: Sequence[tuple[str, str, str]], now: datetime) -> list[dict]:
    """Chat messages for (owner, description A, description B) pairs."""
    lines = [
        f"Pair {i} (said by {owner}):\n  A: {a}\n  B: {b}"
        for i, (owner, a, b) in enumerate(pairs, start=1)
    ]
    user = f"Current time: {now:%Y-%m-%d %H:%M}.\n\n" + "\n\n".join(lines)
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]
