"""Memory-level operations of MemoryService, the way mem0 users know them: a memory is a
stored claim, listed, read, corrected, forgotten, with its history; plus forgetting
one message, a full reset, and merging or splitting people as the user's decisions.

A mixin of MemoryService (kept apart so service.py stays under ~800 lines). Edits
are durable (store/edits.py): a forgotten claim stays forgotten and a correction
is applied again when its session is re-extracted or memory is rebuilt.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import TYPE_CHECKING, Annotated

from .args import AnyInt, Checked, Range
from .errors import InputError, NotFound
from .model import (
    CLAIM_KINDS,
    MAX_ID,
    AuditEntry,
    Claim,
    ClaimEvent,
    Decision,
    Person,
    check_at,
    parse_at,
    text_problem,
)
from .store.audit import check_actor
from .store.common import iso
from .store.sql import Filters

if TYPE_CHECKING:
    from .core import Core
    from .store.base import Store

MAX_CLAIM_TEXT = 10_000  # characters in a corrected claim
MAX_SUBJECT = 200  # characters in a corrected subject (a person's or a thing's name)
MAX_SEARCH = 10_000  # memories one search_memories call returns at most
MemoryId = AnyInt | str  # a claim id, or its digits: claim_id() says which are well formed
SearchLimit = Annotated[int, Range(1, MAX_SEARCH)]


class MemoryEdits(Checked):
    """get_all, memory, update, forget_claim, history, forget_message, reset, audit_log,
    merge_people, split_person: part of MemoryService."""

    core: Core
    store: Store
    _declared: set[tuple[str, str]]

    def get_all(
        self, user_id: str | None = None, *, limit: int = 100, conversation: str | None = None
    ) -> list[Claim]:
        """The current memories (claims) said by or about ``user_id`` (all, when None), in
        ``conversation`` when given.

        Only what holds now: superseded, duplicate and corrected claims are
        history, read with ``history(id)``; oldest first, at most ``limit``.
        """
        if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
            raise InputError(f"limit must be a positive integer; got {limit!r}")
        out: list[Claim] = []
        offset, page = 0, max(limit, 200)
        where = Filters(person=user_id, conversation=conversation)
        while len(out) < limit:
            batch = self.store.list_claims(where, limit=page, offset=offset)
            out += [c for c in batch if c.status == "current"]
            if len(batch) < page:
                break
            offset += page
        return out[:limit]

    def search_memories(
        self,
        query: str,
        *,
        user_id: str | None = None,
        limit: SearchLimit = 10,
        conversation: str | None = None,
    ) -> list[tuple[Claim, float]]:
        """Current memories (claims) best matching ``query``: BM25 and cosine fused with RRF
        choose them, and they come back by their cosine similarity to the query, highest
        first (each memory's own, also when only its words matched)."""
        from .read.fusion import rrf

        if not isinstance(query, str) or not query.strip():
            raise InputError("search needs a non-empty query")
        where = Filters(person=user_id, conversation=conversation)
        wide = max(50, limit * 5)
        words = self.store.claim_keyword_search(query, where, wide)
        vec = self.core.embedder.embed_batch([query])[0]
        near = self.store.claim_vector_search(self.core.embedder.name, vec, where, wide)
        fused = rrf({"bm25": [i for i, _ in words], "dense": [i for i, _ in near]})
        cosine = dict(near)
        claims = self.store.claims_by_id(fused)
        ranked = sorted(fused, key=lambda i: -fused[i])
        found = [claims[i] for i in ranked if i in claims and claims[i].status == "current"]
        found = found[:limit]
        unscored = [c for c in found if c.id not in cosine]
        if unscored:  # found by its words alone: its own similarity, not 0
            vecs = self.core.embedder.embed_batch([c.text for c in unscored])
            cosine.update({c.id: float(vecs[i] @ vec) for i, c in enumerate(unscored)})
        scored = [(c, float(cosine[c.id])) for c in found]
        return sorted(scored, key=lambda cs: -cs[1])

    def memory(self, memory_id: MemoryId) -> Claim:
        """One memory (claim) by id, whatever its status; NotFound if it is not stored
        (a deleted id stays unstored: ids are never reused)."""
        cid = claim_id(memory_id)
        found = self.store.claims_by_id([cid]).get(cid)
        if found is None:
            raise NotFound(f"no memory {cid}")
        return found

    def update(
        self,
        memory_id: MemoryId,
        text: str | None = None,
        *,
        reason: str = "",
        kind: str | None = None,
        subject: str | None = None,
        valid_from: datetime | str | None = None,
        valid_to: datetime | str | None = None,
    ) -> Claim:
        """Correct a memory: a new claim with ``text`` (same speaker, subject and evidence,
        method ``user-correction``) supersedes it; returns the new claim.

        ``kind``, ``subject``, ``valid_from`` and ``valid_to`` correct those too
        (None: kept; an empty string clears a date). The old claim is kept as
        history (status superseded, ``replaced_by`` the new one, never having
        held), with a claim event and a ``correction`` conflict. Correcting a
        claim that was corrected before corrects its latest version, so the chain
        keeps every step.
        """
        from .write.index_text import claim_embed_text, claim_search_text, text_hash

        if text is not None and (not isinstance(text, str) or not text.strip()):
            raise InputError("update() needs the corrected text")
        if text is not None and len(text) > MAX_CLAIM_TEXT:
            raise InputError(f"the corrected text is over {MAX_CLAIM_TEXT} characters")
        if text is not None and (problem := text_problem(text)):
            raise InputError(f"the corrected text {problem}")
        old = self.memory(memory_id)
        while old.status == "superseded" and old.replaced_by is not None:
            nxt = self.store.claims_by_id([old.replaced_by]).get(old.replaced_by)
            if nxt is None or nxt.method != "user-correction":
                break
            old = nxt
        fields = _corrected_fields(old, kind, subject, valid_from, valid_to)
        if text is None and not fields:
            raise InputError("update() needs the corrected text, kind, subject or dates")
        changes = {"text": " ".join((text if text is not None else old.text).split())}
        for name, value in fields.items():
            changes[name] = datetime.fromisoformat(value) if value and "valid" in name else value
        draft = Claim(**{**_fields(old), **changes})
        embed = claim_embed_text(draft)
        vectors, _ = self.core.embed_missing({text_hash(embed): embed})
        new_id = self.store.correct_claim(
            old.id,  # type: ignore[arg-type]
            draft.text,
            claim_search_text(draft),
            text_hash(embed),
            self.core.embedder.name,
            vectors,
            reason or "corrected by the user",
            fields,
        )
        if new_id is None:
            raise NotFound(f"no memory {memory_id}")
        return self.memory(new_id)

    def forget_claim(self, memory_id: MemoryId, *, reason: str = "", actor: str = "python") -> int:
        """Forget a memory for good (with its correction chain); how many claims went.

        Its evidence messages stay; re-extracting them does not bring it back. Its id
        is never given to another memory: it answers NotFound from now on. The audit
        log gets a line naming ``actor`` (who asked).
        """
        check_actor(actor)
        cid = self.memory(memory_id).id
        return self.store.forget_claims(
            [cid],  # type: ignore[list-item]
            reason or "forgotten by the user",
            actor=actor,
        )

    def history(self, memory_id: MemoryId) -> list[ClaimEvent]:
        """What happened to a memory, in order: reconciliation and the user's corrections."""
        cid = self.memory(memory_id).id
        return self.store.claim_history(cid)  # type: ignore[arg-type]

    def forget_message(self, conversation: str, message_id: str, *, actor: str = "python") -> int:
        """Delete one message from every index, then re-derive its session's claims.

        Claims and episodes built on it go, summaries of its session and the
        conversation's roll-ups, its entities' dossiers and the conversation's
        persons' key info are cleared for the next consolidation round to
        rebuild; the session is extracted again from what remains (its claims get
        new ids). The audit log gets a line naming ``actor`` (who asked).
        """
        check_actor(actor)
        if not self.store.delete_message(conversation, message_id, actor=actor):
            raise NotFound(f"no message {message_id!r} in conversation {conversation!r}")
        self.store.ensure_identities([conversation])
        self.core.forget_people()
        self._declared.clear()  # a forgotten person is declared again
        if conversation in {c["id"] for c in self.store.conversations()}:
            self.extract([conversation])  # type: ignore[attr-defined]
        return 1

    def reset(self, *, actor: str = "python") -> None:
        """Forget everything: every message, claim, person, job and cached response.

        Ids go on from where they were (none is handed out again); the audit log
        stays and gets a line for the reset naming ``actor`` (who asked).
        """
        check_actor(actor)
        self.store.reset(actor=actor)
        self.core.forget_people()
        self._declared.clear()  # a forgotten person is declared again

    def audit_log(self, limit: int = 100) -> list[AuditEntry]:
        """The newest ``limit`` deletions, newest first: who, when, what kind, how many
        (every front end's deletions, resets and rebuilds; never the deleted text)."""
        return self.store.audit_log(limit)

    # -- people as the user decides them --------------------------------------------------

    def merge_people(self, keep: str, drop: str, *, reason: str = "") -> Person:
        """Make two persons one (the user's decision: method "user"); returns the merged one.

        Automatic resolution never splits persons, so the merge stands.
        """
        from .write.people import KIND
        from .write.people_tools import person_label

        a, b = self.person(keep), self.person(drop)  # type: ignore[attr-defined]
        if a.id == b.id:
            raise InputError(f"{keep!r} and {drop!r} are already one person ({a.id})")
        decision = Decision(
            KIND,
            person_label(a),
            person_label(b),
            "MERGE",
            reason or "merged by the user",
            method="user",
        )
        self.store.add_decision(decision, merge=(a.id, b.id))
        return self.person(a.id)  # type: ignore[attr-defined]

    def split_person(
        self, person: str, conversation: str, name: str, *, reason: str = ""
    ) -> Person:
        """Move one identity (``name`` in ``conversation``) out of ``person`` into a person of
        its own, as the user's decision (SEPARATE, method "user"); returns the new person.

        Automatic resolution does not merge the two again (write/people.py), and a
        declaration of that identity is dropped with the split.
        """
        from .lang.text import person_key
        from .write.people import KIND
        from .write.people_tools import identity_label, person_label

        p = self.person(person)  # type: ignore[attr-defined]
        ident = next(
            (
                (c, n)
                for c, n in p.identities
                if c == conversation and person_key(n) == person_key(name)
            ),
            None,
        )
        if ident is None:
            raise NotFound(f"{person!r} has no identity {name!r} in conversation {conversation!r}")
        if len(p.identities) == 1:
            raise InputError(f"{person!r} has only that identity: nothing to split")
        rest = Person(p.id, p.name, tuple(i for i in p.identities if i != ident))
        new_id = self.store.split_identity(*ident)
        self.store.add_decision(
            Decision(
                KIND,
                person_label(rest),
                identity_label(*ident),
                "SEPARATE",
                reason or "separated by the user",
                method="user",
            )
        )
        self.core.forget_people()
        self._declared.clear()  # a forgotten person is declared again
        return self.person(new_id)  # type: ignore[attr-defined]


def _corrected_fields(
    old: Claim,
    kind: str | None,
    subject: str | None,
    valid_from: datetime | str | None,
    valid_to: datetime | str | None,
) -> dict[str, str | None]:
    """The store's ``fields`` of a correction: the values given, checked; a date as ISO
    text, or None where an empty string clears it."""
    out: dict[str, str | None] = {}
    if kind is not None:
        if kind not in CLAIM_KINDS:
            raise InputError(f"kind must be one of {', '.join(CLAIM_KINDS)}; got {_shown(kind)}")
        out["kind"] = kind
    if subject is not None:
        if not isinstance(subject, str) or not subject.strip() or len(subject) > MAX_SUBJECT:
            raise InputError(f"subject must be a name of 1 to {MAX_SUBJECT} characters")
        if problem := text_problem(subject):
            raise InputError(f"subject {problem}")
        out["subject"] = " ".join(subject.split())
    for name, value in (("valid_from", valid_from), ("valid_to", valid_to)):
        if value is None:
            continue
        when = _when(value, name)
        out[name] = when.isoformat() if when else None
    start = out["valid_from"] if "valid_from" in out else iso(old.valid_from)
    end = out["valid_to"] if "valid_to" in out else iso(old.valid_to)
    if start and end and datetime.fromisoformat(end) < datetime.fromisoformat(start):
        raise InputError("valid_to is before valid_from")
    return out


def _when(value: datetime | str, name: str) -> datetime | None:
    """A corrected date: a datetime with a timezone or ISO text (a bare date is its start,
    in UTC); an empty string clears it (None)."""
    return (
        parse_at(value, name, day_start=True) if isinstance(value, str) else check_at(value, name)
    )


def claim_id(memory_id: MemoryId) -> int:
    """A memory id as the store keys it: an integer (front ends pass text).

    Not an integer: InputError. An integer no claim can have (below 1, or beyond the
    64 bits both backends store): NotFound, as for any id that is not stored.
    """
    if isinstance(memory_id, bool):
        raise InputError(f"a memory id is an integer; got {memory_id!r}")
    if isinstance(memory_id, str) and _INTEGER.fullmatch(memory_id.strip()):
        text = memory_id.strip().lstrip("+")
        if len(text.lstrip("-").lstrip("0")) > len(str(MAX_ID)):  # no int() of 5,000 digits
            raise NotFound(f"no memory {_shown(memory_id)}")
        memory_id = int(text)
    if not isinstance(memory_id, int):
        raise InputError(f"a memory id is an integer; got {_shown(memory_id)}")
    if not 1 <= memory_id <= MAX_ID:
        raise NotFound(f"no memory {_shown(memory_id)}")
    return memory_id


_INTEGER = re.compile(r"[+-]?[0-9]+", re.ASCII)


def _shown(value: object) -> str:
    """A caller's value in a one-line error: repr, cut short."""
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _fields(c: Claim) -> dict:
    """A claim's fields as keywords, without store ids or reconciliation state."""
    from dataclasses import fields

    skip = {"id", "episode", "status", "replaced_by", "entities", "evidence_claims"}
    return {f.name: getattr(c, f.name) for f in fields(c) if f.name not in skip} | {
        "method": "user-correction"
    }
