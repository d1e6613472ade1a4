"""Task: split a session into episodes at topic boundaries."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from pydantic import BaseModel, Field

from ..model import Message
from .render import render_messages

NAME = "segment_session"
VERSION = "1"


class SegmentOut(BaseModel):
    """Aliases of the messages that start a new episode (the first message always does)."""

    boundaries: list[int] = Field(
        description="Aliases of messages that begin a new topic, in increasing order."
    )


SYSTEM = """You split a chat session into episodes for a memory system.
An episode is a stretch of conversation about one topic or activity.
Start a new episode when the topic shifts, the intent changes (e.g. from
catching up to making a plan), or after a long time gap.
Greetings and farewells are not topics: attach them to the neighbouring episode.
Prefer episodes of 4 to 20 messages. Reply with JSON only."""


def build(messages: Sequence[Message], now: datetime) -> list[dict]:
    """Chat messages asking for episode boundaries in ``messages``."""
    user = (
        f"Current time: {now:%Y-%m-%d %H:%M}.\n"
        f"Session of {len(messages)} messages:\n{render_messages(messages)}\n\n"
        'Return {"boundaries": [aliases of messages that start a new episode]}.'
    )
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]
