"""Task: answer one question in a few words from notes, as an assistant that only reads.

The state benchmark's reader (bench/state.py): the same model answers from
archivist's context and from the plain dated history, so the two are compared
on what a real assistant makes of them, not on retrieval hits.
"""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field

NAME = "read_notes"
VERSION = "1"
NOT_SAID = "not mentioned"


class ReadOut(BaseModel):
    answer: str = Field(description=f"A short answer (a few words), or '{NOT_SAID}'.")


SYSTEM = f"""You are an assistant answering a question about people from your notes.
Rules:
- Use only the notes. Answer in as few words as possible (a name, a place, a date,
  yes or no, a short phrase); no explanations.
- Answer about the time of the question: when notes disagree, the newer one holds
  unless it says otherwise. A note marked [history] no longer holds.
- If the notes do not say, answer "{NOT_SAID}".
Reply with JSON only: {{"answer": "..."}}"""


def build(notes: str, question: str, now: datetime | None) -> list[dict]:
    """The chat messages: the rules, then the notes, the time and the question."""
    when = f"Now: {now.day} {now:%B %Y}.\n" if now is not None else ""
    user = f"Notes:\n{notes.strip() or '(none)'}\n\n{when}Question: {question}"
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]
