"""Task: an entity's dossier, a capped summary of its current claims."""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, Field

from ..model import Claim
from .summary import render_claims

NAME = "entity_dossier"
VERSION = "1"


class DossierOut(BaseModel):
    dossier: str = Field(description="What is currently known about the entity.")


SYSTEM = """You keep dossiers in a long-term memory system.
Summarise what is currently known about the entity from the claims below
(each says who said it). Lead with what matters most; keep who said what when
it matters; keep dates. Use only what the claims say; invent nothing.
Stay within the character limit. Reply with JSON only: {"dossier": "..."}."""


def build(name: str, claims: Sequence[Claim], cap: int) -> list[dict]:
    """Chat messages asking for the dossier of entity ``name``."""
    user = (
        f"Entity: {name}\nCurrent claims, oldest first:\n{render_claims(claims)}\n\n"
        f"Write the dossier in at most {cap} characters."
    )
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]
