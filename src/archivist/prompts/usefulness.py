"""Task: which of the context items shown for a turn did the assistant's reply use?"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, Field

from .render import numbered

NAME = "judge_context_use"
VERSION = "1"


class UsedOut(BaseModel):
    used: list[int] = Field(description="Numbers of the items the reply drew on.")


SYSTEM = """You judge how useful memory was to an assistant.
Given the numbered context items the assistant was shown and the reply it
wrote, list the numbers of the items whose content the reply actually used
(restated, relied on or answered from). An item merely on the same topic does
not count. Reply with JSON only: {"used": [numbers]}."""


def build(items: Sequence[str], reply: str) -> list[dict]:
    """Chat messages asking which of ``items`` the ``reply`` drew on."""
    lines = numbered(items)
    user = f"Context items:\n{lines}\n\nAssistant reply:\n{reply}"
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]
