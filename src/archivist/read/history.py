"""What no longer holds at a time, marked where a context line says it.

A context shows what was said, old and new; a superseded or expired fact is
kept (it answers "what did she eat before?") but never reads as current: the
sentence that states it carries ``HISTORY_MARK`` and the date it stopped
holding. ``bygones`` gathers, for a scope and a time, the claims that stopped
holding and the short values conflicts replaced; ``Bygones.mark`` marks a
line's sentences; ``no_longer_holds`` / ``history_line`` mark a message whose
every claim has ended.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from ..lang.evidence import (
    KEY_INFO_UNTIL,
    REPLACED_WORDS,
)
from ..lang.text import denied_still, ended_objects, endings, names_thing, no_more
from ..lang.timeground import spoken_day
from ..model import Claim, Message
from .links import as_known
from .sentences import SENTENCE_BREAK, ended_at, sentence_claims

if TYPE_CHECKING:
    from ..store.base import Store

# The mark on a line whose facts no longer hold at the context's time: what was said,
# kept because it may answer "what did she eat before?", never to be read as current.
HISTORY_MARK = "[history]"


def _facts(claims: Iterable[Claim], at: datetime) -> list[Claim]:
    """The claims said by ``at`` that speak for themselves (a duplicate's original does)."""
    return [c for c in claims if c.status != "duplicate" and c.said_at <= at]


def no_longer_holds(claims: Sequence[Claim], at: datetime) -> datetime | None:
    """When the facts of a message stopped holding, if every one of them has by ``at``.

    None when the message states nothing (no claims), or something still holds
    (an event always does: it stays true as history). Duplicates are left out:
    their older original speaks for them.
    """
    return ended_at(_facts(claims, at), at)


def history_line(line: str, since: datetime) -> str:
    """``line`` marked as history: ``… [history] (no longer holds from 5 August 2024)``."""
    return f"{line} {HISTORY_MARK} (no longer holds from {spoken_day(since)})"


def _until(day: str) -> datetime:
    """The end of a snapshot's "until" day: it holds through that day."""
    return datetime.fromisoformat(day).replace(tzinfo=UTC) + timedelta(days=1)


@dataclass(frozen=True)
class Bygones:
    """What no longer holds at a time, in a scope: the claims that stopped holding and
    the short values conflicts replaced ("Lyon", "operations coordinator")."""

    claims: tuple[Claim, ...] = ()
    values: tuple[
        tuple[str, str, datetime], ...
    ] = ()  # (old value, new value or "" for an ending, since)
    at: datetime | None = None  # the time read at: a snapshot's "until" date before it expired

    def since(
        self,
        sentence: str,
        own: Iterable[str] = (),
        evidence: frozenset[tuple[str, str]] | None = None,
    ) -> datetime | None:
        """When what the sentence states stopped holding, if it states a claim that did
        or names a replaced value; else None. ``evidence``: the messages the line
        stands for; only their claims are its own (a March "Marta is making bacalhau"
        did not end with July's claim in the same words).

        A sentence saying that something ended (``own``: what it says ended) is not
        marked for that alone: "I left the choir, I play bass in a band now" tells
        what holds now (``mark`` marks its ending clause in place).
        """
        own = {o.casefold() for o in own}
        dated = [_until(m.group(1)) for m in KEY_INFO_UNTIL.finditer(sentence)]
        if dated and self.at is not None and max(dated) <= self.at:
            return max(dated)  # a snapshot's "(since …, until 2024-09-20)", read later
        ends = [
            when
            for old, new, when in self.values
            if names_thing(sentence, old)
            and not (new and names_thing(sentence, new))
            and old not in own
        ]
        claims = self.claims
        if evidence is not None:
            claims = tuple(
                c for c in claims if any((c.conversation, e) in evidence for e in c.evidence)
            )
        ends += [c.valid_to for c in sentence_claims(sentence, claims) if c.valid_to]
        return min(ends, default=None)

    def mark(self, text: str, evidence: frozenset[tuple[str, str]] | None = None) -> str:
        """``text`` with each sentence that says what no longer holds marked as history
        where it stands, with the date, and "instead of the ThinkPad" marked inside its
        sentence. A line its renderer already marked as a whole is left as it is."""
        if HISTORY_MARK in text:
            return text
        # sentences at even places, the whitespace between them (kept as it was) at odd
        parts = re.split(f"({SENTENCE_BREAK.pattern})", text)
        for i in range(0, len(parts), 2):
            part = parts[i]
            ended = endings(part)  # read once: what the sentence says ended, and where
            since = (
                # what it says ended is no reason to mark it ("so no more fish"); "not in
                # Lyon anymore" is, as a line that names Lyon
                self.since(part, [*(thing for thing, _ in ended), *no_more(part)], evidence)
                if self.claims or self.values or self.at
                else None
            )
            if since is not None:
                parts[i] = history_line(part.rstrip(), since)
            elif REPLACED_WORDS.search(part):  # "instead of the ThinkPad": marked inside
                parts[i] = REPLACED_WORDS.sub(lambda m: f"{m.group(0)} {HISTORY_MARK}", part)
            else:
                parts[i] = self._mark_replaced(_mark_endings(part, ended))
        return "".join(parts)

    def _mark_replaced(self, sentence: str) -> str:
        """``sentence`` with a clause naming a replaced value marked where it ends, when
        another of its clauses names the value that replaced it: "Sandra retired at
        Christmas [history], my new manager is Imran". The sentence tells of the change;
        its clause about the old value is no statement that it holds."""
        for old, new, _ in self.values:
            if not new or not (names_thing(sentence, old) and names_thing(sentence, new)):
                continue
            clauses = list(_CLAUSE.finditer(sentence))
            if len(clauses) < 2:
                continue
            for m in reversed(clauses):
                clause = m.group(0)
                if names_thing(clause, old) and not names_thing(clause, new):
                    if HISTORY_MARK not in clause:
                        end = m.start() + len(clause.rstrip(" .!?"))
                        sentence = f"{sentence[:end]} {HISTORY_MARK}{sentence[end:]}"
        return sentence


# a clause: up to a comma, a semicolon or a dash between words
_CLAUSE = re.compile(r"[^,;\u2014]+(?:\s-\s[^,;\u2014]+)*")


def _mark_endings(sentence: str, ended: Sequence[tuple[str, int]]) -> str:
    """``sentence`` with each clause that says something ended ("Lucía and I split
    up", "Cancelled PureGym"; ``ended``: ``text.endings`` of it) marked as history
    where it ends: what it names is over, whatever else the sentence says may hold
    ("…, I play bass in a band now")."""
    for end in sorted({end for _, end in ended}, reverse=True):
        sentence = f"{sentence[:end]} {HISTORY_MARK}{sentence[end:]}"
    return sentence


def replaced_since(new_time: datetime, older: Claim | None) -> datetime:
    """When a conflict's older value stopped holding: where reconciliation closed the
    older claim, never before that claim was said ("not anymore!!" said on 10 April is
    not history from the 7th, the Monday its replacement was placed on)."""
    if older is None:
        return new_time
    if older.status == "superseded" and older.valid_to is not None:
        return older.valid_to
    return max(new_time, older.said_at)


def bygones(
    store: Store, convs: Sequence[str], at: datetime, said: Sequence[Message] = ()
) -> Bygones:
    """The claims of ``convs`` that no longer hold at ``at``, the values replaced by
    then, and what the messages ``said`` (those found, or those shown) say ended
    ("Last day at Nakamura today": a thing that ended with no older claim about it
    to close; "Not since October" to "Still singing with the choir?")."""
    claims: list[Claim] = []
    values: list[tuple[str, str, datetime]] = [
        (thing.casefold(), "", m.timestamp)
        for m in said
        if m.timestamp <= at
        for thing in ended_objects(m.text)
    ]
    # "Still singing with the choir?" - "Not since October": a reply ends what it denies
    by_place = {(m.conversation, m.seq): m for m in said}
    for m in said:
        asked = by_place.get((m.conversation, m.seq - 1))
        if m.timestamp <= at and asked is not None and asked.speaker != m.speaker:
            if thing := denied_still(asked.text, m.text):
                values.append((thing.casefold(), "", m.timestamp))
    for cid in convs:
        ending = as_known(store, store.ending_claims(cid), at)
        claims += [c for c in _facts(ending, at) if not c.holds_at(at)]
        conflicts = store.list_conflicts(cid)
        both = store.claims_by_id({i for k in conflicts for i in (k.old_claim, k.new_claim)})
        for k in conflicts:
            old, new = k.old_value.casefold().strip(), k.new_value.casefold().strip()
            ended = old in {o.casefold() for o in ended_objects(k.new_value)}
            since = replaced_since(k.new_time, both.get(k.old_claim))
            # known by ``at`` only if the newer claim was said by then (its start may be earlier)
            newer = both.get(k.new_claim)
            known = since <= at and (newer.said_at if newer else k.new_time) <= at
            if known and old and len(old.split()) <= 4 and (ended or old not in new):
                values.append((old, new, since))
                first = k.old_value.split()[0]
                if len(old.split()) > 1 and first[:1].isupper() and len(first) >= 4:
                    # "Nakamura" of "Nakamura Logistics"
                    values.append((first.casefold(), new, since))
    return Bygones(tuple(claims), tuple(values), at)
