"""Task: one step of the identity agent: call a tool, or decide MERGE / SEPARATE.

Two people met in different conversations share a name. The agent sees a short
description of both sides and the output of every tool it has called so far,
and answers with the next tool call or a decision citing the claim aliases
([a3], [b7]) that the tools showed it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field, model_validator

NAME = "identity_decision"
VERSION = "1"

TOOLS: tuple[str, ...] = ("timeline", "compare", "contradictions", "context")
Tool = Literal["timeline", "compare", "contradictions", "context"]


class IdentityStep(BaseModel):
    action: Literal["tool", "decide"]
    tool: Tool | None = Field(None, description="With action=tool: the tool to call.")
    side: Literal["a", "b"] | None = Field(
        None, description="For timeline/context: which side (null = both)."
    )
    verdict: Literal["MERGE", "SEPARATE"] | None = Field(
        None, description="With action=decide: MERGE (one person) or SEPARATE (two)."
    )
    reasons: str = Field("", description="With action=decide: why, in 1-3 sentences.")
    evidence: list[str] = Field(
        default_factory=list, description="With action=decide: claim aliases such as a3, b7."
    )

    @model_validator(mode="after")
    def _complete(self) -> IdentityStep:
        """A tool call names its tool; a decision carries its verdict and reasons."""
        if self.action == "tool" and self.tool is None:
            raise ValueError("action 'tool' needs tool: one of " + ", ".join(TOOLS))
        if self.action == "decide" and (self.verdict is None or not self.reasons.strip()):
            raise ValueError("action 'decide' needs verdict (MERGE or SEPARATE) and reasons")
        return self


@dataclass(frozen=True)
class SideInfo:
    """What the agent is told up front about one side of a candidate pair."""

    label: str  # "a" or "b"
    name: str
    identities: tuple[tuple[str, str], ...]  # (conversation, name as spoken there)
    partners: tuple[str, ...]  # the other participants of those conversations
    claims: int
    messages: int
    declared: bool = False


@dataclass(frozen=True)
class ToolResult:
    """One tool call the agent made and what the tool returned."""

    tool: str
    side: str | None
    output: str


SYSTEM = """You decide whether two people who share a name are the same person.
They were met in different conversations. The same name is NOT evidence of the
same person: many people share a first name. Decide MERGE only when the tools
show a consistent life (the same job, family members, places, pets or events)
and nothing that contradicts it; decide SEPARATE when they contradict each other
(different jobs, homes or family at the same time) or when nothing ties them
together.

Tools (call one per step):
- timeline(side): that person's claims in time order, each with an alias like [a3].
- compare(): their attributes side by side, and what they share.
- contradictions(): pairs of claims, one per side, that cannot both be true of one person.
- context(side): the conversation's participants, dates and the person's first messages.

Answer with JSON only, either
{"action": "tool", "tool": "<tool>", "side": "a" | "b" | null}
or
{"action": "decide", "verdict": "MERGE" | "SEPARATE", "reasons": "...",
 "evidence": ["a3", "b7"]}
citing in evidence only aliases the tools showed you."""


def _describe(side: SideInfo) -> str:
    where = "; ".join(f"{name!r} in conversation {conv!r}" for conv, name in side.identities)
    with_ = ", ".join(side.partners) or "nobody else"
    declared = " Declared by the caller as a known user." if side.declared else ""
    return (
        f"Side {side.label}: {side.name} — {where}; talking with {with_}; "
        f"{side.messages} messages, {side.claims} claims.{declared}"
    )


def build(
    a: SideInfo,
    b: SideInfo,
    transcript: Sequence[ToolResult],
    now: datetime,
    steps_left: int,
) -> list[dict]:
    """Chat messages asking for the agent's next step on the pair (a, b)."""
    parts = [
        f"Current time: {now:%Y-%m-%d %H:%M}.",
        "Candidate pair:",
        _describe(a),
        _describe(b),
        "",
    ]
    if transcript:
        parts.append("Tool results so far:")
        for n, r in enumerate(transcript, start=1):
            args = r.side or ""
            parts.append(f"--- step {n}: {r.tool}({args}) ---\n{r.output}")
    else:
        parts.append("No tools called yet.")
    last = "This is your last step: decide now." if steps_left <= 1 else ""
    parts.append(f"\nSteps left: {steps_left}. {last}".rstrip())
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "\n".join(parts)}]
