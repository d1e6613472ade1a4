"""The LLM archivist: boundary detection, then one extraction call per episode.

Failures are normal weather: a session whose boundaries cannot be had falls
back to fixed-size episodes; an episode whose extraction fails (bad JSON after
retries, timeout, refusal) falls back to the heuristic archivist for that
episode and is counted. The message log is never touched here.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from datetime import datetime, time

from ..llm.accounting import Accounting
from ..llm.base import ChatModel, LLMError
from ..llm.cache import ResponseCache
from ..llm.structured import call_structured, run_parallel
from ..model import Claim, EntityMention, Episode, Message
from ..prompts import extract as extract_prompt
from ..prompts import segment as segment_prompt
from .archivist import SessionResult, attach_claims
from .heuristic import heuristic_claims, heuristic_episode
from .segment_fallback import segment_fixed, should_use_llm_boundaries


def chunks_from_boundaries(
    messages: Sequence[Message], boundaries: Sequence[int], min_turns: int, max_turns: int
) -> list[list[Message]]:
    """Episodes from 1-based boundary aliases: bad ones dropped, tiny merged, long split."""
    n = len(messages)
    starts = sorted({b for b in boundaries if isinstance(b, int) and 1 < b <= n} | {1})
    chunks = [
        list(messages[a - 1 : b - 1]) for a, b in zip(starts, [*starts[1:], n + 1], strict=True)
    ]
    merged: list[list[Message]] = []
    for c in chunks:
        if merged and len(c) < min_turns:
            merged[-1].extend(c)
        else:
            merged.append(c)
    if len(merged) > 1 and len(merged[0]) < min_turns:
        merged[1] = merged[0] + merged[1]
        merged.pop(0)
    out: list[list[Message]] = []
    for c in merged:
        out.extend(segment_fixed(c, max_turns=max_turns) if len(c) > max_turns else [c])
    return out


def _date(value: str | None, like: datetime) -> datetime | None:
    """A YYYY-MM-DD string as midnight in the message's timezone; None if unusable."""
    if not value:
        return None
    try:
        day = datetime.strptime(value.strip()[:10], "%Y-%m-%d").date()
    except ValueError:
        return None
    return datetime.combine(day, time(0), tzinfo=like.tzinfo)


def claims_from_output(
    out: extract_prompt.ExtractOut, chunk: Sequence[Message], method: str, offset: int = 0
) -> list[Claim]:
    """Map the model's aliases back to message ids; out-of-range aliases are dropped.

    A theory's ``supports`` (1-based numbers in this answer's claim list)
    become 0-based indexes shifted by ``offset``, the answer's position among
    all the session's claims.
    """
    claims = []
    for c in out.claims:
        evidence = tuple(chunk[a - 1].id for a in c.evidence if 1 <= a <= len(chunk))
        said = next((m.timestamp for m in chunk if m.id in evidence), chunk[-1].timestamp)
        claims.append(
            Claim(
                text=c.text.strip(),
                speaker=c.speaker.strip(),
                subject=c.subject.strip(),
                conversation=chunk[0].conversation,
                evidence=evidence,
                said_at=said,
                kind=c.kind,
                facet="" if c.facet == "none" else c.facet,
                source=c.source,
                importance=c.importance,
                salience=c.salience,
                valid_from=_date(c.valid_from, said),
                valid_to=_date(c.valid_to, said),
                entities=tuple(
                    EntityMention(e.name, e.kind, tuple(e.aliases), e.role, e.state)
                    for e in c.entities
                ),
                evidence_claims=tuple(
                    offset + i - 1 for i in c.supports if 1 <= i <= len(out.claims)
                ),
                method=method,
            )
        )
    return claims


class LLMArchivist:
    """Archivist backed by any ChatModel; cached, counted and bounded in concurrency."""

    def __init__(
        self,
        model: ChatModel,
        *,
        cache: ResponseCache | None = None,
        ledger: Accounting | None = None,
        concurrency: int = 4,
        min_turns: int = 6,  # keeps calls per message under 0.25 (1 per episode + boundaries)
        max_turns: int = 24,
    ) -> None:
        self.model = model
        self.name = model.name
        self.cache = cache
        self.ledger = ledger if ledger is not None else Accounting()
        self.concurrency = concurrency
        self.limiter = threading.BoundedSemaphore(concurrency)
        self.min_turns, self.max_turns = min_turns, max_turns

    def _call(self, prompt, messages: list[dict], output_type):
        return call_structured(
            self.model,
            task=prompt.NAME,
            version=prompt.VERSION,
            messages=messages,
            output_type=output_type,
            cache=self.cache,
            ledger=self.ledger,
            limiter=self.limiter,
        )

    def segment(self, messages: Sequence[Message], result: SessionResult) -> list[list[Message]]:
        """Topic episodes of a session (one episode for short sessions)."""
        if not should_use_llm_boundaries(list(messages)):
            return [list(messages)]
        try:
            out = self._call(
                segment_prompt,
                segment_prompt.build(messages, messages[-1].timestamp),
                segment_prompt.SegmentOut,
            )
        except LLMError as e:
            result.notes.append(f"boundaries fell back to fixed turns: {type(e).__name__}")
            return segment_fixed(list(messages), max_turns=self.max_turns // 3)
        return chunks_from_boundaries(messages, out.boundaries, self.min_turns, self.max_turns)

    def process_session(
        self,
        messages: Sequence[Message],
        participants: Sequence[str],
        context: Sequence[Message] = (),
        kin: Mapping[tuple[str, str], str] | None = None,
    ) -> SessionResult:
        """Episodes and claims of ``messages``; the first episode's prompt also shows
        ``context`` (the messages before them), without aliases, so it cannot be cited."""
        result = SessionResult(method=self.name)
        chunks = self.segment(messages, result)

        def extract(chunk: list[Message]) -> extract_prompt.ExtractOut:
            shown = context if chunk[0].id == messages[0].id else ()
            prompt = extract_prompt.build(chunk, participants, chunk[-1].timestamp, shown)
            return self._call(extract_prompt, prompt, extract_prompt.ExtractOut)

        claims: list[Claim] = []
        for chunk, out in zip(chunks, run_parallel(extract, chunks, self.concurrency), strict=True):
            if isinstance(out, Exception):
                if not isinstance(out, LLMError):
                    raise out  # a bug, not weather: surface it
                result.fallbacks += 1
                result.notes.append(f"episode {chunk[0].id}: heuristic after {type(out).__name__}")
                result.episodes.append(heuristic_episode(chunk))
                claims += heuristic_claims(chunk, participants, kin)
                continue
            result.episodes.append(
                Episode(
                    conversation=chunk[0].conversation,
                    session=chunk[0].session,
                    message_ids=tuple(m.id for m in chunk),
                    start=chunk[0].timestamp,
                    end=chunk[-1].timestamp,
                    narrative=out.narrative.strip(),
                    title=out.title.strip(),
                    method=self.name,
                    qa=tuple((p.question, p.answer) for p in out.qa),
                )
            )
            claims += claims_from_output(out, chunk, self.name, offset=len(claims))
        authors = {m.id: m.speaker for m in messages}
        attach_claims(result.episodes, claims, participants, result, authors)
        return result
