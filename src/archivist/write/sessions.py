"""Sessions for messages that arrive one at a time (proxy, MCP): a long pause starts one.

Loaders get sessions from their files; live chats do not say where a sitting
ends, so a pause longer than SESSION_GAP does. Sessions bound what the
archivist re-reads when a conversation grows, and give episodes their day.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from ..model import Message

SESSION_GAP = timedelta(minutes=30)  # a longer pause than this starts a new session


def next_session(stored: Sequence[Message], at: datetime) -> tuple[int, datetime | None]:
    """The session a message at ``at`` joins and its start: the last one, or a new one
    after a pause longer than SESSION_GAP."""
    if not stored:
        return 1, at
    last = max(stored, key=lambda m: m.seq)
    if at - last.timestamp > SESSION_GAP:
        return last.session + 1, at
    return last.session, last.session_start
