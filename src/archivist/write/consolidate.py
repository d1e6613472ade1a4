"""Consolidation jobs: the handlers the durable job queue calls.

Each handler is ``run_<kind>(core, payload) -> dict`` (jobs.py names them in its
registry): it returns counts, or
``{"skipped": reason}`` when there is nothing to do. All are idempotent: a
second run over unchanged data writes no row, because every output carries a
hash of its inputs and is rewritten only when that hash changes. With a model
(``core.llm``) texts are written by it; any LLM failure falls back to the
heuristic for that item and is counted, never raised.

    scenes      episodes clustered by theme and time            (write/scenes.py)
    summaries   session summaries rolled up in levels            (write/summaries.py)
    dossiers    capped summary of each entity's current claims
    key_info    capped digest of each person's profile: what holds for them, dated
    usefulness  was each context item shown for a turn used by the reply?
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from ..lang.attributes import attribute_of
from ..lang.text import normalised, query_terms
from ..lang.timeground import last_day
from ..model import TOKENS_PER_WORD, Claim, content_hash, estimate_tokens
from ..profile import (
    ASSISTANT_SOURCE,
    FIRST_HAND,
    GROUPS,
    MODEL_HEAD,
    Entry,
    Link,
    build_profile,
    in_model,
)
from ..prompts import dossier as dossier_prompt
from ..prompts import key_info as key_info_prompt
from ..prompts import usefulness as usefulness_prompt
from .condense import (
    ELLIPSIS,
    Asker,
    Counts,
    LLMPolicy,
    claims_hash,
    llm_session,
    newest_important,
    pack_texts,
    select_claims,
    sentence,
    trim,
)
from .scenes import DEFAULT_SCENES, SceneConfig, run_scenes
from .summaries import DEFAULT_SUMMARIES, SummaryConfig, run_summaries

if TYPE_CHECKING:
    from ..core import Core

__all__ = [
    "DEFAULT_SCENES",
    "DEFAULT_SUMMARIES",
    "DigestConfig",
    "LLMPolicy",
    "SceneConfig",
    "SummaryConfig",
    "UsefulnessConfig",
    "reply_uses",
    "run_dossiers",
    "run_key_info",
    "run_scenes",
    "run_summaries",
    "run_usefulness",
]


@dataclass(frozen=True)
class DigestConfig:
    """Caps of an entity dossier or a person's key info, and how many claims a model sees."""

    cap: int  # characters
    llm_claims: int = 60  # highest-priority claims shown to the model
    llm: LLMPolicy = LLMPolicy()
    tokens: int = 0  # a cap in estimated tokens as well (model.estimate_tokens); 0: none


@dataclass(frozen=True)
class KeyInfoRank:
    """How a person's key info ranks what it could say (each 0..1, weighted): what the
    person's claim was rated (importance, emotional salience), how recent it is, how
    useful it proved in contexts (usefulness), and whether it is part of the person
    model (a goal, a value, a lesson, ... said once and meant for months)."""

    importance: float = 0.35
    salience: float = 0.1
    recency: float = 0.2
    usefulness: float = 0.15
    standing: float = 0.2
    half_life_days: float = 90.0


DOSSIER = DigestConfig(cap=400)
KEY_INFO = DigestConfig(cap=1200, tokens=250)
KEY_INFO_RANK = KeyInfoRank()


def _digest(
    name: str,
    claims: Sequence[Claim],
    prompt,
    output_type,
    field: str,
    asker: Asker,
    config: DigestConfig,
) -> str:
    """The model's capped digest of ``claims``, else the most important ones, newest first."""
    if asker.model is not None and claims:
        shown = sorted(claims, key=newest_important)[: config.llm_claims]
        shown.sort(key=lambda c: (c.said_at, c.id or 0))
        out = asker.ask(prompt, prompt.build(name, shown, config.cap), output_type)
        text = getattr(out, field, "") if out is not None else ""
        if text.strip():
            asker.counts.add("llm_written")
            return trim(text, config.cap)
    return select_claims(claims, config.cap, time_order=False, key=newest_important)


def run_dossiers(core: Core, payload: dict, config: DigestConfig = DOSSIER) -> dict:
    """Job handler: refresh the dossier of every entity whose current claims changed."""
    states = core.store.dossier_states(payload.get("conversation"))
    if not states:
        return {"skipped": "no entities"}
    claims = core.store.current_entity_claims([i for i, _, _ in states])
    subjects = [(eid, name, h, claims.get(eid, [])) for eid, name, h in states]
    counts, rows = _refresh(
        core, subjects, (dossier_prompt, dossier_prompt.DossierOut), "dossier", config
    )
    if rows:
        core.store.save_dossiers(rows)
    return counts.result(entities=len(states), dossiers_written=len(rows))


# A goal's link shown in key info, which the assistant reads as given: surer than one shown
# in a profile (profile.LINK_SURE); at 0.8 the eleventh model's links to the pairs written
# apart were right 44 of 47, 28 of 31 and 24 of 28 times, and an LLM that states no
# confidence (0.8) is shown
KEY_LINK_SURE = 0.8
PLAIN = "+plain"  # the hash mark of a key info written without the model
KEY_INFO_FORM = "ranked-1"  # in its hash: a key info written in an older form is rewritten


def key_link(e: Entry) -> Link | None:
    """The step toward a goal that key info names: its surest, when sure enough."""
    return e.serves[0] if e.serves and e.serves[0].p >= KEY_LINK_SURE else None


def run_key_info(core: Core, payload: dict, config: DigestConfig = KEY_INFO) -> dict:
    """Job handler: refresh each person's key info from their profile and person model.

    What holds for the person now, ranked (``KeyInfoRank``: importance, salience,
    recency, learned usefulness, and whether it is part of the person model), as
    much as fits the cap, each fact dated; what the assistant said about them is
    left out, and so is whatever a newer claim replaced or whose window has passed.
    Written best first, so a context with less room keeps the head of it. A key
    info is rewritten only when the facts it is made of changed (their hash), so
    refreshing after every supersession (``reconcile_written``) costs nothing
    when nothing it shows changed, and it reads the same from turn to turn.
    """
    states = core.store.key_info_states(payload.get("conversation"))
    if not states:
        return {"skipped": "no persons"}
    at = core.clock()
    # "plain": a chat too short for a round (jobs.queue_consolidation) gets the digest
    # made without a model, marked so that the next round writes the model's
    plain = bool(payload.get("plain"))
    counts, rows = Counts(), []
    with llm_session(core, counts, config.llm) as asker:
        for pid, name, old_hash, identities in states:
            facts = key_facts(core, identities, at)
            new_hash = content_hash(
                KEY_INFO_FORM,
                *(
                    f"{e.claim}:{e.text}:{e.since.isoformat()}:{e.source}"
                    + (f":{link.claim}" if (link := key_link(e)) else "")
                    for _, e in facts
                ),
            )
            if old_hash == new_hash or (plain and old_hash == new_hash + PLAIN):
                continue  # (a plain run keeps the model's digest of the same facts)
            found = core.store.claims_by_id(e.claim for _, e in facts)
            facts = ranked_facts(core, facts, found, at)
            text = ""
            if plain:
                new_hash += PLAIN
            elif asker.model is not None and facts:
                claims = [found[e.claim] for _, e in facts if e.claim in found]
                if claims:
                    text = _digest(
                        name,
                        claims,
                        key_info_prompt,
                        key_info_prompt.KeyInfoOut,
                        "key_info",
                        asker,
                        config,
                    )
            text = text or key_info_text(facts, config.cap, config.tokens)
            rows.append((pid, trim_tokens(text, config.tokens), new_hash))
    if rows:
        core.store.save_key_info(rows)
    return counts.result(persons=len(states), key_info_written=len(rows))


def key_facts(
    core: Core, identities: Sequence[tuple[str, str]], at: datetime
) -> list[tuple[str, Entry]]:
    """(group, entry) of what holds for a person at ``at``, in profile group order, newest
    first within a group: the profile of each name they go by in its conversations,
    without what the assistant said about them (an echo is not a fact about the user)."""
    by_name: dict[str, list[str]] = {}
    for conv, name in identities:
        by_name.setdefault(name, []).append(conv)
    found: dict[str, dict[int, Entry]] = {g: {} for g in GROUPS}
    for name, convs in by_name.items():
        profile = build_profile(
            core.store, name, at, read_attribute=attribute_of, conversations=convs, judge=core.judge
        )
        for group, entries in profile.groups:
            for e in entries:
                if e.source != ASSISTANT_SOURCE:
                    found[group][e.claim] = e
    return [
        (g, e)
        for g in GROUPS
        for e in sorted(found[g].values(), key=lambda e: (e.since, e.claim), reverse=True)
    ]


def ranked_facts(
    core: Core,
    facts: Sequence[tuple[str, Entry]],
    claims: Mapping[int, Claim],
    at: datetime,
    rank: KeyInfoRank = KEY_INFO_RANK,
) -> list[tuple[str, Entry]]:
    """``facts`` best first (``KeyInfoRank``; ties: the newer, then the lower claim id),
    ``claims`` their claims by id. Usefulness is what the claim's lines scored in
    contexts (as a claim or a standing item), 0.5 before any was reviewed."""
    if not facts:
        return []
    ids = [e.claim for _, e in facts]
    used: dict[int, float] = {}
    for kind in ("claim", "standing"):
        for i, u in core.store.usefulness_scores(kind, [str(i) for i in ids]).items():
            used[int(i)] = max(used.get(int(i), 0.0), u)

    def score(group: str, e: Entry) -> float:
        c = claims.get(e.claim)
        importance = c.importance / 10 if c is not None else 0.5
        salience = c.salience / 10 if c is not None else 0.5
        age = max(0.0, (at - e.since).total_seconds() / 86400)
        return (
            rank.importance * importance
            + rank.salience * salience
            + rank.recency * 0.5 ** (age / rank.half_life_days)
            + rank.usefulness * used.get(e.claim, 0.5)
            + rank.standing * in_model(e, group)
        )

    return sorted(facts, key=lambda ge: (-score(*ge), -ge[1].since.timestamp(), ge[1].claim))


def key_info_text(facts: Sequence[tuple[str, Entry]], cap: int, tokens: int = 0) -> str:
    """The facts that fit in ``cap`` characters (and ``tokens``, when given), in the order
    given, each a sentence dated in brackets ("since", or "on" for an event; "until"
    when it expires) with who reported it when not the person, headed by what it is (a
    part of the person model, "Goal: ", else its profile group, "Home: ") unless the
    one before has the same head ("Home: Zainab lives in Leyton (since 2024-06-27)."); a
    goal names the first thing the person does that serves it."""
    heads, pieces, said = [], [], set()
    for group, e in facts:
        body = sentence(e.text).rstrip(".!?")
        if normalised(body) in said:  # said in two conversations: shown once
            continue
        said.add(normalised(body))
        when = f"{'on' if e.kind == 'event' else 'since'} {e.since:%Y-%m-%d}"
        if e.until is not None and e.kind != "event":
            # its last day (ends are exclusive): a reader at a later time sees it expired
            when += f" until {last_day(e.until):%Y-%m-%d}"
        who = "" if e.source == FIRST_HAND else f"; {e.source}"
        if link := key_link(e):  # a goal: the surest step toward it
            who += f"; serving it: {sentence(link.text).rstrip('.!?')}"
        head = MODEL_HEAD[e.facet] if in_model(e, group) else ""
        heads.append(f"{head or group.capitalize()}: ")  # "other" too: never read as another
        pieces.append(f"{body} ({when}{who}).")
    # packed as if each had its head, so the heads of the kept ones always fit
    keep = sorted(pack_texts([h + p for h, p in zip(heads, pieces, strict=True)], cap))
    out: list[str] = []
    last = ""
    for i in keep:
        line = pieces[i] if heads[i] == last else heads[i] + pieces[i]
        if tokens and out and estimate_tokens(" ".join([*out, line])) > tokens:
            continue
        out.append(line)
        last = heads[i]
    return trim(" ".join(out), cap)


def trim_tokens(text: str, tokens: int) -> str:
    """``text`` cut at a word so that its estimate stays within ``tokens`` (0: as it is)."""
    if not tokens or estimate_tokens(text) <= tokens:
        return text
    words = text.split()
    n = int(tokens / TOKENS_PER_WORD)
    while n > 0 and estimate_tokens(" ".join(words[:n]) + ELLIPSIS) > tokens:
        n -= 1
    return " ".join(words[:n]).rstrip(" ,;:") + ELLIPSIS


def _refresh(
    core: Core, subjects: list, task: tuple, field: str, config: DigestConfig
) -> tuple[Counts, list[tuple]]:
    """(id, digest, claims hash) of the subjects (id, name, stored hash, claims) whose
    claims changed since their digest was written; the rest are left alone. ``task``:
    the prompt module and its output type."""
    prompt, output_type = task
    counts, rows = Counts(), []
    with llm_session(core, counts, config.llm) as asker:
        for key, name, old_hash, mine in subjects:
            new_hash = claims_hash(mine)
            if new_hash != old_hash:
                text = _digest(name, mine, prompt, output_type, field, asker, config)
                rows.append((key, text, new_hash))
    return counts, rows


# -- usefulness ---------------------------------------------------------------------------


@dataclass(frozen=True)
class UsefulnessConfig:
    """When a reply counts as having used a context item (heuristic), and batch size.

    An item is used when the reply shares at least ``min_shared`` of its content
    words (non-stopwords, archivist.lang.text.query_terms) and those make up at
    least ``min_share`` of the item's content words.
    """

    min_shared: int = 2
    min_share: float = 0.3
    batch: int = 200  # context logs reviewed per transaction
    llm: LLMPolicy = LLMPolicy()


DEFAULT_USEFULNESS = UsefulnessConfig()


def reply_uses(
    item: str, reply: str | set[str], config: UsefulnessConfig = DEFAULT_USEFULNESS
) -> bool:
    """True when ``reply`` reuses enough of ``item``'s content words (see UsefulnessConfig)."""
    terms = set(query_terms(item))
    said = reply if isinstance(reply, set) else set(query_terms(reply))
    shared = len(terms & said)
    return bool(terms) and shared >= config.min_shared and shared >= config.min_share * len(terms)


def _judge(
    items: Sequence[tuple[str, str, str]], reply: str, asker: Asker, config: UsefulnessConfig
) -> list[bool]:
    """Per item, whether the reply used it: the model's verdict, else word overlap."""
    if asker.model is not None and items:
        out = asker.ask(
            usefulness_prompt,
            usefulness_prompt.build([t for _, _, t in items], reply),
            usefulness_prompt.UsedOut,
        )
        if out is not None and all(1 <= n <= len(items) for n in out.used):
            chosen = set(out.used)
            return [n in chosen for n in range(1, len(items) + 1)]
        if out is not None:  # an alias out of range: the answer cannot be trusted
            asker.counts.add("llm_fallbacks")
            asker.counts.add("llm_out_of_range")
    said = set(query_terms(reply))
    return [reply_uses(t, said, config) for _, _, t in items]


def run_usefulness(
    core: Core, payload: dict, config: UsefulnessConfig = DEFAULT_USEFULNESS
) -> dict:
    """Job handler: score the items of unreviewed context logs by whether replies used them."""
    conversation = payload.get("conversation")
    logs = core.store.unreviewed_context(conversation, limit=config.batch)
    if not logs:
        return {"skipped": "no unreviewed context"}
    counts = Counts()
    with llm_session(core, counts, config.llm) as asker:
        while logs:
            outcomes: dict[tuple[str, str], bool] = {}
            batch: list[tuple[str, str, bool]] = []
            for _, items, reply in logs:
                outcomes.clear()
                for (kind, item_id, _), used in zip(
                    items, _judge(items, reply, asker, config), strict=True
                ):
                    outcomes[(kind, item_id)] = outcomes.get((kind, item_id), False) or used
                batch += [(k, i, u) for (k, i), u in outcomes.items()]
            core.store.record_usefulness([i for i, _, _ in logs], batch)
            counts.add("logs", len(logs))
            counts.add("items", len(batch))
            counts.add("used", sum(u for _, _, u in batch))
            logs = core.store.unreviewed_context(conversation, limit=config.batch)
    return counts.result(logs=0, items=0, used=0)


def run_term_counts(core: Core, payload: dict) -> dict:
    """Job handler: count again how many messages hold each common term, once the store
    is large and grew a tenth since the last count (PostgreSQL's keyword search reads
    BM25's document counts there; SQLite's FTS5 keeps its own)."""
    refresh = getattr(core.store, "refresh_term_counts", None)
    if refresh is None:
        return {"skipped": "the store keeps its own term counts"}
    return refresh()


def run_vector_index(core: Core, payload: dict) -> dict:
    """Job handler: bring the store's vector index up to date (PostgreSQL builds its
    approximate index once the store passes ``ann_min_rows`` messages; SQLite's side
    file catches up, its quantized index being built in the background anyway)."""
    refresh = getattr(core.store, "refresh_vector_index", None)
    if refresh is None:
        return {"skipped": "the store has no vector index to refresh"}
    before = core.store.meta("ann_index")
    after = refresh().get("ann_index")
    return {"built": after} if after != before else {"skipped": "no index due"}
