"""Message summaries in levels: one per session, then rolled up G at a time.

Level 1 summarises one session; level k+1 summarises each complete run of G
consecutive level-k summaries, so older periods compress more (the caps grow
slower than the spans). The newest incomplete run stays un-rolled until it
fills. Every summary is keyed by a hash of what it was made from (level 1: the
session's narratives and claims; above: its children's hashes), so a re-run
writes nothing, and a session that changed replaces its summary and every
summary above it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from ..model import Claim, Episode, Summary, content_hash
from ..prompts import summary as summary_prompt
from ..store.sql import Filters
from .condense import (
    Asker,
    Counts,
    LLMPolicy,
    claim_priority,
    conversations,
    join_capped,
    llm_session,
    select_claims,
    trim,
)

if TYPE_CHECKING:
    from ..core import Core

ALL = 1_000_000_000


@dataclass(frozen=True)
class SummaryConfig:
    """Roll-up width and the character cap of each level."""

    group: int = 4  # level-k summaries per level-(k+1) summary
    caps: tuple[int, ...] = (500, 700, 900)  # levels 1, 2, 3
    cap_step: int = 200  # each level beyond ``caps`` allows this much more
    llm: LLMPolicy = LLMPolicy()

    def cap(self, level: int) -> int:
        """Character cap of a level-``level`` summary."""
        if level <= len(self.caps):
            return self.caps[level - 1]
        return self.caps[-1] + self.cap_step * (level - len(self.caps))


DEFAULT_SUMMARIES = SummaryConfig()


@dataclass
class _Source:
    """What a level-1 summary is made from: one session's episodes and claims."""

    session: int
    episodes: list[Episode]
    claims: list[Claim]

    @property
    def hash(self) -> str:
        texts = [e.narrative for e in self.episodes] + [c.text for c in self.claims]
        return content_hash("summary", "1", str(self.session), *texts)


def session_sources(core: Core, cid: str) -> list[_Source]:
    """Each extracted session's episodes and claims, sessions in time order."""
    episodes = core.store.list_episodes(cid, limit=ALL)
    session_of = {e.id: e.session for e in episodes}
    out: dict[int, _Source] = {}
    for e in episodes:
        out.setdefault(e.session, _Source(e.session, [], [])).episodes.append(e)
    for c in core.store.list_claims(Filters(conversation=cid), limit=ALL):
        if c.episode in session_of:
            out[session_of[c.episode]].claims.append(c)
    return sorted(out.values(), key=lambda s: (s.episodes[0].start, s.session))


def spread(sessions: Sequence[Sequence[Claim]]) -> Callable[[Claim], tuple]:
    """Sort key covering the whole period: every session's best claim before any second best."""
    rank: dict[int, int] = {}
    for claims in sessions:
        for i, c in enumerate(sorted(claims, key=claim_priority)):
            rank[id(c)] = i
    return lambda c: (rank.get(id(c), 0), *claim_priority(c))


def _session_text(src: _Source, cap: int) -> str:
    """Heuristic level-1 text: the top claims in time order, else the narratives."""
    if src.claims:
        return select_claims(src.claims, cap, time_order=True)
    return join_capped([e.narrative for e in src.episodes], cap)


def _level1(src: _Source, cid: str, asker: Asker, config: SummaryConfig) -> Summary:
    cap = config.cap(1)
    text, method = "", "heuristic"
    if asker.model is not None:
        out = asker.ask(
            summary_prompt,
            summary_prompt.build_session(cid, src.session, src.episodes, src.claims, cap),
            summary_prompt.SummaryOut,
        )
        if out is not None and out.summary.strip():
            text, method = trim(out.summary, cap), asker.method
    return Summary(
        conversation=cid,
        level=1,
        start=min(e.start for e in src.episodes),
        end=max(e.end for e in src.episodes),
        text=text or _session_text(src, cap),
        covers=(src.session,),
        method=method,
    )


def _rollup(
    children: Sequence[Summary],
    level: int,
    claims: Sequence[Sequence[Claim]],
    asker: Asker,
    config: SummaryConfig,
) -> Summary:
    """A level-``level`` summary of ``children``: the model's, else their sessions' top claims."""
    cap, cid = config.cap(level), children[0].conversation
    text, method = "", "heuristic"
    if asker.model is not None:
        out = asker.ask(
            summary_prompt,
            summary_prompt.build_rollup(cid, level, children, cap),
            summary_prompt.SummaryOut,
        )
        if out is not None and out.summary.strip():
            text, method = trim(out.summary, cap), asker.method
    if not text and any(claims):
        flat = [c for cs in claims for c in cs]
        text = select_claims(flat, cap, time_order=True, key=spread(claims))
    elif not text:
        text = join_capped([c.text for c in children], cap)
    return Summary(
        conversation=cid,
        level=level,
        start=min(c.start for c in children),
        end=max(c.end for c in children),
        text=text,
        covers=tuple(c.id or 0 for c in children),
        method=method,
    )


class _Tree:
    """A conversation's stored summaries by level, with the sessions each one spans."""

    def __init__(self, core: Core, cid: str) -> None:
        self.core, self.cid = core, cid
        self.levels: dict[int, list[tuple[Summary, str]]] = {}
        for s, h in core.store.summary_rows(cid):
            self.levels.setdefault(s.level, []).append((s, h))
        self.sessions: dict[int, tuple[int, ...]] = {}
        for level in sorted(self.levels):
            for s, _ in self.levels[level]:
                self._note(s)

    def _note(self, s: Summary) -> None:
        if s.level == 1:
            self.sessions[s.id or 0] = s.covers
        else:
            self.sessions[s.id or 0] = tuple(x for c in s.covers for x in self.sessions.get(c, ()))

    def ordered(self, level: int) -> list[tuple[Summary, str]]:
        return sorted(self.levels.get(level, []), key=lambda r: (r[0].start, r[0].id or 0))

    def update(self, level: int, want: dict[str, object], build, counts: Counts) -> None:
        """Make ``level`` hold exactly the hashes in ``want``; ``build(value)`` makes a summary."""
        have = self.levels.get(level, [])
        stale = [s.id for s, h in have if h not in want]
        known = {h for _, h in have}
        new = [(build(v), h) for h, v in want.items() if h not in known]
        if not stale and not new:
            return
        ids = self.core.store.replace_summaries(self.cid, level, stale, new)  # type: ignore[arg-type]
        keep = [(s, h) for s, h in have if h in want]
        for (s, h), i in zip(new, ids, strict=True):
            s = replace(s, id=i)
            keep.append((s, h))
            self._note(s)
        self.levels[level] = keep
        counts.add("summaries_written", len(new))
        counts.add("summaries_deleted", len(stale))


def summarise_conversation(core: Core, cid: str, asker: Asker, config: SummaryConfig) -> Counts:
    """Bring one conversation's summary levels up to date with its sessions."""
    counts = Counts()
    sources = [
        s for s in session_sources(core, cid) if s.claims or any(e.narrative for e in s.episodes)
    ]
    by_session = {s.session: s for s in sources}
    tree = _Tree(core, cid)
    tree.update(1, {s.hash: s for s in sources}, lambda s: _level1(s, cid, asker, config), counts)
    level = 1
    while True:
        below = tree.ordered(level)
        g = config.group
        runs = [below[i : i + g] for i in range(0, len(below) - g + 1, g)]
        want = {content_hash("summary", str(level + 1), *(h for _, h in run)): run for run in runs}

        def build(run, up=level + 1):
            children = [s for s, _ in run]
            spanned = [x for c in children for x in tree.sessions.get(c.id or 0, ())]
            claims = [by_session[x].claims for x in spanned if x in by_session]
            return _rollup(children, up, claims, asker, config)

        tree.update(level + 1, want, build, counts)
        level += 1
        if not want and level >= max(tree.levels, default=0):
            break
    return counts


def run_summaries(core: Core, payload: dict, config: SummaryConfig = DEFAULT_SUMMARIES) -> dict:
    """Job handler: session summaries and their roll-ups (payload: optional "conversation")."""
    total, seen = Counts(), 0
    with llm_session(core, total, config.llm) as asker:
        for cid in conversations(core, payload):
            if not core.store.list_episodes(cid, limit=1):
                continue
            seen += 1
            for k, v in summarise_conversation(core, cid, asker, config).values.items():
                total.add(k, v)
    if not seen:
        return {"skipped": "no episodes"}
    return total.result(conversations=seen, summaries_written=0)
