"""Archivists: turn one session's messages into episodes and speaker-attributed claims.

Two implementations behind one small interface: ``HeuristicArchivist`` (no
model, the default) and ``LLMArchivist`` (any ChatModel). Both hand back plain
data; validation is shared and strict — a claim whose speaker is not a
participant or whose evidence is not a message of its episode is rejected and
counted, never stored unattributed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol

from ..judge import Judge
from ..lang.text import person_key
from ..model import CLAIM_KINDS, CLAIM_SOURCES, Claim, Episode, Message


@dataclass
class SessionResult:
    """What an archivist made of one session."""

    episodes: list[Episode] = field(default_factory=list)
    claims: list[tuple[int, Claim]] = field(default_factory=list)  # (episode index, claim)
    rejected: int = 0
    method: str = "heuristic"
    fallbacks: int = 0  # episodes that fell back to the heuristic after an LLM failure
    notes: list[str] = field(default_factory=list)


class Archivist(Protocol):
    """Reads a session and returns episodes and claims; never touches the store.

    ``context``: the messages just before ``messages`` (a session read before,
    now grown), shown so references resolve; nothing is extracted from them and
    no claim may cite them (validation keeps evidence inside ``messages``).
    """

    name: str

    def process_session(
        self,
        messages: Sequence[Message],
        participants: Sequence[str],
        context: Sequence[Message] = (),
        kin: Mapping[tuple[str, str], str] | None = None,
    ) -> SessionResult: ...


def canonical_speaker(name: str, participants: Iterable[str]) -> str | None:
    """The participant ``name`` refers to (case- and space-insensitive), or None."""
    key = person_key(name)
    for p in participants:
        if person_key(p) == key:
            return p
    return None


def validate_claim(
    claim: Claim, authors: Mapping[str, str], participants: Sequence[str]
) -> Claim | None:
    """The claim with speaker normalised and evidence checked, or None to reject it.

    ``authors`` maps the episode's message ids to who wrote them. The speaker
    must be a participant who wrote at least one evidence message: a claim is
    the words of whoever said it (reported and assistant claims included), so
    a model pinning Lee's words on Ana is rejected, not stored.
    """
    speaker = canonical_speaker(claim.speaker, participants) if claim.speaker else None
    evidence = tuple(dict.fromkeys(e for e in claim.evidence if e in authors))
    if speaker is None or not evidence or not claim.text.strip():
        return None
    if all(canonical_speaker(authors[e], [speaker]) is None for e in evidence):
        return None
    subject = canonical_speaker(claim.subject, participants) or claim.subject or speaker
    return replace(
        claim,
        speaker=speaker,
        subject=subject,
        evidence=evidence,
        kind=claim.kind if claim.kind in CLAIM_KINDS else "fact",
        source=claim.source if claim.source in CLAIM_SOURCES else "first_hand",
        importance=min(10, max(1, int(claim.importance))),
        salience=min(10, max(1, int(claim.salience))),
    )


def attach_claims(
    episodes: Sequence[Episode],
    claims: Iterable[Claim],
    participants: Sequence[str],
    result: SessionResult,
    authors: Mapping[str, str],
) -> None:
    """Validate claims and file each under the episode holding its first evidence message.

    ``evidence_claims`` of the input are indexes into ``claims``; they are
    rewritten to indexes into ``result.claims``, dropping rejected ones.
    """
    home = {mid: i for i, e in enumerate(episodes) for mid in e.message_ids}
    kept: dict[int, int] = {}
    start = len(result.claims)
    for j, c in enumerate(claims):
        ok = validate_claim(c, {m: a for m, a in authors.items() if m in home}, participants)
        if ok is None:
            result.rejected += 1
            continue
        kept[j] = len(result.claims)
        result.claims.append((home[ok.evidence[0]], ok))
    for pos in range(start, len(result.claims)):
        ep, c = result.claims[pos]
        if c.evidence_claims:
            links = tuple(kept[j] for j in c.evidence_claims if j in kept and kept[j] != pos)
            result.claims[pos] = (ep, replace(c, evidence_claims=links))


class HeuristicArchivist:
    """No-LLM archivist: fixed-size episodes, sentence claims, resolved pronouns and dates."""

    name = "heuristic"

    def __init__(self, max_turns: int = 8, judge: Judge | None = None) -> None:
        self.max_turns = max_turns
        self.judge = judge  # what kind of memory each sentence is (None: the old rules)

    def process_session(
        self,
        messages: Sequence[Message],
        participants: Sequence[str],
        context: Sequence[Message] = (),
        kin: Mapping[tuple[str, str], str] | None = None,
    ) -> SessionResult:
        """Episodes and claims of ``messages``. Each sentence's pronouns resolve from its
        own message's speaker and addressees; ``kin`` names the speakers' relatives
        ("Mum" is Halina); ``context`` (the turns before) is what an assistant may echo."""
        from .heuristic import heuristic_claims, heuristic_episode
        from .segment_fallback import segment_fixed

        result = SessionResult(method=self.name)
        chunks = segment_fixed(list(messages), max_turns=self.max_turns)
        result.episodes = [heuristic_episode(chunk) for chunk in chunks if chunk]
        attach_claims(
            result.episodes,
            heuristic_claims(list(messages), participants, kin, context, self.judge),
            participants,
            result,
            {m.id: m.speaker for m in messages},
        )
        return result
