"""Layer 1: entity resolution within a conversation, one speaker's mentions at a time.

A cascade, cheapest first: normalised exact name or alias → fuzzy name match
→ embedding similarity → (only for the ambiguous rest) an LLM's verdict.
Candidates are only the *same speaker's* entities in the same conversation:
Caroline's "nurse" is never merged with Melanie's on name alone; joining
people across speakers and conversations is layer 3's job, with evidence.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime

import numpy as np

from ..lang.text import person_key
from ..model import Claim, Entity, EntityMention

# (owner, description A, description B) -> same?  Called once with every ambiguous pair.
Verifier = Callable[[list[tuple[str, str, str]]], list[bool]]


@dataclass(frozen=True)
class EntityConfig:
    """Thresholds of the cascade (frozen, like search presets)."""

    fuzzy: float = 0.88  # difflib ratio of normalised names
    cosine_same: float = 0.93  # embedding similarity that alone means "same"
    cosine_ambiguous: float = 0.80  # from here to cosine_same: ask the LLM, else keep apart


ENTITY_DEFAULT = EntityConfig()


def entity_text(name: str, kind: str, roles: Sequence[str]) -> str:
    """What an entity's vector embeds: its name, kind and roles."""
    role = "; ".join(r for r in roles if r)
    return f"{name} ({kind})" + (f": {role}" if role else "")


@dataclass
class EntityWork:
    """The entities of one conversation as resolution changes them."""

    entities: list[Entity]
    links: dict[int, set[int]] = field(default_factory=dict)  # entity index -> claim ids
    changed: set[int] = field(default_factory=set)  # indexes new or updated
    stages: dict[str, int] = field(
        default_factory=lambda: {"exact": 0, "fuzzy": 0, "embedding": 0, "llm": 0, "new": 0}
    )
    mentions: int = 0


def _kinds_compatible(a: str, b: str) -> bool:
    return a == b or "other" in (a, b)


def _fuzzy(a: Entity, m: EntityMention) -> bool:
    x, y = person_key(a.name), person_key(m.name)
    if difflib.SequenceMatcher(None, x, y).ratio() >= ENTITY_DEFAULT.fuzzy:
        return True
    # "John" and "John Smith": one name is the other's first name (people, or not known)
    if {a.kind, m.kind} <= {"person", "other"} and (" " in x) != (" " in y):
        return x.split()[0] == y.split()[0]
    return False


def _absorb(e: Entity, m: EntityMention, when: datetime) -> Entity:
    """``e`` with the mention's name as an alias and its role and state recorded."""
    names = {person_key(e.name), *map(person_key, e.aliases)}
    aliases = list(e.aliases) + [
        a for a in (m.name, *m.aliases) if a.strip() and person_key(a) not in names
    ]
    roles = list(e.roles) + ([m.role] if m.role and m.role not in e.roles else [])
    states = list(e.states) + ([(when.date().isoformat(), m.state)] if m.state else [])
    return replace(
        e,
        kind=e.kind if e.kind != "other" else m.kind,
        aliases=tuple(dict.fromkeys(aliases)),
        roles=tuple(roles),
        states=tuple(states),
        first_seen=min(filter(None, (e.first_seen, when))),
        last_seen=max(filter(None, (e.last_seen, when))),
        mentions=e.mentions + 1,
    )


def _new_entity(conversation: str, owner: str, m: EntityMention, when: datetime) -> Entity:
    return Entity(
        conversation=conversation,
        owner=owner,
        name=m.name.strip(),
        kind=m.kind,
        aliases=tuple(a for a in m.aliases if a.strip() and person_key(a) != person_key(m.name)),
        roles=(m.role,) if m.role else (),
        states=((when.date().isoformat(), m.state),) if m.state else (),
        first_seen=when,
        last_seen=when,
        mentions=1,
    )


def resolve_mentions(
    work: EntityWork,
    claims: Sequence[Claim],
    vectors: Callable[[list[str]], np.ndarray],
    verify: Verifier | None = None,
) -> None:
    """File every entity mention of ``claims`` under an entity of its speaker (in place)."""
    pending: list[tuple[Claim, EntityMention, list[int]]] = []  # ambiguous, for the LLM
    for c in claims:
        for m in c.entities:
            if not m.name.strip():
                continue
            work.mentions += 1
            idx, stage, maybe = _match(work, c, m, vectors)
            if idx is None and maybe and verify is not None:
                pending.append((c, m, maybe))
                continue
            _file(work, c, m, idx, stage)
    if pending:
        _verify_pending(work, pending, verify)  # type: ignore[arg-type]


def _file(work: EntityWork, c: Claim, m: EntityMention, idx: int | None, stage: str) -> None:
    when = c.valid_from or c.said_at
    if idx is None:
        work.entities.append(_new_entity(c.conversation, c.speaker, m, when))
        idx = len(work.entities) - 1
        stage = "new"
    else:
        work.entities[idx] = _absorb(work.entities[idx], m, when)
    work.stages[stage] += 1
    work.changed.add(idx)
    if c.id is not None:
        work.links.setdefault(idx, set()).add(c.id)


def _match(
    work: EntityWork,
    c: Claim,
    m: EntityMention,
    vectors: Callable[[list[str]], np.ndarray],
) -> tuple[int | None, str, list[int]]:
    """(entity index, stage) of the cascade's answer; or None and the ambiguous candidates."""
    owner = person_key(c.speaker)
    cands = [
        i
        for i, e in enumerate(work.entities)
        if person_key(e.owner) == owner
        and e.conversation == c.conversation
        and _kinds_compatible(e.kind, m.kind)
    ]
    key = person_key(m.name)
    for i in cands:
        e = work.entities[i]
        if key == person_key(e.name) or key in map(person_key, e.aliases):
            return i, "exact", []
    for i in cands:
        if _fuzzy(work.entities[i], m):
            return i, "fuzzy", []
    if not cands:
        return None, "new", []
    texts = [entity_text(m.name, m.kind, [m.role])] + [
        entity_text(work.entities[i].name, work.entities[i].kind, work.entities[i].roles)
        for i in cands
    ]
    vecs = vectors(texts)
    sims = vecs[1:] @ vecs[0]
    best = int(np.argmax(sims))
    if sims[best] >= ENTITY_DEFAULT.cosine_same:
        return cands[best], "embedding", []
    maybe = [cands[j] for j in np.argsort(-sims)[:2] if sims[j] >= ENTITY_DEFAULT.cosine_ambiguous]
    return None, "new", maybe


def _verify_pending(
    work: EntityWork, pending: list[tuple[Claim, EntityMention, list[int]]], verify: Verifier
) -> None:
    pairs: list[tuple[str, str, str]] = []
    where: list[tuple[int, int]] = []  # (pending index, entity index)
    for p, (c, m, maybe) in enumerate(pending):
        for i in maybe:
            e = work.entities[i]
            pairs.append(
                (
                    c.speaker,
                    f"{m.name} ({m.kind}) {m.role} — in: {c.text}",
                    entity_text(e.name, e.kind, e.roles) + f" — also called {', '.join(e.aliases)}",
                )
            )
            where.append((p, i))
    try:
        same = verify(pairs)
    except Exception:  # noqa: BLE001 - a failed verification keeps entities apart (safe)
        same = [False] * len(pairs)
    chosen: dict[int, int] = {}
    for (p, i), ok in zip(where, same, strict=False):
        if ok and p not in chosen:
            chosen[p] = i
    for p, (c, m, _) in enumerate(pending):
        _file(work, c, m, chosen.get(p), "llm" if p in chosen else "new")
