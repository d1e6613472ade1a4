"""Task: do the retrieved messages answer the question? If not, up to 3 better search queries.

One call does both the sufficiency check and the rewriting, so a question the
first retrieval already covers costs one short call and no second search.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from pydantic import BaseModel, Field

from .render import numbered

NAME = "rewrite_query"
VERSION = "1"
MAX_QUERIES = 3


class RewriteOut(BaseModel):
    sufficient: bool = Field(description="True if the numbered messages answer the question.")
    queries: list[str] = Field(
        default_factory=list,
        max_length=MAX_QUERIES,
        description="Up to 3 search queries that would find what is missing; [] if sufficient.",
    )


SYSTEM = """You help a memory search over past conversations.
Given a question and the numbered messages the search found, decide whether
the messages contain what is needed to answer it. If they do, reply
{"sufficient": true, "queries": []}. If not, write up to 3 short search
queries that would find the missing messages: use other words for the same
thing, name the people and things involved, split a question that asks about
several things, and turn relative times into dates using today's date.
Reply with JSON only: {"sufficient": bool, "queries": [strings]}."""


def build(question: str, found: Sequence[str], today: datetime) -> list[dict]:
    """Chat messages asking whether ``found`` answers ``question``, and for rewrites if not."""
    lines = numbered(found) or "(none)"
    user = (
        f"Current time: {today:%Y-%m-%d %H:%M}.\nQuestion: {question}\n\nMessages found:\n{lines}"
    )
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]
