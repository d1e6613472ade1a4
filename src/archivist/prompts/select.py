"""Task: which of these messages match the caller's plain-language criteria?"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, Field

from ..model import Message
from .render import render_messages

NAME = "select_messages"
VERSION = "1"


class SelectOut(BaseModel):
    matches: list[int] = Field(description="Bracketed aliases of the messages that match.")


SYSTEM = """You curate what an assistant should remember.
The caller states in plain language what the memory should hold. Given the
numbered messages below, list the bracketed aliases of the messages whose
content matches those criteria (a message that only mentions the topic in
passing does not). List none if nothing matches. Reply with JSON only:
{"matches": [aliases]}."""


def build(criteria: str, messages: Sequence[Message]) -> list[dict]:
    """Chat messages asking which of ``messages`` (shown under aliases 1..n) match ``criteria``."""
    user = (
        f"Keep messages about: {criteria.strip()}\n"
        f"Messages ({len(messages)}):\n{render_messages(messages)}"
    )
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]
