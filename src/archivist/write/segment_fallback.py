"""Fixed-size episodes: the fallback when no LLM is configured or boundary detection fails.

Topic boundaries need a model; without one a session is cut where the talk
paused (a gap longer than ``gap``) and otherwise into runs of at most
``max_turns`` turns, balanced so no episode is a lonely one-turn tail. A chunk
never spans two sessions or two conversations, so an episode stays one sitting.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import timedelta

from ..model import Message

LLM_BOUNDARY_MIN_TURNS = 10  # shorter sessions are one or two chunks anyway: not worth a call


def _sessions(messages: Sequence[Message]) -> list[list[Message]]:
    """Messages grouped by (conversation, session), each group in seq order, groups in order."""
    groups: dict[tuple[str, int], list[Message]] = {}
    for m in sorted(messages, key=lambda m: (m.conversation, m.seq)):
        groups.setdefault((m.conversation, m.session), []).append(m)
    return list(groups.values())


def _pauses(session: list[Message], gap: timedelta) -> list[list[Message]]:
    """Cut a session wherever consecutive turns are more than ``gap`` apart."""
    runs: list[list[Message]] = [[session[0]]]
    for prev, m in zip(session, session[1:], strict=False):
        if m.timestamp - prev.timestamp > gap:
            runs.append([])
        runs[-1].append(m)
    return runs


def _balanced(run: list[Message], max_turns: int) -> list[list[Message]]:
    """Split ``run`` into the fewest chunks of at most ``max_turns``, sizes differing by ≤ 1."""
    k = math.ceil(len(run) / max_turns)
    size, extra = divmod(len(run), k)
    chunks, start = [], 0
    for i in range(k):
        end = start + size + (1 if i < extra else 0)
        chunks.append(run[start:end])
        start = end
    return chunks


def segment_fixed(
    messages: list[Message], max_turns: int = 8, gap: timedelta = timedelta(minutes=30)
) -> list[list[Message]]:
    """Episode chunks for ``messages``: split at pauses longer than ``gap`` and at ``max_turns``."""
    if max_turns < 1:
        raise ValueError(f"max_turns must be at least 1, got {max_turns}")
    chunks: list[list[Message]] = []
    for session in _sessions(messages):
        for run in _pauses(session, gap):
            chunks.extend(_balanced(run, max_turns))
    return chunks


def should_use_llm_boundaries(session_messages: Sequence[Message]) -> bool:
    """Whether a session is long enough that asking a model for topic boundaries pays off."""
    return len(session_messages) > LLM_BOUNDARY_MIN_TURNS
