"""Task: a person's key info, the capped summary of what holds for them now (their profile)."""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, Field

from ..model import Claim
from .summary import render_claims

NAME = "person_key_info"
VERSION = "2"


class KeyInfoOut(BaseModel):
    key_info: str = Field(description="The most important facts about the person.")


SYSTEM = """You keep the key facts about each person in a long-term memory system.
From the statements below (what holds for the person now: their own words and
what others reported about them), write the few things an assistant talking
with them should always know: who they are, what they do, what they like and
dislike, their current plans and circumstances. Prefer lasting and recent
facts over passing ones. Give dates as dates ("since 2024-05"), never
"today" or "this week", and name who reported a fact when it was not the
person. Use only what the statements say; invent nothing. Stay within the
character limit. Reply with JSON only: {"key_info": "..."}."""


def build(name: str, claims: Sequence[Claim], cap: int) -> list[dict]:
    """Chat messages asking for the key info of person ``name``."""
    user = (
        f"Person: {name}\nWhat holds for them now, oldest first:\n"
        f"{render_claims(claims)}\n\nWrite their key info in at most {cap} characters."
    )
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]
