"""Context assembly's pure half: the item types, their ranking and packing into a budget.

``read/context.py`` gathers candidates from the store and calls ``pack`` here: the
sections filled in order within the budget, each line fitted (a long turn shown as
the sentences the turn bears on, else cut and saying so), nothing shown twice,
each day written once in a section in time order. Nothing here reads the store.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

from ..lang.text import ECHO_SHARE, query_terms, share_in
from ..model import TOKENS_PER_WORD, estimate_tokens
from .context_lines import Candidate, day_of, days_once, in_key_info, same_text
from .history import HISTORY_MARK
from .sentences import SENTENCE_BREAK

SECTIONS: tuple[tuple[str, str], ...] = (
    ("key_info", "Key info"),
    ("standing", "Values, goals, lessons and standing states"),
    ("summary", "Summaries"),
    ("dossier", "Entities"),
    ("brief", "Other entities"),
    ("claim", "Claims"),
    ("message", "Messages"),
    ("log", "Earlier messages, oldest first"),  # the whole history, when it fits
)
# capped, and never eat the reserves
EARLY = ("key_info", "standing", "summary", "dossier", "brief")
RANKED = ("standing", "dossier", "brief", "claim", "message")  # chosen by score
IN_TIME_ORDER = ("claim", "message", "log")  # shown oldest first once chosen
CLAIMS = ("claim", "standing")  # items that are claims: one line per turn with messages


@dataclass(frozen=True)
class ContextConfig:
    """Budget shares, ranking weights and candidate counts of context assembly."""

    tokens_per_word: float = TOKENS_PER_WORD
    caps: tuple[tuple[str, float], ...] = (
        ("key_info", 0.05),  # the key info of the people a turn names, cut to what it asks
        ("standing", 0.15),
        ("summary", 0.25),
        ("dossier", 0.15),
        ("brief", 0.05),
    )
    # the requester's own key info (the person model's head, best first) has this share
    # more, up to ``own_key_info_tokens``: what the assistant should know at all times
    # (0: the requester's key info is shown as anyone's, cut to what the turn asks)
    own_key_info: float = 0.25
    own_key_info_tokens: int = 250
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
    standing: bool = True  # the requester's values, goals, lessons and states, by meaning
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
    # ranked sections choose by score / tokens ** this: a line's worth per token of the
    # budget, mildly. LoCoMo evidence recall at 250/500/1,000/1,500 tokens on one store,
    # 0 -> 0.25: 0.693/0.784/0.850/0.878 -> 0.703/0.782/0.852/0.880 (0.2: 0.849 at
    # 1,000; 0.3 lost the demo's dated diet line to short filler with the fake embedder)
    cost_weight: float = 0.25

    def weight(self, name: str) -> float:
        return dict(self.weights)[name]


DEFAULT_CONTEXT = ContextConfig()


@dataclass(frozen=True)
class ContextItem:
    """One line shown to the assistant: what it is, its id, its text, its cost and score."""

    kind: str  # key_info, standing, summary, dossier, brief, claim, message
    id: str  # person id, summary id, entity id, claim id (standing too), or "conv/message id"
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
    # a line marked history keeps its mark when it is cut: cut short, it must not read as
    # what holds now ("…pescatarian for years … [cut] [history] (no longer holds from…)")
    mark = ""
    if HISTORY_MARK in line:
        at = line.index(HISTORY_MARK)
        tail = line[at:]
        mark = " " + (tail if len(tail.split()) <= 12 else HISTORY_MARK)
        line = line[:at]
    words = line.split()
    n = int(room / config.tokens_per_word) - 1
    if n < config.min_fit_words:
        return None
    while n >= config.min_fit_words:
        cut = " ".join(words[:n]) + f" … {CUT}" + mark
        if estimate_tokens(cut, config.tokens_per_word) <= room:
            return cut
        n -= 1
    return None


def _fit_sentences(line: str, room: int, config: ContextConfig) -> str | None:
    """``line`` if it fits in ``room`` tokens, else its first sentences that do (key info
    is written best first, a fact a sentence), else None: never a fact cut short."""
    if estimate_tokens(line, config.tokens_per_word) <= room:
        return line
    parts = SENTENCE_BREAK.split(line)
    while len(parts) > 1:
        parts.pop()
        head = " ".join(parts)
        if estimate_tokens(head, config.tokens_per_word) <= room:
            return head
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
    if c.kind in CLAIMS and c.evidence and c.evidence <= pinned:
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


def _allowances(budget: int, config: ContextConfig, own: bool = False) -> dict[str, float]:
    """Each section's cap in tokens; ``own``: the requester's key info is among them."""
    caps = {k: share * budget for k, share in config.caps}
    if own:
        caps["key_info"] += min(config.own_key_info * budget, config.own_key_info_tokens)
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
    if kind == "key_info":  # its head: the best of it, whole facts only
        line = _fit_sentences(f"- {rest}", int(room - most), config)
    else:
        line = _fit(f"- {rest}", int(room - most), config, cut=kind != "standing")
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
    told: set[tuple[str, str]] = field(default_factory=set)  # (kind, id) key info says

    def again(self, c: Candidate, config: ContextConfig) -> bool:
        """Would ``c`` show what is shown (``_says_again``), or a summary of spanned sessions,
        or a claim the requester's key info says (``told``)?"""
        if (c.kind, c.id) in self.told:
            return True
        if c.kind == "summary" and c.covers and c.covers <= self.spanned.get(c.conversation, set()):
            return True
        if c.kind in CLAIMS and c.evidence and c.evidence <= self.turns:
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
        if c.kind in CLAIMS and len(c.evidence) == 1:
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
    ("standing",),
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
    caps = _allowances(budget, config, any(c.pinned for c in sections.get("key_info", ())))
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
            per = config.cost_weight
            cands.sort(
                key=lambda cs: (
                    cs[0].pinned,
                    cs[1] / max(1, estimate_tokens(cs[0].text)) ** per if per else cs[1],
                    cs[0].when or at,
                ),
                reverse=True,
            )
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
        if "key_info" in filling:
            _told(shown, filling["key_info"], sections)
    return Context("\n\n".join(blocks), tuple(items), used, budget)


def _told(shown: _Shown, section: _Section, sections: Mapping[str, Sequence[Candidate]]) -> None:
    """The claims (and standing items) the requester's key info, as shown, says, and the
    turns of those that stand for one: each is shown there, one line each."""
    own = " ".join(line for c, _, line in section.chosen if c.pinned)
    if not own:
        return
    for c in (c for kind in CLAIMS for c in sections.get(kind, ())):
        if in_key_info(c.body or c.text, own):
            shown.told.add((c.kind, c.id))
            if len(c.evidence) == 1:
                shown.claimed |= c.evidence


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
