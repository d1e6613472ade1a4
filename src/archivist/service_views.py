"""What reconciliation, people and consolidation made, as MemoryService reads it.

A mixin of MemoryService (kept apart so service.py stays under ~800 lines):
thin, typed reads of the store plus the two on-demand jobs (reconcile,
resolve_people). Nothing here holds state of its own.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from .args import Checked
from .errors import InputError, NotFound
from .model import (
    Claim,
    ClaimEvent,
    Conflict,
    Decision,
    Entity,
    Person,
    Scene,
    Summary,
    check_at,
)
from .service_edits import MemoryId
from .service_edits import claim_id as to_claim_id
from .store.sql import Filters

if TYPE_CHECKING:
    from .core import Core
    from .profile import Profile
    from .store.base import Store


class MemoryViews(Checked):
    """Entities, claim history, conflicts, timelines, persons, decisions, scenes, summaries,
    dossiers, key info and usefulness: part of MemoryService."""

    core: Core
    store: Store

    # -- reconciliation (layers 1-2) -------------------------------------------------

    def reconcile(self, conversation: str | None = None) -> dict:
        """Layers 1-2 now: entities resolved, duplicates merged, conflicts logged."""
        from .write.reconcile_job import run_reconcile

        return run_reconcile(self.core, {"conversation": conversation} if conversation else {})

    def entities(
        self,
        *,
        conversation: str | None = None,
        owner: str | None = None,
        name: str | None = None,
        person: str | None = None,
        limit: int = 1000,
    ) -> list[Entity]:
        """Resolved entities, most mentioned first (``person``: entities that person mentioned)."""
        return self.store.list_entities(conversation, owner or person, name, limit)

    def claim_history(self, claim_id: MemoryId) -> list[ClaimEvent]:
        """What reconciliation did to a claim, in order (nothing is ever deleted)."""
        cid = to_claim_id(claim_id)
        if not self.store.claims_by_id([cid]):
            raise NotFound(f"no claim {cid}")
        return self.store.claim_history(cid)

    def conflicts(
        self, *, conversation: str | None = None, subject: str | None = None
    ) -> list[Conflict]:
        """Logged conflicts, in the order their newer claims start."""
        return self.store.list_conflicts(conversation, subject)

    def timeline(
        self,
        entity: str,
        *,
        conversation: str | None = None,
        owner: str | None = None,
        at: datetime | None = None,
    ) -> list[tuple[Claim, list[ClaimEvent]]]:
        """Claims about an entity or person over time, with validity, speaker and history.

        ``entity`` is an entity name or alias, or a person's name: claims about
        the person (subject) and claims mentioning an entity of that name, in
        the order they start to hold, superseded ones included. ``at``: memory
        as it stood then: claims said by ``at``, each with its status and
        history as of ``at`` (profile.claim_as_of: one replaced later was
        current then), so ``claim.holds_at(at)`` is its validity then.
        """
        from .profile import claim_as_of

        check_at(at)
        found: dict[int, Claim] = {}
        for e in self.store.list_entities(conversation, owner, entity, 1_000_000):
            for c in self.store.entity_claims(e.id, current_only=False):  # type: ignore[arg-type]
                found[c.id] = c  # type: ignore[index]
        for c in self.store.list_claims(
            Filters(conversation=conversation, person=entity), limit=1_000_000
        ):
            if c.subject.casefold() == entity.casefold():
                found[c.id] = c  # type: ignore[index]
        if not found:
            raise NotFound(f"nothing known about {entity!r}")
        ordered = sorted(found.values(), key=lambda c: (c.valid_from or c.said_at, c.id))
        history = self.store.claim_histories(c.id for c in ordered)  # type: ignore[misc]
        if at is None:
            return [(c, history.get(c.id, [])) for c in ordered]  # type: ignore[arg-type]
        said = [c for c in ordered if c.said_at <= at]
        known = [claim_as_of(c, history.get(c.id, []), at) for c in said]  # type: ignore[arg-type]
        if not known:
            raise NotFound(f"nothing known about {entity!r} as of {at.isoformat()}")
        return known

    def profile(
        self,
        person: str,
        *,
        at: datetime | None = None,
        conversations: Sequence[str] | None = None,
    ) -> Profile:
        """What holds for ``person`` at ``at`` (default now), grouped: home, work, ..., other.

        Claims about the person (by name, across conversations; ``conversations``
        narrows them) that hold then, each with since when, who said it, its
        evidence and the values it replaced (profile.py). NotFound when
        nobody of that name sent or received a message and no claim is about them.
        """
        from .lang.attributes import attribute_of
        from .lang.text import person_key
        from .profile import build_profile

        if not isinstance(person, str) or not person.strip():
            raise InputError("profile() needs a person's name")
        person = " ".join(person.split())
        when = check_at(at) or self.core.clock()
        found = build_profile(
            self.store,
            person,
            when,
            read_attribute=attribute_of,
            conversations=conversations,
            judge=self.core.judge,
        )
        if not found.entries() and not self.store.list_claims(Filters(person=person), limit=1):
            if person_key(person) not in {person_key(p) for p in self.core.people()}:
                raise NotFound(f"no person {person!r}")
        return found

    # -- people across conversations (layer 3) ----------------------------------------

    def persons(self) -> list[Person]:
        """Persons across conversations, each with its (conversation, name) identities.

        add() and delete() keep identities up to date (one per new speaker), so
        this is a pure read; merging waits for resolve_people().
        """
        return self.store.persons()

    def person(self, id_or_name: str) -> Person:
        """One person by id, or by a name only one person goes by (NotFound / InputError)."""
        if (by_id := self.store.person(id_or_name)) is not None:
            return by_id
        found = self.persons()
        from .lang.text import person_key

        key = person_key(id_or_name)
        named = [
            p
            for p in found
            if key in {person_key(p.name), *(person_key(n) for _, n in p.identities)}
        ]
        if not named:
            raise NotFound(f"no person {id_or_name!r}")
        if len(named) > 1:
            ids = ", ".join(p.id for p in named)
            raise InputError(f"{id_or_name!r} names {len(named)} persons ({ids}); use an id")
        return named[0]

    def decisions(self, kind: str | None = None) -> list[Decision]:
        """Stored identity decisions (MERGE / SEPARATE) with reasons and evidence, oldest first."""
        return self.store.decisions(kind)

    def declare_identity(self, user_id: str, conversation: str, name: str) -> Person:
        """State that ``name`` in ``conversation`` is the user ``user_id``; no LLM involved."""
        from .write.people import declare

        return declare(self.store, user_id, conversation, name)

    def resolve_people(self, *, max_steps: int | None = None) -> dict:
        """Run the layer-3 job now: identities, declarations, then the identity agent."""
        from .write.people import run_people

        return run_people(self.core, {} if max_steps is None else {"max_steps": max_steps})

    # -- consolidation output: scenes, summaries, dossiers, key info, usefulness --------

    def scenes(self, conversation: str | None = None) -> list[Scene]:
        """Themes found by consolidation (the scenes job), oldest first."""
        return self.store.list_scenes(conversation)

    def summaries(self, conversation: str | None = None, level: int | None = None) -> list[Summary]:
        """Message summaries (1 = a session, higher = roll-ups), by level then time."""
        if level is not None and (not isinstance(level, int) or level < 1):
            raise InputError(f"level must be a positive integer; got {level!r}")
        return self.store.list_summaries(conversation, level)

    def dossier(self, entity_id: int) -> str:
        """An entity's capped summary of its current claims ('' until the dossiers job ran)."""
        text = self.store.entity_dossier(entity_id)
        if text is None:
            raise NotFound(f"no entity {entity_id!r}")
        return text

    def key_info(self, person_id: str) -> str:
        """A person's capped key-info summary ('' until the key_info job ran)."""
        text = self.store.person_key_info(person_id)
        if text is None:
            raise NotFound(f"no person {person_id!r}")
        return text

    def record_context(
        self,
        items: Sequence[tuple[str, str | int, str] | tuple[str, str | int, str, float]],
        reply: str,
        person: str | None = None,
        conversation: str | None = None,
        turn_id: str = "",
    ) -> int:
        """Log the (kind, id, text[, score]) items shown for a turn and the reply, for
        usefulness scoring and for the memory browser's "what the assistant saw";
        ``turn_id``: the message of ``conversation`` that asked."""
        rows = list(items)
        if not all(isinstance(r, (tuple, list)) and len(r) in (3, 4) for r in rows):
            raise InputError("record_context() items are (kind, id, text[, score]) tuples")
        return self.store.log_context(
            person, conversation, rows, reply or "", turn_id, keep=self.settings.context_log_keep
        )

    def usefulness(self, kind: str, ids: Iterable[str | int]) -> dict[str | int, float]:
        """How useful each item turned out to be: (used + 1) / (shown + 2); 0.5 if never scored."""
        from .read.context import usefulness

        return usefulness(self.store, kind, ids)
