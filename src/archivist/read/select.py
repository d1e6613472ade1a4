"""Memory views: which stored messages a person's memory should hold.

A ``View`` is frozen data naming which messages count (sent by the person,
sent to them, system messages, request/response pairs); ``select`` reads the
log through it, optionally keeps only messages matching plain-language
criteria (``memorize_to``) and caps the result (``at_most``). Selection only
reads: a view never changes the stored log.

System messages and caps: system messages (role ``system``) do not count
against ``at_most`` and are never dropped by it; they frame every exchange
after them. Criteria (``memorize_to``) do filter them like any other message.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..errors import InputError
from ..lang.text import person_key
from ..llm.base import LLMError
from ..model import Message
from ..prompts import select as select_prompt
from .recall import search_memory

if TYPE_CHECKING:
    from ..core import Core
    from ..llm.base import ChatModel


@dataclass(frozen=True)
class View:
    """Which of the log's messages a person's memory holds."""

    name: str
    sent: bool = False  # messages the person sent
    received: bool = False  # messages addressed to the person
    system: bool = False  # system messages of the person's conversations
    pairs: bool = False  # only request/response pairs the person took part in


ALL_INVOLVING = View("all_involving", sent=True, received=True, system=True)
SENT_BY_ME = View("sent_by_me", sent=True)
SENT_TO_ME = View("sent_to_me", received=True)
SYSTEM_AND_ME = View("system_and_me", sent=True, system=True)
REQUEST_RESPONSE = View("request_response", system=True, pairs=True)
GOLDFISH = View("goldfish")  # no memory at all

VIEWS: dict[str, View] = {
    v.name: v
    for v in (ALL_INVOLVING, SENT_BY_ME, SENT_TO_ME, SYSTEM_AND_ME, REQUEST_RESPONSE, GOLDFISH)
}


@dataclass(frozen=True)
class SelectConfig:
    """How criteria are judged: LLM batch size; retrieval depth and score threshold."""

    batch: int = 40  # messages per LLM prompt
    retrieve_k: int = 50  # hits asked of search per conversation
    min_share: float = 0.8  # no keyword hit at all: keep scores >= share × the best


DEFAULT_SELECT = SelectConfig()


@dataclass(frozen=True)
class Selection:
    """The selected messages in conversation order, and how they were chosen."""

    messages: tuple[Message, ...]
    view: str
    method: str  # "view", "llm:<model>", "retrieval", "retrieval (llm failed: …)"
    candidates: int = 0  # messages the view offered before criteria and caps
    dropped_aliases: int = 0  # out-of-range aliases the model returned (ignored)

    def __iter__(self) -> Iterator[Message]:
        return iter(self.messages)

    def __len__(self) -> int:
        return len(self.messages)

    def __getitem__(self, i: int) -> Message:
        return self.messages[i]


def get_view(name: str | View) -> View:
    """A view by name (``all_involving``, ``goldfish``, …); a View passes through."""
    if isinstance(name, View):
        return name
    if not isinstance(name, str) or name not in VIEWS:
        shown = repr(name)[:60]
        raise InputError(f"unknown view {shown}; choose one of {', '.join(VIEWS)}")
    return VIEWS[name]


# -- views: pure functions over one conversation's messages --------------------------


def _is_mine(m: Message, key: str, view: View) -> bool:
    if m.role == "system":
        return view.system
    sent = person_key(m.speaker) == key
    received = key in {person_key(a) for a in m.addressees}
    return (view.sent and sent) or (view.received and received)


def _involves(m: Message, key: str) -> bool:
    return person_key(m.speaker) == key or key in {person_key(a) for a in m.addressees}


def _answers(first: Message, second: Message) -> bool:
    """Is ``second`` a reply to ``first``: another speaker, and one addressed the other?"""
    a, b = person_key(first.speaker), person_key(second.speaker)
    return a != b and (
        b in {person_key(x) for x in first.addressees}
        or a in {person_key(x) for x in second.addressees}
    )


def request_pairs(messages: Sequence[Message], key: str) -> list[tuple[Message, Message]]:
    """Non-overlapping (request, response) pairs the person took part in, in order."""
    turns = [m for m in messages if m.role != "system"]
    out: list[tuple[Message, Message]] = []
    i = 0
    while i < len(turns) - 1:
        first, second = turns[i], turns[i + 1]
        if _answers(first, second) and (_involves(first, key) and _involves(second, key)):
            out.append((first, second))
            i += 2
        else:
            i += 1
    return out


def view_messages(messages: Sequence[Message], person: str, view: View) -> list[Message]:
    """The messages of one conversation that ``view`` admits for ``person``, in order."""
    key = person_key(person)
    ordered = sorted(messages, key=lambda m: m.seq)
    if not any(_involves(m, key) for m in ordered):
        return []  # not the person's conversation: its system messages are not theirs either
    if view.pairs:
        keep = {id(m) for pair in request_pairs(ordered, key) for m in pair}
        return [m for m in ordered if id(m) in keep or (view.system and m.role == "system")]
    return [m for m in ordered if _is_mine(m, key, view)]


def cap(
    messages: Sequence[Message], at_most: int, rank: dict[tuple[str, str], float] | None = None
) -> list[Message]:
    """Keep the ``at_most`` best non-system messages (most recent without ``rank``).

    System messages are kept and not counted. A request/response pair is kept
    or dropped whole when both halves are present (pairs share the better score).
    """
    others = [m for m in messages if m.role != "system"]
    if len(others) <= at_most:
        return list(messages)

    def score(m: Message) -> tuple:
        r = rank.get((m.conversation, m.id), 0.0) if rank else 0.0
        return (r, m.timestamp, m.seq)

    chosen: set[tuple[str, str]] = set()
    for m in sorted(others, key=score, reverse=True):
        if len(chosen) < at_most:
            chosen.add((m.conversation, m.id))
    return [m for m in messages if m.role == "system" or (m.conversation, m.id) in chosen]


def cap_pairs(
    messages: Sequence[Message],
    pairs: Sequence[tuple[Message, Message]],
    at_most: int,
    rank: dict[tuple[str, str], float] | None = None,
) -> list[Message]:
    """``cap`` for request/response views: whole pairs, at most ``at_most`` messages."""
    key = lambda m: (m.conversation, m.id)  # noqa: E731
    present = {key(m) for m in messages}
    whole = [p for p in pairs if key(p[0]) in present and key(p[1]) in present]

    def score(p: tuple[Message, Message]) -> tuple:
        r = max(rank.get(key(m), 0.0) for m in p) if rank else 0.0
        return (r, p[1].timestamp, p[1].seq)

    chosen: set[tuple[str, str]] = set()
    for p in sorted(whole, key=score, reverse=True):
        if len(chosen) + 2 <= at_most:
            chosen.update(key(m) for m in p)
    return [m for m in messages if m.role == "system" or key(m) in chosen]


# -- criteria: an LLM over aliases, or retrieval over the criteria text --------------


def judge_with_llm(
    core: Core,
    llm: ChatModel,
    criteria: str,
    candidates: Sequence[Message],
    config: SelectConfig = DEFAULT_SELECT,
) -> tuple[list[Message], int]:
    """The candidates the model says match ``criteria``, and how many aliases were out of range.

    Candidates go to the model in batches under aliases 1..n (never raw ids).
    """
    kept: list[Message] = []
    dropped = 0
    for i in range(0, len(candidates), config.batch):
        batch = list(candidates[i : i + config.batch])
        prompt = select_prompt.build(criteria, batch)
        out = core.llm_call(select_prompt, prompt, select_prompt.SelectOut, model=llm)
        valid = sorted({a for a in out.matches if 1 <= a <= len(batch)})
        dropped += len(set(out.matches)) - len(valid)
        kept += [batch[a - 1] for a in valid]
    return kept, dropped


def rank_by_retrieval(
    core: Core,
    criteria: str,
    candidates: Sequence[Message],
    config: SelectConfig = DEFAULT_SELECT,
) -> dict[tuple[str, str], float]:
    """(conversation, id) -> score of the candidates that search over ``criteria`` finds.

    Per conversation, search is restricted to it. Dense rankers rank every
    message, so a rank alone says little: candidates sharing a word with the
    criteria (keyword hits) are kept; only when none does, those whose fused
    score reaches ``min_share`` of the conversation's best.
    """
    wanted = {(m.conversation, m.id) for m in candidates}
    out: dict[tuple[str, str], float] = {}
    for cid in dict.fromkeys(m.conversation for m in candidates):
        hits = search_memory(core, criteria, conversation=cid, k=config.retrieve_k)
        mine = [h for h in hits if (h.message.conversation, h.message.id) in wanted]
        if not mine:
            continue
        keyword = [h for h in mine if "bm25" in h.sources]
        best = max(h.score for h in mine)
        kept = keyword or [h for h in mine if h.score >= config.min_share * best]
        out |= {(h.message.conversation, h.message.id): h.score for h in kept}
    return out


# -- the selection -------------------------------------------------------------------


def candidates_for(
    core: Core, person: str, view: View, conversation: str | None = None
) -> list[Message]:
    """What ``view`` admits for ``person`` across the log (or one conversation); reads only."""
    if not isinstance(person, str) or not person.strip():
        raise InputError("select() needs a person's name")
    if view == GOLDFISH:
        return []
    store = core.store
    convs = [conversation] if conversation is not None else [c["id"] for c in store.conversations()]
    out: list[Message] = []
    for cid in convs:
        msgs = [m for _, m in store.conversation_messages(cid)]
        out += view_messages(msgs, person, view)
    return out


def select(
    core: Core,
    person: str,
    view: View | str = ALL_INVOLVING,
    *,
    conversation: str | None = None,
    memorize_to: str | None = None,
    at_most: int | None = None,
    llm: ChatModel | None = None,
    config: SelectConfig = DEFAULT_SELECT,
) -> Selection:
    """The messages ``person``'s memory holds under ``view``, criteria and cap, in log order.

    With ``llm`` the criteria are judged by the model; without, by retrieval
    over the criteria text. A failed model call falls back to retrieval and
    says so in ``method``.
    """
    view = get_view(view)
    if at_most is not None and (not isinstance(at_most, int) or at_most < 0):
        raise InputError(f"at_most must be a non-negative integer; got {at_most!r}")
    found = candidates_for(core, person, view, conversation)
    n, method, dropped = len(found), "view", 0
    rank: dict[tuple[str, str], float] | None = None
    if memorize_to is not None and memorize_to.strip() and found:
        kept: list[Message] | None = None
        if llm is not None:
            try:
                kept, dropped = judge_with_llm(core, llm, memorize_to, found, config)
                method = f"llm:{llm.name}"
            except LLMError as e:
                method = f"retrieval (llm failed: {e})"
        if kept is None:
            rank = rank_by_retrieval(core, memorize_to, found, config)
            method = "retrieval" if method == "view" else method
            kept = [m for m in found if (m.conversation, m.id) in rank]
        keys = {(m.conversation, m.id) for m in kept}
        found = (
            _keep_whole_pairs(found, keys, person)
            if view.pairs
            else [m for m in found if (m.conversation, m.id) in keys]
        )
    if at_most is not None:
        if view.pairs:
            found = cap_pairs(found, _pairs_of(found, person), at_most, rank)
        else:
            found = cap(found, at_most, rank)
    return Selection(tuple(found), view.name, method, candidates=n, dropped_aliases=dropped)


def _pairs_of(messages: Sequence[Message], person: str) -> list[tuple[Message, Message]]:
    key = person_key(person)
    by_conv: dict[str, list[Message]] = {}
    for m in messages:
        by_conv.setdefault(m.conversation, []).append(m)
    return [p for msgs in by_conv.values() for p in request_pairs(msgs, key)]


def _keep_whole_pairs(
    messages: Sequence[Message], keys: set[tuple[str, str]], person: str
) -> list[Message]:
    """A pair is kept whole when either half matched; system messages only if they matched."""
    keep = set(keys)
    for a, b in _pairs_of(messages, person):
        if (a.conversation, a.id) in keys or (b.conversation, b.id) in keys:
            keep |= {(a.conversation, a.id), (b.conversation, b.id)}
    return [m for m in messages if (m.conversation, m.id) in keep]
