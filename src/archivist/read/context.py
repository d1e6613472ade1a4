"""Context for one assistant turn, assembled within a token budget.

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
(``score``, ``pack``, in read/context_pack.py).

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

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import TYPE_CHECKING

from ..errors import InputError
from ..lang.query import names_in
from ..lang.text import person_key, query_terms, share_in, stem
from ..lang.timeground import spoken_day
from ..model import Claim, Entity, Hit, Message, Person, Summary, text_problem
from ..store.sql import Filters
from .context_lines import (
    Candidate,
    bearing_on,
    claim_line,
    days_once,
    excerpt,
    fragments_as_turns,
    in_request,
    message_line,
    same_text,
    turn_words,
    without,
)
from .context_pack import (  # the pure half, named here too for callers of this module
    DEFAULT_CONTEXT,
    SECTIONS,
    Context,
    ContextConfig,
    ContextItem,
    estimate_tokens,
    pack,
    previous_keys,
    score,
)
from .history import Bygones, bygones, history_line, no_longer_holds
from .links import as_known, as_known_by
from .recall import MAX_K, search_memory
from .replies import REPLY_WORDS, follows_question
from .standing import standing, unreached

if TYPE_CHECKING:
    from ..core import Core
    from ..store.base import Store

# -- gathering candidates: reads only ---------------------------------------------------

SCOPE = 3  # conversations whose summaries, entities and claims a context draws on


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
    query = question_or_turn or ""
    own = _reachable(core, person, conversation, budget_tokens, config)
    if own is not None:
        # no search can reach beyond these conversations: when their every message
        # fits, that is the context, and nothing is searched (a query's embedding and
        # search are most of a turn's context time)
        log = _whole(core, own, (), at, config, budget_tokens, request)
        if log is not None:
            return pack({"log": log}, budget_tokens, at, prev, config)
    found = _found(core, query, person, conversation, at, config, budget_tokens, own or {})
    if own is None or list(own) != found.convs:
        log = _whole_found(core, found, conversation, at, config, budget_tokens, request)
        if log is not None:
            # everything memory holds of the scope fits: the rest would be read for nothing
            return pack({"log": log}, budget_tokens, at, prev, config)
    sections = gather(core, query, person, conversation, at, prev, config, found)
    if request:
        sections = without(sections, request, config.covered_share)
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


@dataclass(frozen=True)
class Found:
    """What a turn's context starts from: its search hits, whose key info to show, the
    conversations in scope (the first three), their logs and what no longer holds in
    them (read once, for the whole log or for the sections)."""

    hits: list[Hit]
    persons: list[Person]
    convs: list[str]
    logs: dict[str, list[Message]]
    past: Bygones


def _found(
    core: Core,
    query: str,
    person: str | None,
    conversation: str | None,
    at: datetime,
    config: ContextConfig,
    budget: int,
    read: Mapping[str, list[Message]] = {},
) -> Found:
    """Search hits and what they reach; ``read``: conversations' logs read already."""
    store = core.store
    # a budget of 40,000 tokens asks for no more hits than one search returns
    k = min(MAX_K, max(config.search_k, budget // config.tokens_per_hit))
    hits = _hits(core, query, person, conversation, at, config, k)
    persons = _persons(store, person, conversation)
    convs = _scope(conversation, persons, hits)
    logs = {
        cid: read[cid] if cid in read else [m for _, m in store.conversation_messages(cid)]
        for cid in convs
    }
    said = [h.message for h in hits]
    return Found(hits, persons, convs, logs, bygones(store, convs, at, said))


def _reachable(
    core: Core,
    person: str | None,
    conversation: str | None,
    budget: int,
    config: ContextConfig,
) -> dict[str, list[Message]] | None:
    """The logs of every conversation a search scoped to ``person`` or ``conversation``
    can reach, when they are few (at most ``SCOPE``) and the person's messages may
    fit ``budget``; else None (then only a search tells which conversations count).
    Read once: the search path reuses them."""
    if not config.whole_history:
        return None
    store = core.store
    most = budget // config.min_line_tokens
    if conversation is not None:
        convs = [conversation]
    elif person is not None and core.takes_part(person):
        theirs = store.conversations_of(person, most)
        if theirs is None:
            return None
        persons = _persons(store, person, None)
        convs = list(dict.fromkeys([c for p in persons for c, _ in p.identities] + theirs))
    else:
        return None  # an unscoped search reaches every conversation
    if len(convs) > SCOPE:
        return None
    return {cid: [m for _, m in store.conversation_messages(cid)] for cid in convs}


def _whole_found(
    core: Core,
    found: Found,
    conversation: str | None,
    at: datetime,
    config: ContextConfig,
    budget: int,
    request: Sequence[Message],
) -> list[Candidate] | None:
    """``_whole`` of the conversations search reached, when those are all it reaches."""
    if not config.whole_history:
        return None
    if _scope(conversation, found.persons, found.hits, cap=None) != found.convs:
        return None
    return _whole(core, found.logs, found.hits, at, config, budget, request, found.past)


def _whole(
    core: Core,
    logs: Mapping[str, Sequence[Message]],
    hits: Sequence[Hit],
    at: datetime,
    config: ContextConfig,
    budget: int,
    request: Sequence[Message],
    past: Bygones | None = None,
) -> list[Candidate] | None:
    """Every message of ``logs`` said by ``at`` but the ``request``'s, as the "log"
    section (relevance from ``hits``), when its lines fit the budget; else None.

    What no longer holds is read from the conversations' claims and from these
    messages (``past`` when given), since they are all shown. A lower bound of
    the lines' cost (speaker and words, no date) is checked first, so a history
    that cannot fit is not dated, marked and costed line by line.
    """
    whole = sorted(
        (m for log in logs.values() for m in log if m.timestamp <= at),
        key=lambda m: (m.timestamp, m.seq),
    )
    if len(whole) * config.min_line_tokens > budget:
        return None
    keys, texts = in_request(request)
    kept = [
        m
        for m in whole
        if (m.conversation, m.id) not in keys and same_text(m.indexed_text()) not in texts
    ]
    least = sum(
        estimate_tokens(f"- {m.speaker}: {m.indexed_text()}", config.tokens_per_word) for m in kept
    )
    if least > budget:
        return None
    store = core.store
    past = past or bygones(store, list(logs), at, whole)
    log = _message_candidates(store, whole, hits, set(), at)
    log = _with_usefulness(store, [_marked(c, past) for c in log])
    if request:
        log = without({"log": log}, request, config.covered_share)["log"]
    return log if whole_cost(log, config) <= budget else None


def gather(
    core: Core,
    query: str,
    person: str | None,
    conversation: str | None,
    at: datetime,
    previous: frozenset[tuple[str, str]],
    config: ContextConfig,
    found: Found,
) -> dict[str, list[Candidate]]:
    """Every section's candidates but the whole log, with their ranking signals
    (usefulness from the store)."""
    store = core.store
    hits, persons, convs, logs, past = (
        found.hits,
        found.persons,
        found.convs,
        found.logs,
        found.past,
    )
    people = core.people()
    claims = _claims(store, query, hits, person, convs, at, previous, config, people)
    dossiers, briefs = _entities(store, query, convs, claims, previous, at, config)
    if any(m.timestamp > at for log in logs.values() for m in log):
        # a turn replayed from the past: key info, dossiers and briefs are current
        # snapshots, not histories, and may tell what was learned after ``at``
        persons, dossiers, briefs = [], [], []
    turns = {(m.conversation, m.id): m for log in logs.values() for m in log}
    claims, found = fragments_as_turns(claims, turns, config.covered_share)
    key_info = _key_info(
        store, query, persons, person if config.own_key_info else None, convs, people
    )
    sections = {
        "key_info": key_info,
        "standing": (
            unreached(standing(core, query, persons, at), hits, claims)
            if config.standing and person is not None  # the requester's, for their turn
            else []
        ),
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
    if config.early_relevance:
        sections = bearing_on(sections, query, people)
    return {
        kind: _with_usefulness(store, [_marked(c, past) for c in cands])
        for kind, cands in sections.items()
    }


def _key_info(
    store: Store,
    query: str,
    persons: Sequence[Person],
    person: str | None,
    convs: Sequence[str],
    people: Sequence[str],
) -> list[Candidate]:
    """The key info of whose turn it is (``person``: pinned, first) and of the people the
    turn names who take part in the conversations in scope; without a requester, of
    the people of the scope (``persons``)."""
    about = list(persons)
    named = {person_key(n) for n in names_in(query, people)} if person is not None else set()
    if named:
        about += [
            p
            for p in store.persons()
            if p not in about
            and any(person_key(n) in named and c in convs for c, n in p.identities)
        ]
    own = {p.id for p in persons} if person is not None else set()
    return [
        Candidate("key_info", p.id, f"{p.name}: {text}", pinned=p.id in own)
        for p in about
        if (text := store.person_key_info(p.id))
    ]


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
    cap: int | None = SCOPE,
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
    everyone = {c: store.participants(c) or [] for c in {c for c, _ in every}}

    def candidate(m: Message) -> Candidate:
        key = (m.conversation, m.id)
        starts = sorted({c.valid_from for c in said.get(key, ()) if c.valid_from is not None})
        line = message_line(m, everyone[m.conversation], tuple(starts))
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
        if key in last or not _filler(m, said.get(key, ()))
    ]


def _filler(m: Message, claims: Sequence[Claim]) -> bool:
    """An assistant's line the judge found only small talk in ("Sounds lovely, tell me
    more."): it tells the next turn nothing, so it is no memory to show."""
    return m.role == "assistant" and bool(claims) and all(c.kind == "chatter" for c in claims)


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
