"""Task: a message summary of one session (level 1) or of a run of summaries (level 2+)."""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, Field

from ..model import Claim, Episode, Summary
from .render import numbered

NAME = "summarise_messages"
VERSION = "1"


class SummaryOut(BaseModel):
    summary: str = Field(description="The summary, third person, names instead of pronouns.")


SYSTEM = """You condense conversation memory for a long-term memory system.
Write a third-person summary of what happened and what was said, naming who
said or did what (never attribute one person's words, experiences or plans to
another). Keep dates where they matter. Prefer what will still matter later:
decisions, plans, changes in someone's life, preferences, feelings about them.
Use only what the input says; invent nothing. Stay within the character limit.
Reply with JSON only: {"summary": "..."}."""


def render_claims(claims: Sequence[Claim]) -> str:
    """One line per claim: ``[n] (date) Speaker about Subject: text``."""
    lines = []
    for c in claims:
        about = f" about {c.subject}" if c.subject and c.subject != c.speaker else ""
        lines.append(f"({c.said_at:%d %b %Y}) {c.speaker}{about}: {c.text}")
    return numbered(lines)


def build_session(
    conversation: str,
    session: int,
    episodes: Sequence[Episode],
    claims: Sequence[Claim],
    cap: int,
) -> list[dict]:
    """Chat messages asking for a level-1 summary of one session."""
    start = episodes[0].start if episodes else claims[0].said_at
    narratives = "\n".join(f"- {e.narrative or e.title}" for e in episodes)
    user = (
        f"Conversation {conversation}, session {session} ({start:%A %d %B %Y}).\n"
        f"Episodes:\n{narratives or '(none)'}\n"
        f"Claims:\n{render_claims(claims) or '(none)'}\n\n"
        f"Summarise this session in at most {cap} characters."
    )
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]


def build_rollup(conversation: str, level: int, parts: Sequence[Summary], cap: int) -> list[dict]:
    """Chat messages asking for a level-``level`` summary of consecutive summaries."""
    lines = numbered(f"({s.start:%d %b %Y} – {s.end:%d %b %Y}) {s.text}" for s in parts)
    user = (
        f"Conversation {conversation}: {len(parts)} consecutive summaries, oldest first.\n"
        f"{lines}\n\n"
        f"Merge them into one summary of the whole period in at most {cap} characters; "
        "older detail may be compressed more."
    )
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]
