"""Layer 3: people across conversations — identities, declared users, the identity agent.

Every (conversation, participant) is an identity with a person of its own. The
same name in two conversations is only a *candidate*: a caller's declaration
(same user id) merges at once; otherwise an LLM agent with four tools
(timeline, compare, contradictions, context) decides MERGE or SEPARATE and the
decision is stored with its reasons, evidence and tool calls. Without an LLM
every candidate is recorded as SEPARATE (method ``no_llm``): identity needs
evidence or a declaration.

A decision's ``a``/``b`` are person labels (``conversation/name``, joined by
`` + `` for a person of several identities); its ``evidence`` holds message
references ``conversation:message_id`` (the evidence of the claims the agent
cited). A pair is decided again only when its *fingerprint* changes: the two
labels, the claim ids each side has and the messages each side sent.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from ..errors import InputError, NotFound
from ..lang.text import person_key
from ..llm.base import ChatModel, LLMError
from ..model import Decision, Person
from ..prompts import identity as prompt
from .people_tools import (
    Side,
    _name_keys,
    fingerprint,
    identity_label,
    load_side,
    person_claims,
    person_label,
    run_tool,
    shown_aliases,
)

if TYPE_CHECKING:
    from ..core import Core
    from ..store.base import Store

KIND = "identity"
MAX_STEPS = 6
MAX_DECISIONS = 10_000  # per run: a guard against a loop, far above any real workload
NO_LLM_REASONS = (
    "no LLM is configured: a shared name is not evidence of one person, so the two stay "
    "separate until an agent finds a consistent life or the caller declares them one user"
)


# -- labels and candidates ----------------------------------------------------------------


def names_match(a: set[str], b: set[str]) -> bool:
    """Same normalised name, or a lone first name against a full one ("john" / "john smith")."""
    for x in a:
        for y in b:
            xs, ys = x.split(), y.split()
            if x == y or (len(xs) == 1 and ys[:1] == xs) or (len(ys) == 1 and xs[:1] == ys):
                return True
    return False


def candidate_pairs(persons: Sequence[Person]) -> list[tuple[Person, Person]]:
    """Pairs of persons from different conversations whose names match, in label order.

    Two declared persons are never a candidate: the caller said who they are.
    """
    buckets: dict[str, list[Person]] = {}
    for p in persons:
        if p.identities:
            for first in {k.split()[0] for k in _name_keys(p) if k}:
                buckets.setdefault(first, []).append(p)
    pairs: dict[tuple[str, str], tuple[Person, Person]] = {}
    for group in buckets.values():
        group = sorted(group, key=person_label)
        for i, a in enumerate(group):
            for b in group[i + 1 :]:
                if a.declared and b.declared:
                    continue
                if {c for c, _ in a.identities} & {c for c, _ in b.identities}:
                    continue
                if names_match(_name_keys(a), _name_keys(b)):
                    pairs[(a.id, b.id)] = (a, b)
    return sorted(pairs.values(), key=lambda ab: (person_label(ab[0]), person_label(ab[1])))


# -- declared identities --------------------------------------------------------------------


# identities a declaration's MERGE decision names of those the user held before: a
# chat's assistant is declared in every chat, and listing them all made each new chat's
# decision longer than the last
JOINED_SHOWN = 3


def declare(store: Store, user_id: str, conversation: str, name: str) -> Person:
    """The caller says (conversation, name) is user ``user_id``: put it under that person
    (``record_declaration``) and return the person."""
    record_declaration(store, user_id, conversation, name)
    found = store.person(user_id.strip())
    if found is None:  # a delete of the same person won the race
        raise NotFound(f"no person {user_id.strip()!r}")
    return found


def record_declaration(store: Store, user_id: str, conversation: str, name: str) -> None:
    """Put (conversation, name) under the user ``user_id``, reading no person back (a
    chat front end declares each chat's speakers; an assistant's identities grow with
    its chats).

    Records a MERGE decision (method ``declared``) when the user already had
    identities elsewhere, naming the first ``JOINED_SHOWN`` of them and how many
    more. NotFound if the conversation or participant is unknown.
    """
    uid = (user_id or "").strip()
    if not uid:
        raise InputError("declare_identity needs a non-empty user id")
    key = person_key(name)
    # only this conversation is read: a server declares each chat's user on its first
    # turn, and reading every conversation and person cost time in the store's size;
    # the add that stored the turn mostly gave the speaker an identity already
    known = {person_key(n): n for n in store.identity_names(conversation)}
    if key not in known:
        participants = store.participants(conversation)
        if participants is None:
            raise NotFound(f"no conversation {conversation!r}")
        store.ensure_identities([conversation])
        spoken = {person_key(n): n for n in store.identity_names(conversation)}
        known = {person_key(p): p for p in participants} | spoken
        if key not in known:
            raise NotFound(f"{name!r} is not a participant of conversation {conversation!r}")
    stored_name = known[key]
    # counted before: identities that move along with this one were not held before it
    before = store.identity_count(uid, besides=(conversation, stored_name))
    joined = store.declare_identity(conversation, stored_name, uid, most=JOINED_SHOWN)
    if joined:
        held = " + ".join(identity_label(c, n) for c, n in joined)
        if (more := before - len(joined)) > 0:
            held += f" and {more} more"
        store.add_decision(
            Decision(
                kind=KIND,
                a=held,
                b=identity_label(conversation, stored_name),
                verdict="MERGE",
                reasons=f"declared by the caller as user {uid}",
                method="declared",
            )
        )


def apply_declarations(store: Store) -> int:
    """Declared identities not yet under their user's person are moved there; returns how many."""
    todo = [(c, n, d) for c, n, d, pid in store.declared_identities() if pid != d]
    for conv, name, uid in todo:
        declare(store, uid, conv, name)
    return len(todo)


# -- the identity agent -------------------------------------------------------------------


@dataclass(frozen=True)
class AgentResult:
    """The agent's verdict on one pair, its reasons, cited evidence and tool calls."""

    verdict: str
    reasons: str
    evidence: tuple[str, ...]
    steps: tuple[dict, ...]


def _side_info(side: Side, participants: dict[str, list[str]]) -> prompt.SideInfo:
    mine = _name_keys(side.person)
    partners = sorted(
        {
            p
            for conv, _ in side.person.identities
            for p in participants.get(conv, [])
            if person_key(p) not in mine
        }
    )
    return prompt.SideInfo(
        label=side.label,
        name=side.person.name,
        identities=tuple(sorted(side.person.identities)),
        partners=tuple(partners),
        claims=len(side.claims),
        messages=len(side.own_messages()),
        declared=side.person.declared,
    )


def evidence_refs(aliases: Sequence[str], shown: set[str], a: Side, b: Side) -> tuple[str, ...]:
    """Cited aliases the tools showed, as ``conversation:message_id``; others are dropped."""
    claims = a.aliases() | b.aliases()
    refs: dict[str, None] = {}
    for raw in aliases:
        alias = raw.strip().strip("[]").strip().lower()
        if alias in shown and alias in claims:
            c = claims[alias]
            for mid in c.evidence:
                refs.setdefault(f"{c.conversation}:{mid}", None)
    return tuple(refs)


def run_agent(
    ask: Callable[[list[dict]], prompt.IdentityStep],
    a: Side,
    b: Side,
    participants: dict[str, list[str]],
    *,
    max_steps: int = MAX_STEPS,
) -> AgentResult:
    """Tool calls until the model decides, or SEPARATE when the step budget runs out.

    ``ask`` is one structured call of the identity prompt (Core.llm_call:
    cached, counted). LLMError propagates: the caller records no decision.
    """
    info_a, info_b = _side_info(a, participants), _side_info(b, participants)
    stamps = [m.timestamp for m in a.own_messages() + b.own_messages()]
    stamps += [c.said_at for c in a.claims + b.claims]
    now = max(stamps) if stamps else datetime(1970, 1, 1, tzinfo=UTC)
    transcript: list[prompt.ToolResult] = []
    steps: list[dict] = []
    for n in range(max_steps):
        out = ask(prompt.build(info_a, info_b, transcript, now, max_steps - n))
        if out.action == "decide":
            shown = shown_aliases(r.output for r in transcript)
            return AgentResult(
                verdict=str(out.verdict),
                reasons=out.reasons.strip(),
                evidence=evidence_refs(out.evidence, shown, a, b),
                steps=tuple(steps),
            )
        tool = str(out.tool)
        transcript.append(prompt.ToolResult(tool, out.side, run_tool(tool, out.side, a, b)))
        steps.append({"tool": tool, "side": out.side})
    return AgentResult("SEPARATE", f"undecided within {max_steps} steps", (), tuple(steps))


# -- the job ---------------------------------------------------------------------------------


@dataclass
class _Run:
    """One run's state: counts reported back and pairs that failed this time."""

    counts: dict[str, int]
    failed: set[tuple[str, str]] = field(default_factory=set)


def _labels(p: Person) -> set[str]:
    return {identity_label(c, n) for c, n in p.identities}


def user_separated(store: Store) -> set[frozenset[str]]:
    """Identity-label pairs the user kept apart (split_person): never candidates again."""
    out: set[frozenset[str]] = set()
    for d in store.decisions(KIND):
        if d.method == "user" and d.verdict == "SEPARATE":
            out |= {frozenset((x, y)) for x in d.a.split(" + ") for y in d.b.split(" + ")}
    return out


def _pending(store: Store, with_llm: bool, failed: set) -> list[tuple[Person, Person, str]]:
    """Candidate pairs with no decision for their fingerprint (no_llm ones redone with an LLM)."""
    pairs = [(a, b) for a, b in candidate_pairs(store.persons()) if (a.id, b.id) not in failed]
    if not pairs:
        return []
    counts = store.identity_message_counts()
    people = {p.id: p for pair in pairs for p in pair}  # each person's claims read once
    claim_ids = {pid: [c.id or 0 for c in person_claims(store, p)] for pid, p in people.items()}
    methods: dict[tuple[str, str, str], set[str]] = {}
    for a_label, b_label, fp, method in store.decision_keys(KIND):
        methods.setdefault((a_label, b_label, fp), set()).add(method)
    apart = user_separated(store)
    out = []
    for a, b in pairs:
        if any(frozenset((x, y)) in apart for x in _labels(a) for y in _labels(b)):
            continue  # the user said these are two people: no agent overrules that
        fp = fingerprint(a, b, claim_ids, counts)
        done = methods.get((person_label(a), person_label(b), fp), set())
        if not done or (with_llm and not done - {"no_llm"}):
            out.append((a, b, fp))
    return out


def _decide_one(
    core: Core, llm: ChatModel, a: Person, b: Person, fp: str, run: _Run, max_steps: int
) -> bool:
    """Run the agent on one pair and store its decision; True when it merged."""
    store = core.store
    participants = {c["id"]: list(c["participants"]) for c in store.conversations()}
    side_a, side_b = load_side(store, a, "a"), load_side(store, b, "b")
    try:
        result = run_agent(
            lambda messages: core.llm_call(prompt, messages, prompt.IdentityStep),
            side_a,
            side_b,
            participants,
            max_steps=max_steps,
        )
    except LLMError:
        run.failed.add((a.id, b.id))
        run.counts["failed"] += 1
        return False
    decision = Decision(
        kind=KIND,
        a=person_label(a),
        b=person_label(b),
        verdict=result.verdict,
        reasons=result.reasons,
        evidence=result.evidence,
        method=f"agent:{llm.name}",
        steps=result.steps,
    )
    merge = None
    if result.verdict == "MERGE":
        merge = (b.id, a.id) if b.declared and not a.declared else (a.id, b.id)
    store.add_decision(decision, fp, merge=merge)
    run.counts["merged" if merge else "separate"] += 1
    return merge is not None


def _decide_all(core: Core, llm: ChatModel | None, run: _Run, max_steps: int) -> None:
    """Decide every pending candidate; a merge changes the persons, so candidates are redone."""
    store = core.store
    for _ in range(MAX_DECISIONS):
        pending = _pending(store, llm is not None, run.failed)
        if not pending:
            return
        for a, b, fp in pending:
            run.counts["candidates"] += 1
            if llm is None:
                store.add_decision(
                    Decision(
                        KIND,
                        person_label(a),
                        person_label(b),
                        "SEPARATE",
                        NO_LLM_REASONS,
                        method="no_llm",
                    ),
                    fp,
                )
                run.counts["separate"] += 1
            elif _decide_one(core, llm, a, b, fp, run, max_steps):
                break  # persons changed: find the candidates again


def run_people(core: Core, payload: dict | None = None) -> dict:
    """The layer-3 job: identities, declarations, then every undecided candidate pair.

    ``payload`` may set ``max_steps`` (agent steps per pair). Idempotent: a run
    with nothing new changes no table and reports ``{"skipped": ...}``.
    """
    store = core.store
    max_steps = int((payload or {}).get("max_steps", MAX_STEPS))
    if max_steps < 1:
        raise InputError(f"max_steps must be >= 1; got {max_steps}")
    if not store.conversations():
        return {"skipped": "no conversations"}
    keys = ("persons", "candidates", "merged", "separate", "failed", "llm_calls")
    run = _Run({"identities": store.ensure_identities(), **dict.fromkeys(keys, 0)})
    run.counts["declared"] = apply_declarations(store)
    llm = core.llm
    before = core.ledger.summary()
    _decide_all(core, llm, run, max_steps)  # llm_call persists usage call by call
    after = core.ledger.summary().get(prompt.NAME, {})
    run.counts["llm_calls"] = after.get("calls", 0) - before.get(prompt.NAME, {}).get("calls", 0)
    run.counts["persons"] = len(store.persons())
    if not any(run.counts[k] for k in ("identities", "declared", "candidates")):
        return {"skipped": f"nothing new: {run.counts['persons']} persons, all pairs decided"}
    return run.counts
