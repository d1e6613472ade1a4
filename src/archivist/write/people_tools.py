"""The identity agent's tools: what each side of a candidate pair holds, side by side.

Pure functions over a person's claims and messages (timeline, compare,
contradictions, context), kept apart from the agent loop in write/people.py.
Every claim is shown under a short alias (``a3``, ``b7``), never a store id.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

from ..lang.attributes import attribute_values, clean_value, compatible_values
from ..lang.identity import (
    IDENTITY_PATTERNS,
    RELATIONS,
)
from ..lang.text import person_key
from ..model import Claim, Message, Person
from ..store.sql import Filters

if TYPE_CHECKING:
    from ..store.base import Store

# -- labels ----------------------------------------------------------------------------


def identity_label(conversation: str, name: str) -> str:
    """How decisions name one identity: ``conversation/name``."""
    return f"{conversation}/{name}"


def person_label(p: Person) -> str:
    """How decisions name a person: its identities' labels, sorted, joined by `` + ``."""
    return " + ".join(identity_label(c, n) for c, n in sorted(p.identities))


def _name_keys(p: Person) -> set[str]:
    return {person_key(n) for _, n in p.identities} | {person_key(p.name)}


# -- what each side of a pair holds ---------------------------------------------------------


@dataclass
class Side:
    """One person of a candidate pair, with its claims (aliased ``a1``… / ``b1``…)."""

    label: str  # "a" or "b"
    person: Person
    claims: list[Claim]
    messages: dict[str, list[Message]] = field(default_factory=dict)  # conversation -> all

    @property
    def keys(self) -> set[str]:
        """Name keys this person goes by, full names and first names."""
        keys = _name_keys(self.person)
        return keys | {k.split()[0] for k in keys if k}

    def aliases(self) -> dict[str, Claim]:
        return {f"{self.label}{i}": c for i, c in enumerate(self.claims, start=1)}

    def own_messages(self) -> list[Message]:
        """Messages this person sent, oldest first."""
        mine = {(c, person_key(n)) for c, n in self.person.identities}
        return sorted(
            (
                m
                for msgs in self.messages.values()
                for m in msgs
                if (m.conversation, person_key(m.speaker)) in mine
            ),
            key=lambda m: m.timestamp,
        )


def person_claims(store: Store, person: Person) -> list[Claim]:
    """Claims the person said first-hand or that are about them, in time order."""
    found: dict[int, Claim] = {}
    for conv, name in person.identities:
        key = person_key(name)
        for c in store.list_claims(Filters(conversation=conv, person=name), limit=1_000_000):
            about = person_key(c.subject) == key
            said = person_key(c.speaker) == key and c.source == "first_hand"
            if c.status != "duplicate" and c.id is not None and (about or said):
                found[c.id] = c
    return sorted(found.values(), key=lambda c: (c.said_at, c.id or 0))


def load_side(store: Store, person: Person, label: str) -> Side:
    """A side with its claims and the messages of its conversations (for the tools)."""
    messages = {
        conv: [m for _, m in store.conversation_messages(conv)]
        for conv in sorted({c for c, _ in person.identities})
    }
    return Side(label, person, person_claims(store, person), messages)


def fingerprint(
    a: Person, b: Person, claims: dict[str, list[int]], counts: dict[tuple[str, str], int]
) -> str:
    """What the pair looked like: labels, each side's claim ids and messages sent."""

    def sent(p: Person) -> int:
        return sum(counts.get((c, person_key(n)), 0) for c, n in p.identities)

    payload = [person_label(a), person_label(b), claims[a.id], claims[b.id], sent(a), sent(b)]
    return hashlib.sha256(json.dumps(payload).encode("utf-8")).hexdigest()[:16]


# -- the agent's tools: pure functions over the two sides' claims and messages ---------------

# One value at a time: two values at once, one per side, contradict. Not ages: they
# move on, and "30" on one side and "31" on the other may be one person a year apart.
SINGLE_VALUED = frozenset({"job", "employer", "residence", "diet", "partner", "mother", "father"})
_ALIAS = re.compile(r"\[([ab]\d+)\]")
_NAME_WORD = re.compile(r"\b[A-Z][a-z]+\b")


@dataclass(frozen=True)
class Fact:
    """One attribute value a claim states of a side's person, with when it holds."""

    attribute: str
    value: str
    alias: str
    start: datetime
    end: datetime | None = None


def _fact(attribute: str, m: re.Match[str]) -> tuple[str, str] | None:
    """(attribute, value) from one pattern match, normalised."""
    groups = m.groupdict()
    if attribute == "job" and "t" in groups:
        return "job", "teacher"
    if attribute == "job" and "w" in groups:  # flying planes
        kind = (groups.get("v") or groups.get("w") or "").strip().lower()
        return "job", f"{kind} pilot".strip()
    if attribute == "family":
        relation = RELATIONS.get(groups["r"].lower(), groups["r"].lower())
        return (
            (relation, groups["v"])
            if relation in SINGLE_VALUED
            else ("family", f"{relation} {groups['v']}")
        )
    if attribute == "pet":
        return "pet", f"{groups['k']} {groups['v']}"
    value = clean_value(attribute, groups.get("v") or "")
    return (attribute, value.lower() if attribute == "hobby" else value) if value else None


def _claim_facts(text: str) -> Iterator[tuple[str, str, re.Match[str]]]:
    """(attribute, value, match) for every cue in ``text``: the shared ones, then the agent's."""
    for found, m in attribute_values(text):
        yield found.attribute, found.value, m
    for attribute, pattern in IDENTITY_PATTERNS:
        for m in pattern.finditer(text):
            fact = _fact(attribute, m)
            if fact:
                yield *fact, m


def _belongs(text: str, m: re.Match[str], keys: set[str]) -> bool:
    """Whether the person (``keys``) is whom the match speaks of: the owner it names, or
    else the last name before it (claims carry names, not pronouns)."""
    owner = m.groupdict().get("o")
    if owner:
        return person_key(owner) in keys
    names = [
        w for w in _NAME_WORD.finditer(text[: m.start()]) if w.start() or w[0].casefold() in keys
    ]
    return not names or person_key(names[-1][0]) in keys


def side_facts(side: Side) -> list[Fact]:
    """Attribute values the side's claims state of its person, each until replaced or ended."""
    keys, facts = side.keys, []
    for alias, c in side.aliases().items():
        if person_key(c.subject) not in keys and person_key(c.speaker) not in keys:
            continue
        for attribute, value, m in _claim_facts(c.text):
            if _belongs(c.text, m, keys):  # not "Ana's cat Pixel", "Marta lives in Porto"
                facts.append(Fact(attribute, value, alias, c.valid_from or c.said_at, c.valid_to))
    facts = list(dict.fromkeys(facts))  # two cues may read one value
    ends = []
    for f in facts:  # a single value holds until the side states another one
        later = [
            g.start
            for g in facts
            if g.attribute == f.attribute
            and g.start > f.start
            and not compatible_values(g.value, f.value)
        ]
        end = min([*later, *([f.end] if f.end else [])], default=None)
        ends.append(
            Fact(f.attribute, f.value, f.alias, f.start, end) if f.attribute in SINGLE_VALUED else f
        )
    return ends


def side_names(side: Side) -> dict[str, list[str]]:
    """Other people and places the side's claims name: casefolded name -> aliases."""
    out: dict[str, list[str]] = {}
    for alias, c in side.aliases().items():
        for e in c.entities:
            key = person_key(e.name)
            if key and key not in side.keys and key.split()[0] not in side.keys:
                out.setdefault(key, []).append(alias)
    return out


def _refs(aliases: Sequence[str]) -> str:
    return ", ".join(f"[{a}]" for a in dict.fromkeys(aliases))


def timeline(side: Side, cap: int = 40) -> str:
    """The side's claims in time order, each with its alias, date, kind and speaker."""
    items = list(side.aliases().items())
    lines = [f"Timeline of side {side.label} ({side.person.name}), {len(items)} claims:"]
    for alias, c in items[:cap]:
        holds = f", holds {c.valid_from:%Y-%m-%d}" if c.valid_from else ""
        holds += f" to {c.valid_to:%Y-%m-%d}" if c.valid_to else ""
        lines.append(
            f"[{alias}] {c.said_at:%Y-%m-%d} {c.kind}{holds}, said by {c.speaker}: {c.text}"
        )
    if len(items) > cap:
        lines.append(f"({len(items) - cap} more not shown)")
    return "\n".join(lines)


def compare(a: Side, b: Side) -> str:
    """Both sides' attributes side by side, then what they share."""
    facts = {s.label: side_facts(s) for s in (a, b)}
    names = {s.label: side_names(s) for s in (a, b)}
    lines = []
    for s in (a, b):
        lines.append(f"Side {s.label} ({s.person.name}):")
        grouped: dict[str, list[Fact]] = {}
        for f in facts[s.label]:
            grouped.setdefault(f.attribute, []).append(f)
        for attr, fs in sorted(grouped.items()):
            values = "; ".join(f"{f.value} [{f.alias}]" for f in fs)
            lines.append(f"  {attr}: {values}")
        named = "; ".join(f"{k} ({_refs(v)})" for k, v in sorted(names[s.label].items()))
        lines.append(f"  names mentioned: {named or 'none'}")
    shared = [
        f"{fa.attribute}={fa.value} ([{fa.alias}], [{fb.alias}])"
        for fa in facts["a"]
        for fb in facts["b"]
        if fa.attribute == fb.attribute and compatible_values(fa.value, fb.value)
    ]
    common = sorted(set(names["a"]) & set(names["b"]))
    lines.append("Shared attributes: " + ("; ".join(dict.fromkeys(shared)) or "none"))
    lines.append(
        "Shared names: "
        + ("; ".join(f"{k} ({_refs(names['a'][k] + names['b'][k])})" for k in common) or "none")
    )
    return "\n".join(lines)


def _overlap(x: Fact, y: Fact) -> bool:
    return (y.end is None or x.start < y.end) and (x.end is None or y.start < x.end)


def contradictions(a: Side, b: Side) -> str:
    """Claim pairs, one per side, giving one attribute different values at the same time."""
    found = [
        f"- {fa.attribute}: [{fa.alias}] {fa.value} (from {fa.start:%Y-%m-%d}) vs "
        f"[{fb.alias}] {fb.value} (from {fb.start:%Y-%m-%d})"
        for fa in side_facts(a)
        for fb in side_facts(b)
        if fa.attribute == fb.attribute
        and fa.attribute in SINGLE_VALUED
        and not compatible_values(fa.value, fb.value)
        and _overlap(fa, fb)
    ]
    if not found:
        return "No contradictions found."
    return "Contradictions:\n" + "\n".join(dict.fromkeys(found))


def context(side: Side, lines: int = 5) -> str:
    """Each of the side's conversations: participants, dates, sizes, the person's first lines."""
    out = []
    for conv, msgs in side.messages.items():
        mine = [m for m in side.own_messages() if m.conversation == conv]
        people = sorted({m.speaker for m in msgs} | {p for m in msgs for p in m.addressees})
        span = f"{msgs[0].timestamp:%Y-%m-%d} to {msgs[-1].timestamp:%Y-%m-%d}" if msgs else "empty"
        out.append(
            f"Conversation {conv!r} (side {side.label}): participants {', '.join(people)}; "
            f"{span}; {len(msgs)} messages, {len(mine)} by {side.person.name}. First lines:"
        )
        out += [f"  ({m.timestamp:%Y-%m-%d}) {m.text[:160]}" for m in mine[:lines]]
    return "\n".join(out) or f"Side {side.label}: no conversation"


def run_tool(tool: str, which: str | None, a: Side, b: Side) -> str:
    """The output of one tool call; timeline/context without a side cover both."""
    sides = [s for s in (a, b) if which in (None, s.label)]
    if tool == "compare":
        return compare(a, b)
    if tool == "contradictions":
        return contradictions(a, b)
    fn = timeline if tool == "timeline" else context
    if tool not in ("timeline", "context"):
        raise ValueError(f"unknown tool {tool!r}")  # the prompt schema allows only four
    return "\n\n".join(fn(s) for s in sides)


def shown_aliases(outputs: Iterable[str]) -> set[str]:
    """The claim aliases the tools have shown the model so far."""
    return {m.group(1) for text in outputs for m in _ALIAS.finditer(text)}
