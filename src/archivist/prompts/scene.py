"""Task: a title and summary for a scene (a theme across episodes of a conversation)."""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, Field

from ..model import Episode
from .render import numbered

NAME = "summarise_scene"
VERSION = "1"


class SceneOut(BaseModel):
    title: str = Field(description="A short title for the theme, at most 8 words.")
    summary: str = Field(description="What the episodes of this theme say, third person.")


SYSTEM = """You name and summarise a theme in a long-term memory system.
The episodes below are parts of one conversation about a common theme.
Give the theme a short title (at most 8 words) and summarise what the episodes
say about it, naming who said or did what and keeping dates where they matter.
Use only what the episodes say; invent nothing. Stay within the character limit.
Reply with JSON only: {"title": "...", "summary": "..."}."""


def build(episodes: Sequence[Episode], cap: int) -> list[dict]:
    """Chat messages asking for a scene's title and summary from its member episodes."""
    lines = numbered(
        f"({e.start:%d %b %Y}) {e.title + ': ' if e.title else ''}{e.narrative}" for e in episodes
    )
    user = (
        f"{len(episodes)} episodes, oldest first:\n{lines}\n\n"
        f"Title this theme and summarise it in at most {cap} characters."
    )
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]
