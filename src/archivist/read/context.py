"""Context for one assistant turn, assembled within a token budget (DESIGN.md §1.8).

When everything said in scope (less what the request already holds) fits the
budget, the context is that history: every message, dated, oldest first, with
what no longer holds marked as history. It is never longer than the history it
stands for, and a reply is never shown without what it answers.

Otherwise, sections, in order: key info; message summaries from the longest
span to the most recent; dossiers of relevant entities; briefs of less relevant
ones; the most relevant current claims (facts, theories, open questions,
plans); then relevant and recent messages. Claims and messages are ranked
together: a claim is shown only where it outranks the turns it would leave out.
In those sections and in the whole history, lines in time order, each day is
written once, on its first line. Gathering candidates reads the store
(``gather``); ranking and packing them into the budget are pure functions
(``score``, ``pack``).

Tokens are estimated, not counted: ``ceil(words × 1.3)`` per line (English
text averages about 1.3 tokens a word with common BPE vocabularies; no
tokenizer dependency). Budget shares (``ContextConfig``): key info, summaries,
dossiers and briefs each have a cap (5/25/15/5 %) and together may never use
the last 40 %, which stays for claims and messages (20 % that claims may not
take). Below 2,000 tokens
claims get at most 20 %, summaries, dossiers and briefs nothing, and key info
only the whole sentences the turn bears on: measured on LoCoMo, they held
fewer of the turns a question needs than the messages they displaced
(README, "Context").
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from ..errors import InputError
from ..model import Claim, Entity, Hit, Message, Person, Summary, text_problem
from ..store.sql import Filters
from ..text import ECHO_SHARE, person_key, query_terms, share_in, stem
from ..timeground import spoken_day
from .context_lines import (
    Candidate,
    bearing_on,
    claim_line,
    day_of,
    days_once,
    excerpt,
    fragments_as_turns,
    message_line,
    same_text,
    turn_words,
    without,
)
from .history import Bygones, bygones, history_line, no_longer_holds
from .links import as_known, as_known_by
from .recall import search_memory
from .replies import REPLY_WORDS, follows_question

if TYPE_CHECKING:
    from ..core import Core
    from ..store.base import Store

SECTIONS: tuple[tuple[str, str], ...] = (
    ("key_info", "Key info"),
    ("summary", "Summaries"),
    ("dossier", "Entities"),
    ("brief", "Other entities"),
    ("claim", "Claims"),
    ("message", "Messages"),
    ("log", "Earlier messages, oldest first"),  # the whole history, when it fits
)
EARLY = ("key_info", "summary", "dossier", "brief")  # capped, and never eat the reserves
RANKED = ("dossier", "brief", "claim", "message")  # chosen by score, not by structure
IN_TIME_ORDER = ("claim", "message", "log")  # shown oldest first once chosen


@dataclass(frozen=True)
class ContextConfig:
    """Budget shares, ranking weights and candidate counts of context assembly."""

    tokens_per_word: float = 1.3
    caps: tuple[tuple[str, float], ...] = (
        ("key_info", 0.05),
        ("summary", 0.25),
        ("dossier", 0.15),
        ("brief", 0.05),
    )
    # below this budget summaries, dossiers and briefs get no room: on LoCoMo, at every
    # budget up to 1,500 tokens, each lowered the share of evidence turns a context holds
    overview_from: int = 2000
    # below it claims get at most this share: each stands for one turn, as a message
    # does, and ranked apart from the messages they crowded out better-ranked turns
    claims_below_overview: float = 0.2
    reserve_claims: float = 0.2
    reserve_messages: float = 0.2
    # relevance first: a context answers this turn (LoCoMo evidence recall rose with its
    # weight, from 0.45 to 0.8, then 0.9, at every budget from 500 tokens)
    weights: tuple[tuple[str, float], ...] = (
        ("relevance", 0.90),
        ("usefulness", 0.025),
        ("importance", 0.025),
        ("salience", 0.0),
        ("recency", 0.05),
    )
    continuity: float = 0.1  # bonus for an item shown in the previous turn's context
    half_life_days: float = 30.0  # recency halves every this many days before ``at``
    search_k: int = 20  # at least this many search hits ...
    tokens_per_hit: int = 25  # ... and one per this many tokens of budget, to fill it
    route: bool = True  # search routed (who, which conversation, which period) as ``ask``
    early_relevance: bool = True  # key info and summaries: only sentences the turn bears on
    whole_history: bool = True  # the scope's every message instead, when they all fit
    recent_messages: int = 12  # tail of the conversation offered as candidates
    # the last turns pinned first (never skipped as "already summarised"); none by default:
    # they are what the chat in front of the assistant holds (the proxy leaves its request
    # out anyway), and pinned they cost a LoCoMo context at 250 tokens 7 points of recall
    keep_last: int = 0
    # relevance of a claim search did not find, by the share of the turn's words it holds:
    # below the hits that fill a budget (at 0.8, every claim saying "dogs" brought its turn
    # before the hits for "How many dogs does Andrew have?", and LoCoMo recall fell)
    claim_overlap: float = 0.3
    max_claims: int = 300  # claims of the conversation(s) offered besides search hits
    max_dossiers: int = 3
    max_briefs: int = 6
    dossier_relevance: float = 0.5  # below this an entity gets a brief, not a dossier
    covered_share: float = 0.8  # an item whose words a shown summary holds this much is skipped
    echo_share: float = ECHO_SHARE  # an assistant's reply whose words the context shows
    min_fit_words: int = 12  # a longer item is cut to fit only if this many words fit
    min_line_tokens: int = 10  # a message line costs at least this (its date and speaker)
    # a message longer than this many words that does not fit whole is shown as the
    # sentences the turn bears on (``excerpt``), the rest marked "…", rather than as its
    # first words cut short or not at all; 0: never
    excerpt_words: int = 40

    def weight(self, name: str) -> float:
        return dict(self.weights)[name]


DEFAULT_CONTEXT = ContextConfig()


@dataclass(frozen=True)
class ContextItem:
    """One line shown to the assistant: what it is, its id, its text, its cost and score."""

    kind: str  # key_info, summary, dossier, brief, claim, message
    id: str  # person id, summary id, entity id, claim id, or "conversation/message id"
    text: str
    tokens: int
    score: float = 0.0

    def record(self) -> tuple[str, str, str, float]:
        """The (kind, id, text, score) ``MemoryService.record_context`` takes: the score
        is kept so the memory browser can show why each line was chosen."""
        return (self.kind, self.id, self.text, round(self.score, 4))


@dataclass(frozen=True)
class Context:
    """The assembled text, the items in it (in text order) and its estimated tokens."""

    text: str
    items: tuple[ContextItem, ...]
    tokens: int
    budget: int

    def records(self) -> list[tuple[str, str, str, float]]:
        """What was shown, ready for ``MemoryService.record_context(records, reply)``."""
        return [i.record() for i in self.items]

    def to_dict(self) -> dict:
        return {
            "text": self.text,
            "tokens": self.tokens,
            "budget": self.budget,
            "items": [
                {"kind": i.kind, "id": i.id, "tokens": i.tokens, "score": round(i.score, 4)}
                for i in self.items
            ],
        }


def estimate_tokens(text: str, per_word: float = DEFAULT_CONTEXT.tokens_per_word) -> int:
    """Estimated tokens of ``text``: ``ceil(words × per_word)``."""
    return math.ceil(len(text.split()) * per_word)


def recency(when: datetime | None, at: datetime, half_life_days: float) -> float:
    """1.0 at ``at``, halving every ``half_life_days`` before it (0.5 when unknown)."""
    if when is None:
        return 0.5
    age = max(0.0, (at - when).total_seconds() / 86400)
    return 0.5 ** (age / half_life_days)


def score(
    c: Candidate,
    at: datetime,
    previous: frozenset[tuple[str, str]] = frozenset(),
    config: ContextConfig = DEFAULT_CONTEXT,
) -> float:
    """Relevance, usefulness, importance, salience and recency, weighted; plus continuity."""
    w = dict(config.weights)
    s = (
        w["relevance"] * c.relevance
        + w["usefulness"] * c.usefulness
        + w["importance"] * c.importance
        + w["salience"] * c.salience
        + w["recency"] * recency(c.when, at, config.half_life_days)
    )
    return s + (config.continuity if (c.kind, c.id) in previous else 0.0)


def previous_keys(previous: Iterable[ContextItem | Sequence]) -> frozenset[tuple[str, str]]:
    """(kind, id) of last turn's items: ContextItems or (kind, id, …) tuples."""
    out = set()
    for p in previous:
        kind, item_id = (p.kind, p.id) if isinstance(p, ContextItem) else (p[0], p[1])
        out.add((str(kind), str(item_id)))
    return frozenset(out)


# -- packing: pure ---------------------------------------------------------------------


CUT = "[cut]"  # the end of a line cut to fit


def _fit(line: str, room: int, config: ContextConfig, cut: bool = True) -> str | None:
    """``line`` if it fits in ``room`` tokens, else cut to fit and saying so ("… [cut]"),
    or None if too little fits or it may not be ``cut`` (a fact of key info cut short,
    "Art gives Caroline a sense of freedom, but so does … [cut]", tells nothing)."""
    if estimate_tokens(line, config.tokens_per_word) <= room:
        return line
    if not cut:
        return None
    words = line.split()
    n = int(room / config.tokens_per_word) - 1
    if n < config.min_fit_words:
        return None
    while n >= config.min_fit_words:
        cut = " ".join(words[:n]) + f" … {CUT}"
        if estimate_tokens(cut, config.tokens_per_word) <= room:
            return cut
        n -= 1
    return None


def _says_again(
    c: Candidate,
    words: set[str],
    said: Mapping[str, set[str]],
    shown: set[str],
    pinned: set[tuple[str, str]],
    claimed: set[tuple[str, str]],
    config: ContextConfig,
) -> bool:
    """Would ``c`` (its content ``words``) say again what the context shows?

    A claim of one of the conversation's last turns (``pinned``: shown anyway); a
    skippable item whose words are mostly (``covered_share``) in a shown summary of
    its conversation, or, a message, in anything shown (an assistant's "Noted:
    you're vegan now" at the lower ``echo_share``); a message a shown claim already
    stands for (``claimed``: the turns of the shown claims that cite one turn).

    One line per turn: a claim left among the candidates says most of its turn
    (``fragments_as_turns`` turned the others into their whole messages), so the
    message beside it would say the same twice.
    """
    if c.kind == "claim" and c.evidence and c.evidence <= pinned:
        return True
    if c.skippable:
        known = said.get(c.conversation, set())
        if c.reply:
            known = known | shown
        share = config.echo_share if c.reply else config.covered_share
        if known and share_in(words, known) >= share:
            return True
    if c.kind != "message" or c.pinned or len(c.evidence) != 1:
        return False
    return next(iter(c.evidence)) in claimed


def _allowances(budget: int, config: ContextConfig) -> dict[str, float]:
    caps = {k: share * budget for k, share in config.caps}
    caps["claim"] = float(budget)
    if budget < config.overview_from:
        caps |= {k: 0.0 for k in ("summary", "dossier", "brief")}
        caps["claim"] = config.claims_below_overview * budget
    caps["early"] = budget * (1 - config.reserve_claims - config.reserve_messages)
    caps["messages_reserve"] = budget * config.reserve_messages
    return caps


def _line(
    c: Candidate,
    days: Mapping[str, tuple[datetime, int]] | None,
    room: float,
    config: ContextConfig,
    kind: str = "",
) -> tuple[str, int, str, tuple[datetime, int] | None] | None:
    """``c`` as a line fitted to ``room`` (``_fit``), its cost, its day, and, when it
    writes its day, (when, tokens the day adds).

    In a section in time order (``days``: each day written there, the time of the
    line that writes it and what that costs; None in another section) a day is
    written once, on its first line (``days_once``): a line is fitted without it,
    and costs what writing the day adds only when it is the day's first line,
    less what the day's line until then no longer pays.
    """
    day, rest = day_of(c.text) if days is not None else ("", c.text)
    when = c.when or datetime.min.replace(tzinfo=UTC)
    held = days.get(day) if days is not None and day else None
    first = bool(day) and (held is None or when < held[0])
    most = math.ceil(3 * config.tokens_per_word) if first else 0  # what a day can add
    line = _fit(f"- {rest}", int(room - most), config, cut=kind != "key_info")
    if line is None:
        return None
    cost = estimate_tokens(line, config.tokens_per_word)
    if not first:
        return line, cost, day, None
    own = estimate_tokens(f"- [{day}] {line[2:]}", config.tokens_per_word) - cost
    return line, cost + own - (held[1] if held else 0), day, (when, own)


def _dated_lines(
    kind: str,
    shown: Sequence[tuple[Candidate, float]],
    lines: Mapping[int, str],
    config: ContextConfig,
) -> list[tuple[str, int]]:
    """The section's lines in the order ``shown`` and their costs, each day written once
    in a section in time order."""
    texts = [lines[id(c)][2:] for c, _ in shown]
    if kind in IN_TIME_ORDER:
        days = [day_of(c.text)[0] for c, _ in shown]
        texts = days_once([f"[{d}] {t}" if d else t for d, t in zip(days, texts, strict=True)])
    return [(f"- {t}", estimate_tokens(f"- {t}", config.tokens_per_word)) for t in texts]


def _order(kind: str, chosen: list[tuple[Candidate, float]]) -> list[tuple[Candidate, float]]:
    if kind in IN_TIME_ORDER:
        return sorted(chosen, key=lambda cs: cs[0].when or datetime.min.replace(tzinfo=UTC))
    return chosen


@dataclass
class _Shown:
    """What a context shows so far, which each further candidate is checked against."""

    pinned: set[tuple[str, str]]  # the conversation's last turns, shown whatever else is
    texts: set[str] = field(default_factory=set)
    words: set[str] = field(default_factory=set)
    turns: set[tuple[str, str]] = field(default_factory=set)  # shown as messages
    claimed: set[tuple[str, str]] = field(default_factory=set)  # a shown claim stands for
    said: dict[str, set[str]] = field(default_factory=dict)  # words of shown summaries
    spanned: dict[str, set[int]] = field(default_factory=dict)  # sessions they span

    def again(self, c: Candidate, config: ContextConfig) -> bool:
        """Would ``c`` show what is shown (``_says_again``), or a summary of spanned sessions?"""
        if c.kind == "summary" and c.covers and c.covers <= self.spanned.get(c.conversation, set()):
            return True
        if c.kind == "claim" and c.evidence and c.evidence <= self.turns:
            return True  # its turns are shown whole
        words = set(query_terms(c.body or c.text))
        return same_text(c.body or c.text) in self.texts or _says_again(
            c, words, self.said, self.words, self.pinned, self.claimed, config
        )

    def add(self, c: Candidate, line: str) -> None:
        self.texts.add(same_text(c.body or c.text))
        self.words.update(query_terms(line))
        if c.kind == "message":
            self.turns |= c.evidence
        if c.kind == "claim" and len(c.evidence) == 1:
            self.claimed |= c.evidence
        if c.kind == "summary":
            self.spanned.setdefault(c.conversation, set()).update(c.covers)
            self.said.setdefault(c.conversation, set()).update(query_terms(line))


@dataclass
class _Section:
    """A section being filled: its lines so far, what they cost, the days written."""

    kind: str
    room: float  # its cap, its header included
    header: int  # what its header costs, paid with its first line
    chosen: list[tuple[Candidate, float, str]] = field(default_factory=list)
    spent: int = 0
    days: dict[str, tuple[datetime, int]] = field(default_factory=dict)

    def left(self, group_left: float) -> float:
        """Room for a further line: its own cap and the group's, less a header not yet paid."""
        return min(self.room - self.spent, group_left) - (0 if self.chosen else self.header)


def _take(
    c: Candidate, section: _Section, room: float, shown: _Shown, config: ContextConfig
) -> list[tuple[Candidate, str, int]]:
    """``c``'s line (after the question it answers, for a short reply) fitted to ``room``,
    with its cost; nothing if it does not fit or would say again what is shown."""
    if shown.again(c, config):
        return []
    days = section.days if section.kind in IN_TIME_ORDER else None
    got = _line(c, days, room, config, section.kind)
    if c.excerpt and (got is None or got[0].endswith(CUT)):
        # a long turn that does not fit whole: the sentences bearing on this turn
        # rather than its first words, or rather than nothing
        short = _line(replace(c, text=c.excerpt), days, room, config, section.kind)
        if short is not None and not short[0].endswith(CUT):
            got = short
    if got is None:
        return []
    line, cost, day, holds = got
    taken = [(c, line, cost)]
    booked = {day: holds} if holds else {}
    ask = c.prompt
    if ask is not None and same_text(ask.body or ask.text) not in shown.texts:
        asked = _line(ask, None if days is None else {**days, **booked}, room - cost, config)
        if asked is None:
            return []  # a bare "Two of them." without its question misleads
        taken.insert(0, (ask, asked[0], asked[1]))
        booked |= {asked[2]: asked[3]} if asked[3] else {}
    section.days |= booked
    return taken


# claims and messages are ranked together: a claim stands for its turn in fewer words,
# and is shown only where it outranks the turns it would leave out (on LoCoMo, a claims
# section filled first pushed out search hits that held what a question needs)
GROUPS: tuple[tuple[str, ...], ...] = (
    ("key_info",),
    ("summary",),
    ("dossier",),
    ("brief",),
    ("claim", "message"),
    ("log",),
)


def pack(
    sections: Mapping[str, Sequence[Candidate]],
    budget: int,
    at: datetime,
    previous: frozenset[tuple[str, str]] = frozenset(),
    config: ContextConfig = DEFAULT_CONTEXT,
) -> Context:
    """Fill the sections in order within ``budget``; return the text and the items shown.

    Ranked sections take pinned candidates (the conversation's last turns) and
    then their best-scoring ones first (ties: the newer), claims and messages
    in one ranking (``GROUPS``); key info and summaries keep the order they
    were given. A summary whose sessions shown summaries already span is
    skipped, and so is a skippable claim or message whose words a shown summary
    already holds. Nothing is shown twice: an item with the words of a shown
    one is skipped, and so are a claim of a turn shown (or pinned) and a message
    whose words its shown claims already hold.
    """
    caps = _allowances(budget, config)
    used = early_used = 0
    shown = _Shown({e for c in sections.get("message", ()) if c.pinned for e in c.evidence})
    blocks: list[str] = []
    items: list[ContextItem] = []
    for group in GROUPS:
        filling = {
            kind: _Section(
                kind,
                _room(kind, caps, budget - used, early_used),
                estimate_tokens(f"## {dict(SECTIONS)[kind]}", config.tokens_per_word),
            )
            for kind in group
        }
        cands = [
            (c, score(c, at, previous, config), filling[kind])
            for kind in group
            for c in sections.get(kind, ())
        ]
        if group[0] in RANKED:
            cands.sort(key=lambda cs: (cs[0].pinned, cs[1], cs[0].when or at), reverse=True)
        group_spent = 0
        for c, s, section in cands:
            room = section.left(budget - used - group_spent)
            taken = _take(c, section, room, shown, config)
            extra = section.header if taken and not section.chosen else 0
            for one, line, cost in taken:
                section.chosen.append((one, s, line))
                section.spent += cost
                group_spent += cost
                shown.add(one, line)
            section.spent += extra
            group_spent += extra
        for kind in group:
            section = filling[kind]
            if not section.chosen:
                continue
            spent, block, shown_items = _written(section, config)
            used += spent
            early_used += spent if kind in EARLY else 0
            blocks.append(block)
            items.extend(shown_items)
    return Context("\n\n".join(blocks), tuple(items), used, budget)


def _room(kind: str, caps: Mapping[str, float], left: float, early_used: float) -> float:
    """A section's cap: early ones within theirs and the early share; claims leave the
    messages their reserve; messages and the whole history take what is left."""
    if kind in EARLY:
        return min(caps[kind], caps["early"] - early_used)
    if kind == "claim":
        return min(left - caps["messages_reserve"], caps["claim"])
    return left


def _written(section: _Section, config: ContextConfig) -> tuple[int, str, list[ContextItem]]:
    """A filled section's cost, text and items: its lines in their order, each day once."""
    shown = _order(section.kind, [(c, s) for c, s, _ in section.chosen])
    lines = _dated_lines(
        section.kind, shown, {id(c): line for c, _, line in section.chosen}, config
    )
    header = f"## {dict(SECTIONS)[section.kind]}"
    spent = estimate_tokens(header, config.tokens_per_word) + sum(n for _, n in lines)
    items = [
        ContextItem(c.kind, c.id, line[2:], cost, s)
        for (c, s), (line, cost) in zip(shown, lines, strict=True)
    ]
    return spent, "\n".join([header, *(line for line, _ in lines)]), items


# -- gathering candidates: reads only ---------------------------------------------------


def assemble_context(
    core: Core,
    question_or_turn: str,
    *,
    person: str | None = None,
    conversation: str | None = None,
    budget_tokens: int = 1500,
    previous: Sequence[ContextItem | Sequence] = (),
    at: datetime | None = None,
    config: ContextConfig = DEFAULT_CONTEXT,
    request: Sequence[Message] = (),
) -> Context:
    """The context an assistant should see before answering ``question_or_turn``.

    ``at`` is the turn's time (default: now): nothing said later is shown and
    foresights that ended by then are left out. ``previous`` is last turn's
    items; they win ties (continuity). Pass ``Context.records()`` and the reply
    to ``record_context`` so usefulness scoring learns what helped.

    ``request``: the messages already in front of the assistant (a chat
    request's own history). None of them is shown again, whether stored under
    the same conversation and id or with the same words elsewhere, nor a claim
    whose only evidence they are: the context adds what the chat does not hold.
    """
    if not isinstance(budget_tokens, int) or budget_tokens < 1:
        raise InputError(f"budget_tokens must be a positive integer; got {budget_tokens!r}")
    if at is not None and at.tzinfo is None:
        raise InputError("at must be timezone-aware")
    for name, value in (
        ("turn", question_or_turn),
        ("person", person),
        ("conversation", conversation),
    ):
        if isinstance(value, str) and (problem := text_problem(value)):
            raise InputError(f"{name} {problem}")
    at = at or core.clock()
    prev = previous_keys(previous)
    if request and person is not None and _all_in_request(core, person, request):
        return pack({}, budget_tokens, at, prev, config)
    sections = gather(
        core, question_or_turn or "", person, conversation, at, prev, config, budget_tokens
    )
    if request:
        sections = without(sections, request, config.covered_share)
    log = sections.pop("log", None)
    if log is not None and whole_cost(log, config) <= budget_tokens:
        return pack({"log": log}, budget_tokens, at, prev, config)
    return pack(sections, budget_tokens, at, prev, config)


def _all_in_request(core: Core, person: str, request: Sequence[Message]) -> bool:
    """Whether everything memory holds of ``person`` came from the request's messages.

    Then every item the context could show repeats the chat in front of the
    assistant (the messages themselves, or claims, key info and summaries read
    from them), so nothing is searched for: a user's first conversation costs a
    few index probes a turn instead of a search. Nor is anything shown to
    someone memory has never heard of (no message, claim, entity or person of
    that name outside the request): a new user of a shared store is not shown
    other people's chats that share the words of their first message.
    """
    convs = {m.conversation for m in request}
    if len(convs) != 1:
        return False
    return not core.store.holds_beyond(person, convs.pop(), {m.id for m in request})


def whole_cost(messages: Sequence[Candidate], config: ContextConfig = DEFAULT_CONTEXT) -> int:
    """Tokens of ``messages`` shown whole, as the message section shows them."""
    header = f"## {dict(SECTIONS)['log']}"
    lines = [header, *(f"- {text}" for text in days_once([c.text for c in messages]))]
    return sum(estimate_tokens(line, config.tokens_per_word) for line in lines)


def gather(
    core: Core,
    query: str,
    person: str | None,
    conversation: str | None,
    at: datetime,
    previous: frozenset[tuple[str, str]] = frozenset(),
    config: ContextConfig = DEFAULT_CONTEXT,
    budget: int = 1500,
) -> dict[str, list[Candidate]]:
    """Every section's candidates with their ranking signals (usefulness from the store)."""
    store = core.store
    k = max(config.search_k, budget // config.tokens_per_hit)
    hits = _hits(core, query, person, conversation, at, config, k)
    persons = _persons(store, person, conversation)
    convs = _scope(conversation, persons, hits)
    people = core.people()
    claims = _claims(store, query, hits, person, convs, at, previous, config, people)
    dossiers, briefs = _entities(store, query, convs, claims, previous, at, config)
    logs = {cid: [m for _, m in store.conversation_messages(cid)] for cid in convs}
    if any(m.timestamp > at for log in logs.values() for m in log):
        # a turn replayed from the past: key info, dossiers and briefs are current
        # snapshots, not histories, and may tell what was learned after ``at``
        persons, dossiers, briefs = [], [], []
    turns = {(m.conversation, m.id): m for log in logs.values() for m in log}
    claims, found = fragments_as_turns(claims, turns, config.covered_share)
    past = bygones(store, convs, at, hits)
    sections = {
        "key_info": [
            Candidate("key_info", p.id, f"{p.name}: {text}")
            for p in persons
            if (text := store.person_key_info(p.id))
        ],
        "summary": _summaries(store, convs, at),
        "dossier": dossiers,
        "brief": briefs,
        "claim": claims,
        "message": _messages(
            store,
            hits,
            logs.get(conversation or "", []),
            at,
            config,
            found,
            turn_words(query, people),
        ),
    }
    if config.whole_history and _scope(conversation, persons, hits, cap=None) == convs:
        whole = sorted(
            (m for log in logs.values() for m in log if m.timestamp <= at),
            key=lambda m: (m.timestamp, m.seq),
        )
        if len(whole) * config.min_line_tokens <= budget:  # else it cannot fit: not read
            sections["log"] = _message_candidates(store, whole, hits, set(), at)
    if config.early_relevance:
        sections = bearing_on(sections, query, people)
    return {
        kind: _with_usefulness(store, [_marked(c, past) for c in cands])
        for kind, cands in sections.items()
    }


def _marked(c: Candidate, past: Bygones) -> Candidate:
    """``c`` with what no longer holds marked as history (itself when nothing is)."""
    text = past.mark(c.text, c.evidence or None)
    short = past.mark(c.excerpt, c.evidence or None) if c.excerpt else ""
    return c if text == c.text and short == c.excerpt else replace(c, text=text, excerpt=short)


def _hits(
    core: Core,
    query: str,
    person: str | None,
    conversation: str | None,
    at: datetime,
    config: ContextConfig,
    k: int,
) -> list[Hit]:
    if not query.strip():
        return []
    if person is not None and not core.takes_part(person):
        # someone only talked about (a sister, a flatmate) is in no message as speaker
        # or addressee: a search scoped to them finds nothing, their name finds them
        if person_key(person) not in person_key(query):
            query = f"{query} {person}"
        person = None
    return search_memory(
        core, query, person=person, conversation=conversation, at=at, k=k, route=config.route
    )


def _persons(store: Store, person: str | None, conversation: str | None) -> list[Person]:
    """Whose key info to show: the person (by id or name), else the conversation's people."""
    found = store.persons()
    if person is not None:
        key = person_key(person)
        named = [
            p for p in found if p.id == person or key in {person_key(n) for _, n in p.identities}
        ]
        local = [p for p in named if any(c == conversation for c, _ in p.identities)]
        return local or named
    if conversation is not None:
        return [p for p in found if any(c == conversation for c, _ in p.identities)]
    return []


def _scope(
    conversation: str | None,
    persons: Sequence[Person],
    hits: Sequence[Hit],
    cap: int | None = 3,
) -> list[str]:
    """Conversations whose summaries, entities and claims count (the first ``cap``)."""
    if conversation is not None:
        return [conversation]
    convs = [c for p in persons for c, _ in p.identities]
    convs += [h.message.conversation for h in hits]
    return list(dict.fromkeys(convs))[:cap]


def _summary_sessions(summaries: Sequence[Summary]) -> dict[int, frozenset[int]]:
    """Summary id -> the sessions it spans (level 1 covers sessions, higher levels summaries)."""
    by_id = {s.id: s for s in summaries}
    out: dict[int, frozenset[int]] = {}

    def spans(s: Summary) -> frozenset[int]:
        if s.id in out:
            return out[s.id]  # type: ignore[index]
        if s.level == 1:
            got = frozenset(s.covers)
        else:
            got = frozenset().union(*(spans(by_id[c]) for c in s.covers if c in by_id))
        out[s.id] = got  # type: ignore[index]
        return got

    for s in summaries:
        spans(s)
    return out


def _summaries(store: Store, convs: Sequence[str], at: datetime) -> list[Candidate]:
    """Summaries ending by ``at``, highest level (longest span) first, then in time order.

    A claim no longer holding at ``at`` that a summary repeats is marked as
    history where it stands in the summary (``Bygones.mark``, as every section
    is), so the summary's other sentences, current ones among them, read as
    they are.
    """
    out: list[Candidate] = []
    for cid in convs:
        found = [s for s in store.list_summaries(cid, None) if s.end <= at]
        if not found:
            continue
        spans = _summary_sessions(found)
        for s in sorted(found, key=lambda s: (-s.level, s.start, s.id or 0)):
            days = spoken_day(s.start), spoken_day(s.end)
            line = f"{days[0] if days[0] == days[1] else ' to '.join(days)}: {s.text}"
            out.append(
                Candidate(
                    "summary",
                    str(s.id),
                    line,
                    when=s.end,
                    conversation=cid,
                    covers=spans.get(s.id, frozenset()),  # type: ignore[arg-type]
                )
            )
    return out


def _overlap(query_words: set[str], text: str) -> float:
    """Share of the query's content words that ``text`` holds."""
    return share_in(query_words, set(query_terms(text)))


def _claims(
    store: Store,
    query: str,
    hits: Sequence[Hit],
    person: str | None,
    convs: Sequence[str],
    at: datetime,
    previous: frozenset[tuple[str, str]],
    config: ContextConfig,
    people: Sequence[str] = (),
) -> list[Candidate]:
    """Claims holding at ``at``: search hits' claims, the scope's claims, last turn's claims.

    A claim search did not find is relevant by the share of the turn's content
    words it holds (``claim_overlap`` of it), people's names aside: "What book did
    Caroline recommend to Melanie?" makes every claim about either of them share a
    word, and on LoCoMo such claims ("Melanie's words mean a lot to Caroline")
    filled the budget before the messages that answer.
    """
    top = max((h.score for h in hits), default=0.0) or 1.0
    rel: dict[int, float] = {}
    found: dict[int, Claim] = {}
    for h in hits:
        for c in h.claims:
            found[c.id] = c  # type: ignore[index]
            rel[c.id] = max(rel.get(c.id, 0.0), h.score / top)  # type: ignore[index]
    if convs:
        scope = Filters(conversation=tuple(convs), person=person)
        for c in store.list_claims(scope, limit=config.max_claims):
            found.setdefault(c.id, c)  # type: ignore[arg-type]
    again = [int(i) for k, i in previous if k == "claim" and i.isdigit()]
    for cid, c in store.claims_by_id(i for i in again if i not in found).items():
        found[cid] = c
    words = turn_words(query, people)
    cands = [
        Candidate(
            "claim",
            str(c.id),
            claim_line(c),
            relevance=max(rel.get(c.id, 0.0), config.claim_overlap * _overlap(words, c.text)),  # type: ignore[arg-type]
            importance=c.importance / 10,
            salience=c.salience / 10,
            when=c.said_at,
            conversation=c.conversation,
            skippable=True,
            body=c.text,
            evidence=frozenset((c.conversation, e) for e in c.evidence),
        )
        for c in as_known(store, found.values(), at)
        if c.holds_at(at) and c.status != "duplicate"  # its older original says it
    ]
    # a claim that bears on nothing of the turn is shown only for continuity: the
    # claims section is filled before the messages, and would fill it with noise
    return [c for c in cands if c.relevance > 0 or ("claim", c.id) in previous]


def _names_in(text: str, names: Iterable[str]) -> bool:
    low = text.casefold()
    return any(
        n.strip() and re.search(r"(?<!\w)" + re.escape(n.casefold()) + r"(?!\w)", low)
        for n in names
    )


def _entities(
    store: Store,
    query: str,
    convs: Sequence[str],
    claims: Sequence[Candidate],
    previous: frozenset[tuple[str, str]],
    at: datetime,
    config: ContextConfig,
) -> tuple[list[Candidate], list[Candidate]]:
    """Dossiers of the most relevant entities, briefs of the rest that bear on the turn.

    An entity named in the query is fully relevant; one named by a relevant
    claim half so; others appear only if last turn showed them.
    """
    relevant = [c for c in sorted(claims, key=lambda c: -c.relevance)[:10] if c.relevance > 0]
    ranked: list[tuple[Candidate, Entity]] = []
    for cid in convs:
        for e in store.list_entities(cid, None, None, 200):
            names = (e.name, *e.aliases)
            r = 1.0 if _names_in(query, names) else 0.0
            if not r and any(c.conversation == cid and _names_in(c.text, names) for c in relevant):
                r = 0.5
            shown = {("dossier", str(e.id)), ("brief", str(e.id))} & previous
            if not r and not shown:
                continue
            cand = Candidate(
                "dossier",
                str(e.id),
                "",
                relevance=r,
                importance=min(e.mentions, 10) / 10,
                when=e.last_seen,
                conversation=cid,
            )
            ranked.append((cand, e))
    ranked.sort(key=lambda ce: score(ce[0], at, previous, config), reverse=True)
    dossiers: list[Candidate] = []
    briefs: list[Candidate] = []
    for cand, e in ranked:
        dossier = store.entity_dossier(e.id) or ""  # type: ignore[arg-type]
        if dossier and cand.relevance >= config.dossier_relevance:
            if len(dossiers) < config.max_dossiers:
                dossiers.append(_entity_text(cand, e, dossier))
                continue
        if len(briefs) < config.max_briefs and (e.brief or dossier):
            briefs.append(replace(_entity_text(cand, e, e.brief or dossier), kind="brief"))
    return dossiers, briefs


def _entity_text(cand: Candidate, e: Entity, text: str) -> Candidate:
    head = f"{e.name} ({e.kind}, as {e.owner} tells it)"
    return replace(cand, text=f"{head}: {text}", body=text)  # two entities, one story: once


def _messages(
    store: Store,
    hits: Sequence[Hit],
    log: Sequence[Message],
    at: datetime,
    config: ContextConfig,
    found: Mapping[tuple[str, str], tuple[Message, float]] = {},
    turn: Iterable[str] = (),
) -> list[Candidate]:
    """The last turns (by ``at``) of the conversation asked in (``log``, in order; empty
    without one), the messages search found relevant, and the turns ``found`` through
    their claims (with that relevance); a long one not among the last turns cut to the
    sentences bearing on the ``turn``'s words (``excerpt``)."""
    msgs = {key: m for key, (m, _) in found.items()}
    msgs |= {(h.message.conversation, h.message.id): h.message for h in hits}
    tail = [m for m in log if m.timestamp <= at]
    tail = tail[max(0, len(tail) - config.recent_messages) :]
    msgs |= {(m.conversation, m.id): m for m in tail}
    last = {(m.conversation, m.id) for m in tail[max(0, len(tail) - config.keep_last) :]}
    rel = {key: r for key, (_, r) in found.items()}
    cut = ({stem(w) for w in turn}, config.excerpt_words) if config.excerpt_words else None
    return _message_candidates(store, list(msgs.values()), hits, last, at, rel, cut)


def _message_candidates(
    store: Store,
    messages: Sequence[Message],
    hits: Sequence[Hit],
    last: set[tuple[str, str]],
    at: datetime,
    found: Mapping[tuple[str, str], float] = {},
    cut: tuple[set[str], int] | None = None,
) -> list[Candidate]:
    """``messages`` as candidates: relevance from ``hits`` (or ``found`` through a
    claim, the higher); a line whose claims all no longer hold at ``at`` marked as
    history; the ``last`` turns pinned; a short reply carrying the question it answers.
    ``cut``: (the turn's stems, words): a longer message but a last turn carries its
    ``excerpt``, shown where the whole line does not fit."""
    top = max((h.score for h in hits), default=0.0) or 1.0
    rel = dict(found)
    for h in hits:
        key = (h.message.conversation, h.message.id)
        rel[key] = max(rel.get(key, 0.0), h.score / top)
    msgs = {(m.conversation, m.id): m for m in messages}
    asked = _asked(store, messages)
    every = msgs | {(q.conversation, q.id): q for q in asked.values()}
    said = as_known_by(store, store.claims_for_message_ids(every), at)
    ended = {key: no_longer_holds(said.get(key, ()), at) for key in every}
    everyone = {c: store.participants(c) or [] for c, _ in every}

    def candidate(m: Message) -> Candidate:
        key = (m.conversation, m.id)
        line = message_line(m, everyone[m.conversation])
        short = excerpt(line, *cut) if cut is not None and key not in last else line
        if ended[key] is not None:
            line, short = history_line(line, ended[key]), history_line(short, ended[key])
        return Candidate(
            "message",
            f"{m.conversation}/{m.id}",
            line,
            excerpt=short if short != line else "",
            relevance=rel.get(key, 0.0),
            when=m.timestamp,
            conversation=m.conversation,
            skippable=key not in last,
            body=m.indexed_text(),
            pinned=key in last,
            evidence=frozenset({key}),
            reply=m.role == "assistant",
        )

    return [
        replace(candidate(m), prompt=candidate(asked[key]) if key in asked else None)
        for key, m in msgs.items()
    ]


def _asked(store: Store, messages: Sequence[Message]) -> dict[tuple[str, str], Message]:
    """The question each short reply among ``messages`` answers: the message just
    before it, by someone else, asking something ("How many kids?" → "Two of them.")."""
    by_seq = {(m.conversation, m.seq): m for m in messages}
    out: dict[tuple[str, str], Message] = {}
    for m in messages:
        if len(m.text.split()) > REPLY_WORDS:
            continue
        before = by_seq.get((m.conversation, m.seq - 1)) or store.message_before(
            m.conversation, m.seq
        )
        if follows_question(m, before):
            out[(m.conversation, m.id)] = before
    return out


def _with_usefulness(store: Store, cands: Sequence[Candidate]) -> list[Candidate]:
    """The candidates (of one kind) with their usefulness scores (0.5 for items never scored)."""
    if not cands:
        return []
    scores = usefulness(store, cands[0].kind, [c.id for c in cands])
    return [
        c if c.usefulness == scores[c.id] else replace(c, usefulness=scores[c.id]) for c in cands
    ]


def usefulness(store: Store, kind: str, ids: Iterable[str | int]) -> dict[str | int, float]:
    """How useful each item turned out to be: (used + 1) / (shown + 2); 0.5 if never scored."""
    wanted = list(ids)
    scores = store.usefulness_scores(kind, wanted)
    return {i: scores.get(i, 0.5) for i in wanted}
