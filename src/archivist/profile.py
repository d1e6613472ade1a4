"""A person's profile: what holds for them at a time, grouped, who said it, what it replaced.

``build_profile`` reads a person's claims across conversations and keeps those
about them that hold at ``at`` (``Claim.holds_at``, applied to each claim as it
stood then: ``claim_as_of``), with the values each one replaced. Grouping reads
the attribute a claim states (the caller passes attributes.py's reader, a
layer this module may not import) and, failing that, a small keyword map.
It sits below read and write because both use it: the reads serve it, and
key info (write/consolidate.py) is written from it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import TYPE_CHECKING

from .judge.base import GoalPair, Judge
from .lang.text import KIN_WORDS, person_key
from .model import Claim, ClaimEvent, Conflict
from .store.sql import Filters

if TYPE_CHECKING:
    from .store.base import Store

GROUPS: tuple[str, ...] = (
    "home",
    "work",
    "relationships",
    "family",
    "health and diet",
    "pets",
    "possessions and hobbies",
    "plans",
    "other",
)

# The single-valued attributes (attributes.py, and a conflict's attribute, which an
# LLM may name in its own words) and the group each belongs to.
ATTRIBUTE_GROUPS: Mapping[str, str] = {
    "residence": "home",
    "home": "home",
    "city": "home",
    "location": "home",
    "job": "work",
    "employer": "work",
    "occupation": "work",
    "work": "work",
    "diet": "health and diet",
    "partner": "relationships",
    "relationship": "relationships",
    "age": "other",
    "manager": "work",
    "study": "work",
}


def _words(*alternatives: str) -> re.Pattern[str]:
    return re.compile(r"\b(?:" + "|".join(alternatives) + r")\b", re.IGNORECASE)


# What is not a single-valued attribute has no cue in attributes.py: a person
# has many relatives, pets, things and hobbies at once, so none of them conflicts with
# another and reconciliation never needs to read them. A profile still has to file
# them, and a short list of nouns does that well enough for a listing (a claim that
# matches none is "other", never dropped). The first group that matches wins.
KEYWORDS: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "relationships",
        _words(
            r"boyfriends?|girlfriends?|husband|wife|partner|fianc[ée]e?|married|wedding",
            r"dating|engaged|divorced?|break[- ]?up|broke up",
        ),
    ),
    (
        "family",
        _words(
            r"sons?|daughters?|kids?|children|child|bab(?:y|ies)|mum|mom|mother|dad|father",
            r"parents?|brothers?|sisters?|siblings?|twins?|grand\w+|aunt|uncle|cousins?",
            r"nieces?|nephews?|in-laws?|family",
        ),
    ),
    (
        "pets",
        _words(
            r"dogs?|cats?|pupp(?:y|ies)|kittens?|pets?|hamsters?|rabbits?|bunn(?:y|ies)",
            r"parrots?|budgies?|horses?|pon(?:y|ies)|goldfish|turtles?|tortoises?|guinea pigs?",
        ),
    ),
    (
        "health and diet",
        _words(
            r"allerg\w*|injur\w*|medications?|medicines?|pills?|doctors?|surgery|diagnos\w*",
            r"illness|ill|sick|asthma|diabet\w*|pregnan\w*|therapy|physio\w*|broken|sprain\w*",
            r"diet|vegan|vegetarian|gluten|lactose|intolerant|sober|smok\w*",
        ),
    ),
    (
        "possessions and hobbies",
        _words(
            r"cars?|bikes?|bicycles?|motorbikes?|phones?|laptops?|computers?|cameras?",
            r"guitar|piano|violin|cello|drums|plays?|playing|clubs?|band|choir|class(?:es)?",
            r"courses?|lessons?|hobb(?:y|ies)|painting|hiking|gardening|knitting|yoga|chess",
        ),
    ),
    ("work", _words(r"jobs?|office|colleagues?|boss|promot\w*|salary|shifts?|hired|fired")),
    ("home", _words(r"apartment|flat|neighbou?rhood|landlord|rent|moved|moving")),
)

PLAN_KINDS = ("plan", "foresight")
# The history events that give a claim its status, each dated by the other claim's said_at.
STATUS_EVENTS = ("superseded", "rejected", "refined_by", "duplicate_of")

AttributeReader = Callable[[str, str], object]  # (text, subject) -> AttributeValue | None


@dataclass(frozen=True)
class Replaced:
    """A value an entry replaced: its claim, wording, and when it held."""

    claim: int
    text: str
    value: str  # the conflict's old value ("nurse"), or the claim's text
    since: datetime
    until: datetime | None  # when it stopped holding; None: refined (still true, less precise)

    def to_dict(self) -> dict:
        return {
            "claim": self.claim,
            "text": self.text,
            "value": self.value,
            "since": self.since.isoformat(),
            "until": self.until.isoformat() if self.until else None,
        }


@dataclass(frozen=True)
class Link:
    """Another entry of the person's that serves one of their goals (or works against
    it), as the judge read the pair, with its probability."""

    claim: int
    text: str
    p: float

    def to_dict(self) -> dict:
        return {"claim": self.claim, "text": self.text, "p": round(self.p, 3)}


@dataclass(frozen=True)
class Entry:
    """One thing that holds for the person: what, since when, who said it, on what evidence."""

    claim: int
    text: str
    kind: str
    since: datetime
    until: datetime | None
    speaker: str
    source: str  # "first-hand", "reported by Lee", "said by the assistant"
    evidence: tuple[tuple[str, str], ...]  # (conversation, message id)
    replaced: tuple[Replaced, ...] = ()
    facet: str = ""  # the kind of memory its sentence is (the judge's): goal, value, ...
    serves: tuple[Link, ...] = ()  # a goal's: what the person does that serves it
    hinders: tuple[Link, ...] = ()  # a goal's: what works against it

    def to_dict(self) -> dict:
        return {
            "claim": self.claim,
            "text": self.text,
            "kind": self.kind,
            "facet": self.facet,
            "since": self.since.isoformat(),
            "until": self.until.isoformat() if self.until else None,
            "speaker": self.speaker,
            "source": self.source,
            "evidence": [{"conversation": c, "message": m} for c, m in self.evidence],
            "replaced": [r.to_dict() for r in self.replaced],
            "serves": [x.to_dict() for x in self.serves],
            "hinders": [x.to_dict() for x in self.hinders],
        }


@dataclass(frozen=True)
class Profile:
    """What holds for ``person`` at ``at``, in GROUPS order (every group, empty ones too)."""

    person: str
    at: datetime
    groups: tuple[tuple[str, tuple[Entry, ...]], ...]

    def __getitem__(self, group: str) -> tuple[Entry, ...]:
        return dict(self.groups)[group]

    def entries(self) -> list[Entry]:
        return [e for _, found in self.groups for e in found]

    def facts(self) -> tuple[tuple[str, tuple[Entry, ...]], ...]:
        """The groups without the entries of the person model (``model``): each entry once."""
        return tuple(
            (name, tuple(e for e in found if not in_model(e, name))) for name, found in self.groups
        )

    def model(self) -> tuple[tuple[str, tuple[Entry, ...]], ...]:
        """The person model: the standing entries (``in_model``) by the kind of memory
        they are, in MODEL order (every part, empty ones too), oldest first; a goal with
        what serves it and what works against it, when a judge linked them."""
        parts: dict[str, list[Entry]] = {name: [] for name, _, _ in MODEL}
        for group, found in self.groups:
            for e in found:
                if in_model(e, group):
                    parts[MODEL_PART[e.facet]].append(e)
        return tuple(
            (name, tuple(sorted(found, key=lambda e: (e.since, e.claim))))
            for name, found in parts.items()
        )

    def to_dict(self) -> dict:
        """JSON-ready form, shared by the CLI, REST and MCP: ``groups`` holds every entry,
        ``model`` the standing ones again, by kind."""
        return {
            "person": self.person,
            "at": self.at.isoformat(),
            "groups": {name: [e.to_dict() for e in found] for name, found in self.groups},
            "model": {name: [e.to_dict() for e in found] for name, found in self.model()},
        }

    def text(self) -> str:
        """A readable listing: the facts by group, then the person model by kind (each
        entry once), one line per entry, replaced values under it."""
        lines = [f"{self.person}, as of {self.at:%Y-%m-%d %H:%M %Z}".rstrip()]
        for name, found in self.facts():
            if found:
                lines.append(f"{name}:")
                lines += [line for e in found for line in _entry_lines(e)]
        model = [(name, found) for name, found in self.model() if found]
        if model:
            lines.append("person model:")
        for name, found in model:
            lines.append(f"  {name}:")
            lines += ["  " + line for e in found for line in _entry_lines(e)]
        if len(lines) == 1:
            lines.append("(nothing known holds at this time)")
        return "\n".join(lines)


def _entry_lines(e: Entry) -> list[str]:
    until = f" until {e.until:%Y-%m-%d}" if e.until else ""
    where = ", ".join(f"{c}/{m}" for c, m in e.evidence)
    lines = [f"  - {e.text}  [since {e.since:%Y-%m-%d}{until}; {e.source}; {where}; #{e.claim}]"]
    for r in e.replaced:
        to = f" to {r.until:%Y-%m-%d}" if r.until else ", refined"
        if r.until and r.until < r.since:  # a plan called off before it began
            to = f", called off {r.until:%Y-%m-%d}"
        lines.append(f"      replaced: {r.value} ({r.since:%Y-%m-%d}{to}; #{r.claim})")
    lines += [f"      serving it: {x.text} (#{x.claim})" for x in e.serves]
    lines += [f"      against it: {x.text} (#{x.claim})" for x in e.hinders]
    return lines


# A goal's links (``link_goals``): the judge's least probability for one, at most
# LINKS_SHOWN of each label per goal, among the person's newest LINK_ITEMS entries. A
# model trained with the task (docs/judge.md, the eleventh) linked at 0.7 right 55 of 60,
# 40 of 46 and 34 of 43 times on the pairs written apart (training/serves/fresh*.jsonl),
# and at most 0.05 of the steps set against another goal
LINK_SURE = 0.7
LINKS_SHOWN = 3
LINK_ITEMS = 30  # with an LLM, three calls a goal (cached in the store after)


def link_goals(profile: Profile, judge: Judge) -> Profile:
    """The profile with each goal of the person model linked to the person's other
    entries the judge reads as serving it or working against it (one batch of
    ``serves`` pairs: every goal against the newest LINK_ITEMS other entries)."""
    goals = [e for _, found in profile.model() for e in found if e.facet == "goal"]
    if not goals:
        return profile
    others = sorted(
        (e for e in profile.entries() if e.facet != "goal"),
        key=lambda e: (e.since, e.claim),
        reverse=True,
    )[:LINK_ITEMS]
    pairs = [(g, o) for g in goals for o in others]
    verdicts = judge.serves([GoalPair(g.text, o.text, profile.person) for g, o in pairs])
    found: dict[int, dict[str, list[Link]]] = {
        g.claim: {"serves": [], "hinders": []} for g in goals
    }
    for (g, o), v in zip(pairs, verdicts, strict=True):
        if v.label in ("serves", "hinders") and v.p >= LINK_SURE:
            found[g.claim][v.label].append(Link(o.claim, o.text, v.p))
    linked = {
        g.claim: replace(
            g,
            **{
                label: tuple(sorted(links, key=lambda x: (-x.p, x.claim))[:LINKS_SHOWN])
                for label, links in found[g.claim].items()
            },
        )
        for g in goals
    }
    groups = tuple(
        (name, tuple(linked.get(e.claim, e) for e in entries)) for name, entries in profile.groups
    )
    return replace(profile, groups=groups)


# The person model's parts (Profile.model), the facet each holds and the head of its
# items in key info: what a person wants, believes, lives with, does by habit, learned
# and likes, said once and meant for months. A state is part of it where it is no fact
# of a topic (home, work, ...): a health state or a constraint ("so tense I get
# headaches scrolling").
MODEL: tuple[tuple[str, str, str], ...] = (
    ("goals", "goal", "Goal"),
    ("values and beliefs", "value", "Value"),
    ("standing states", "state", "State"),
    ("habits and routines", "habit", "Habit"),
    ("lessons", "lesson", "Lesson"),
    ("preferences", "preference", "Preference"),
)
MODEL_PART = {facet: part for part, facet, _ in MODEL}
MODEL_HEAD = {facet: head for _, facet, head in MODEL}
STATE_GROUPS = ("health and diet", "other")  # where a state is the person's, not a topic's


def in_model(e: Entry, group: str) -> bool:
    """Is the entry (filed under the profile ``group``) part of the person model?"""
    if e.facet == "state":
        return group in STATE_GROUPS
    return e.facet in MODEL_PART


# -- as of a time ---------------------------------------------------------------------------


def claim_as_of(
    c: Claim, history: Sequence[ClaimEvent], at: datetime
) -> tuple[Claim, list[ClaimEvent]]:
    """``c`` and its history as they stood at ``at`` (``c`` said by then).

    Events are dated by the other claim's said_at, so the ones after ``at``
    had not happened. A claim whose replacing claim was said after ``at`` was
    current then: its status and ``replaced_by`` are undone, and a close date
    set by that replacement is dropped (the store keeps only the close date,
    so a superseded claim's own end, if it had one, is dropped with it).
    ``Claim.holds_at`` of the result is then the claim's validity at ``at``.
    """
    known = [e for e in history if e.at <= at]
    if c.status == "current" or c.replaced_by is None:
        return c, known
    cause = [e for e in history if e.other == c.replaced_by and e.action in STATUS_EVENTS]
    if not cause or any(e.at <= at for e in cause):
        return c, known
    closed = cause[0].action in ("superseded", "rejected")
    undone = replace(c, status="current", replaced_by=None, valid_to=None if closed else c.valid_to)
    return undone, known


# -- grouping and sources ------------------------------------------------------------------


def group_of(c: Claim, attribute: str | None, read_attribute: AttributeReader | None = None) -> str:
    """The group of a claim: plans by kind, then its attribute, then KEYWORDS, else other."""
    if c.kind in PLAN_KINDS:
        return "plans"
    if attribute and attribute.casefold() in ATTRIBUTE_GROUPS:
        return ATTRIBUTE_GROUPS[attribute.casefold()]
    found = read_attribute(c.text, c.subject) if read_attribute else None
    name = getattr(found, "attribute", None)
    if name in ATTRIBUTE_GROUPS:
        return ATTRIBUTE_GROUPS[name]
    return next((group for group, words in KEYWORDS if words.search(c.text)), "other")


FIRST_HAND = "first-hand"
ASSISTANT_SOURCE = "said by the assistant"


def source_of(c: Claim, role: str | None) -> str:
    """Whose word an entry is: first-hand, reported by someone, or the assistant's."""
    if role == "assistant" or c.source == "assistant_suggested" or c.speaker == "assistant":
        return ASSISTANT_SOURCE
    if person_key(c.speaker) == person_key(c.subject):
        return FIRST_HAND
    return f"reported by {c.speaker}"


# -- the profile ------------------------------------------------------------------------------


def assemble(
    person: str,
    at: datetime,
    claims: Iterable[Claim],
    histories: Mapping[int, Sequence[ClaimEvent]],
    conflicts: Iterable[Conflict],
    roles: Mapping[int, str],
    read_attribute: AttributeReader | None = None,
) -> Profile:
    """The profile from what the store holds (pure): ``roles`` maps a claim id to the role
    of its first evidence message."""
    key = person_key(person)
    stood = {
        c.id: claim_as_of(c, histories.get(c.id, ()), at)[0]
        for c in claims
        if c.id is not None and c.said_at <= at
    }
    # small talk is no fact of a profile, unless it ended one ("Marathon is off." read as
    # chit-chat, closing the marathon plan): then it says how that fact ended
    closers = {c.replaced_by for c in stood.values() if c.status == "superseded"}
    about = {
        i: c
        for i, c in stood.items()
        if (person_key(c.subject) == key or _of_own_family(c, key))
        and c.kind != "question"
        and (c.kind != "chatter" or i in closers)
    }
    replaced = {
        i
        for i, c in about.items()
        if c.status == "superseded" and (c.valid_to is None or not c.holds_at(at))
    }
    shown = {
        i: c
        for i, c in about.items()
        if i not in replaced
        and c.status != "duplicate"
        and c.holds_at(at)
        and not (c.kind in PLAN_KINDS and c.valid_to is not None and c.valid_to <= at)
    }
    # A later conflict may give a claim said by ``at`` its attribute (a group, never a
    # value); an old value is read only for a replacement said by ``at``.
    logged = list(conflicts)
    attribute = {i: x.attribute for x in logged for i in (x.old_claim, x.new_claim)}
    old_value = {x.old_claim: x.old_value for x in logged if x.resolution == "newest_wins"}
    earlier: dict[int, list[Replaced]] = {}
    for i in replaced:
        holder = _shown_replacer(i, stood, shown)
        if holder is not None:
            c = stood[i]
            value = old_value.get(i, c.text)
            start = c.valid_from or c.said_at
            earlier.setdefault(holder, []).append(Replaced(i, c.text, value, start, c.valid_to))
    grouped: dict[str, list[Entry]] = {g: [] for g in GROUPS}
    for i, c in sorted(shown.items(), key=lambda ic: (ic[1].valid_from or ic[1].said_at, ic[0])):
        own_family = _of_own_family(c, key)  # "Ana's sister Maya lives in Porto": no home of Ana's
        entry = Entry(
            claim=i,
            text=c.text,
            kind=c.kind,
            since=c.valid_from or c.said_at,
            until=c.valid_to,
            speaker=c.speaker,
            source=FIRST_HAND if own_family else source_of(c, roles.get(i)),
            evidence=tuple((c.conversation, m) for m in c.evidence),
            replaced=tuple(sorted(earlier.get(i, []), key=lambda r: (r.since, r.claim))),
            facet=c.facet,
        )
        group = "family" if own_family else group_of(c, attribute.get(i), read_attribute)
        grouped[group].append(entry)
    return Profile(person, at, tuple((g, tuple(grouped[g])) for g in GROUPS))


def _of_own_family(c: Claim, key: str) -> bool:
    """A claim the person said of their own relative ("Ana's daughter Sofia started
    school", filed under Sofia): part of the person's family as well."""
    if person_key(c.speaker) != key or person_key(c.subject) == key:
        return False
    own = re.escape(c.speaker)
    return re.search(rf"\b{own}['’]s\s+(?:\w+\s+)?(?:{KIN_WORDS})\b", c.text, re.I) is not None


def _shown_replacer(i: int, stood: Mapping[int, Claim], shown: Mapping[int, Claim]) -> int | None:
    """The shown claim that (through a chain of replacements) replaced claim ``i``, if any."""
    seen = {i}
    nxt = stood[i].replaced_by
    while nxt is not None and nxt not in seen:
        if nxt in shown:
            return nxt
        seen.add(nxt)
        nxt = stood[nxt].replaced_by if nxt in stood else None
    return None


def build_profile(
    store: Store,
    person: str,
    at: datetime,
    *,
    read_attribute: AttributeReader | None = None,
    conversations: Sequence[str] | None = None,
    judge: Judge | None = None,
) -> Profile:
    """``person``'s profile at ``at`` from ``store`` (only ``conversations``, when given);
    with a ``judge``, each goal linked to what serves it (``link_goals``)."""
    if conversations is not None and not conversations:
        return assemble(person, at, [], {}, [], {}, read_attribute)
    scope = tuple(conversations) if conversations is not None else None
    claims = store.list_claims(Filters(conversation=scope, person=person), limit=1_000_000)
    ids = [c.id for c in claims if c.id is not None]
    histories = store.claim_histories(ids)
    allowed = set(conversations) if conversations is not None else None
    conflicts = [
        x
        for x in store.list_conflicts(None, person, limit=1_000_000)
        if allowed is None or x.conversation in allowed
    ]
    found = assemble(
        person, at, claims, histories, conflicts, _roles(store, claims), read_attribute
    )
    return found if judge is None else link_goals(found, judge)


def _roles(store: Store, claims: Sequence[Claim]) -> dict[int, str]:
    """Claim id -> the role of its first evidence message (one read per speaker and
    conversation: a speaker keeps one role in a conversation)."""
    seen: dict[tuple[str, str], str] = {}
    out: dict[int, str] = {}
    for c in claims:
        key = (c.conversation, person_key(c.speaker))
        if key not in seen and c.evidence:
            m = store.get_message(c.conversation, c.evidence[0])
            seen[key] = m.role if m is not None else "user"
        if c.id is not None:
            out[c.id] = seen.get(key, "user")
    return out
