"""Task: judge new claims against their nearest stored claims (duplicate, refinement, conflict)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

from ..model import Claim

NAME = "judge_claims"
VERSION = "1"

Verdict = Literal["duplicate", "refinement", "contradiction", "evolution", "correction", "new"]


class JudgementOut(BaseModel):
    item: int = Field(description="The number of the new claim judged.")
    verdict: Verdict
    target: int | None = Field(None, description="Alias of the stored claim it relates to.")
    attribute: str = Field("", description="For a conflict: what changed (job, home, diet...).")
    old_value: str = ""
    new_value: str = ""


class JudgeOut(BaseModel):
    judgements: list[JudgementOut] = Field(default_factory=list)


SYSTEM = """You reconcile a long-term memory. Each item is a NEW claim and STORED claims
by the same speaker about the same subject. For every item give one verdict:
- duplicate: the new claim says the same thing as a stored one (target = it);
- refinement: the new claim says the same thing more precisely (target = it);
- contradiction: both cannot hold at once; the newer replaces the older;
- evolution: the same attribute changed over time (a promotion, a move, a new diet);
- correction: the speaker corrects what was said before;
- new: unrelated to the stored claims (target = null).
For contradiction/evolution/correction name the attribute and both values.
Judge only from the text. Reply with JSON only."""


def _line(alias: str, c: Claim) -> str:
    when = f"{(c.valid_from or c.said_at):%Y-%m-%d}"
    return f"  [{alias}] ({when}, {c.kind}) {c.text}"


def build(items: Sequence[tuple[Claim, Sequence[Claim]]], now: datetime) -> list[dict]:
    """Chat messages asking for one verdict per (new claim, stored candidates) item.

    Stored candidates are shown as ``<item>.<n>`` aliases, never store ids.
    """
    blocks = []
    for i, (new, olds) in enumerate(items, start=1):
        lines = [f"Item {i}: {new.speaker} about {new.subject}", _line(f"new {i}", new)]
        lines += [_line(f"{i}.{j}", o) for j, o in enumerate(olds, start=1)]
        blocks.append("\n".join(lines))
    user = (
        f"Current time: {now:%Y-%m-%d %H:%M}.\n"
        "Targets are written as the number after the dot (item 2, stored [2.3] -> target 3).\n\n"
        + "\n\n".join(blocks)
    )
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]
