"""Layers 1-2, written once for both backends: entities, claim history, conflicts.

Reconciliation never deletes or rewrites what the archivist extracted: it
sets a claim's status, ``replaced_by`` and ``closed_at`` (validity closed by a
newer claim; reads show ``coalesce(closed_at, valid_to)``), appends claim
events and conflicts, and files entity mentions. ``reset_reconciliation``
undoes all of it for a conversation, so a re-extracted session is reconciled
again from scratch.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import datetime

import numpy as np

from ..errors import StaleReconciliation
from ..model import Claim, ClaimEvent, Conflict, Entity
from . import sql as q
from .common import Body, Connection, all_of, dt, json_tuple, record, retried
from .derived import CLAIM_COLS, claim_cols, decoded_claim, row_to_claim
from .records import ReconcileBasis, ReconcileBatch

ENTITY_COLS = (
    "id, conversation, owner, name, kind, aliases, roles, states, brief, dossier, "
    "first_seen, last_seen, mentions, method"
)
_EVENT_FIELDS = "id, claim, action, other, at, detail"
_CONFLICT_COLS = (
    "id, conversation, subject, attribute, old_claim, new_claim, old_value, new_value, "
    "old_time, new_time, kind, resolution, method"
)
# PostgreSQL's answers to a write racing another transaction (serialization failure,
# deadlock, a row referenced or claimed meanwhile): the batch is stale, decided again.
ELSEWHERE = 500  # a declared person's latest claims from other chats read per reconciliation
_RACED = frozenset({"40001", "40P01", "23503", "23505"})


def row_to_entity(r: tuple) -> Entity:
    return record(
        Entity,
        ENTITY_COLS,
        r,
        aliases=json_tuple,
        roles=json_tuple,
        states=lambda text: tuple(tuple(s) for s in json.loads(text)),
        first_seen=dt,
        last_seen=dt,
    )


def _row_to_conflict(r: tuple) -> Conflict:
    at = datetime.fromisoformat
    return record(Conflict, _CONFLICT_COLS, r, old_time=at, new_time=at)


def entity_brief(e: Entity) -> str:
    """Two sentences on who or what an entity is, from its own record (no invention)."""
    what = f"{e.name} ({e.kind})"
    if e.roles:
        what += ": " + "; ".join(e.roles[:3])
    also = f", also called {', '.join(e.aliases[:3])}" if e.aliases else ""
    when = (
        f" from {e.first_seen:%Y-%m-%d} to {e.last_seen:%Y-%m-%d}"
        if e.first_seen and e.last_seen
        else ""
    )
    return f"{what}{also}. Mentioned {e.mentions} time(s) by {e.owner}{when}."


class Reconciliation(Body):
    """The ReconcileStore part of the Store protocol (see the module docstring)."""

    def claims_to_reconcile(self, conversation: str) -> tuple[list[Claim], list[Claim]]:
        """(claims already reconciled, claims not yet), each oldest first.

        Only the reconciled claims of the pending claims' speakers are read: a
        claim is only ever compared with the same speaker's (write/reconcile.py),
        and an add to a long conversation should not read all of it back.
        """
        todo = [
            decoded_claim(r)
            for r in self._db.execute(
                f"SELECT {CLAIM_COLS} FROM claims WHERE conversation = ? AND reconciled = 0 "
                "ORDER BY said_epoch, id",
                (conversation,),
            ).fetchall()
        ]
        if not todo:
            return [], []
        speakers = sorted({q.person_key(c.speaker) for c in todo})
        marks = ", ".join("?" for _ in speakers)
        done = [
            decoded_claim(r)
            for r in self._db.execute(
                f"SELECT {CLAIM_COLS} FROM claims WHERE conversation = ? AND reconciled <> 0 "
                f"AND speaker_key IN ({marks}) ORDER BY said_epoch, id",
                (conversation, *speakers),
            ).fetchall()
        ]
        return done, todo

    def claims_of_declared_elsewhere(
        self, conversation: str, speakers: Iterable[str]
    ) -> list[Claim]:
        """The current, reconciled claims that ``speakers`` of ``conversation`` (names)
        said in their other conversations, for those a caller declared one person (a
        user id across chats): what one of their chats says may end what another said.
        Oldest first; at most ``ELSEWHERE`` of the latest."""
        keys = sorted({q.person_key(s) for s in speakers})
        if not keys:
            return []
        marks = ", ".join("?" for _ in keys)
        rows = self._db.execute(
            f"SELECT {claim_cols('c')} "
            "FROM claims c JOIN person_identities pi ON pi.conversation = c.conversation "
            "AND pi.name_key = c.speaker_key WHERE c.conversation <> ? AND c.reconciled <> 0 "
            "AND c.status = 'current' AND pi.person_id IN (SELECT person_id FROM "
            "person_identities WHERE conversation = ? AND declared_id IS NOT NULL AND "
            f"name_key IN ({marks})) ORDER BY c.said_epoch DESC, c.id DESC LIMIT ?",
            (conversation, conversation, *keys, ELSEWHERE),
        ).fetchall()
        return [decoded_claim(r) for r in reversed(rows)]

    def claim_vectors(self, model: str, ids: Iterable[int]) -> dict[int, np.ndarray]:
        """claim id -> its stored vector (claims whose vector is missing are left out)."""
        return self._vectors_of("claims", model, ids)

    def save_reconciliation(self, batch: ReconcileBatch) -> None:
        """Write one conversation's reconciliation atomically (all of it or none).

        Raises StaleReconciliation, writing nothing, when ``batch.basis`` no longer
        holds: another writer reconciled (or reset) the conversation since it was read.
        """
        try:
            self._save_reconciliation(batch)
        except Exception as e:
            if getattr(e, "sqlstate", None) in _RACED:  # psycopg's errors carry one
                raise StaleReconciliation(f"{batch.conversation!r}: {e}") from e
            raise

    def _save_reconciliation(self, batch: ReconcileBatch) -> None:
        now = self._now_iso()
        with self._write() as db:
            if batch.basis is not None:
                self._check_basis(db, batch.conversation, batch.basis)
            db.executemany(
                "UPDATE claims SET status = ?, replaced_by = ?, closed_at = ? WHERE id = ?",
                [
                    (st, by, closed.isoformat() if closed else None, cid)
                    for cid, (st, by, closed) in batch.updates.items()
                ],
            )
            db.executemany(
                "INSERT INTO claim_events(claim_id, conversation, action, other_claim, at, "
                "detail, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                [
                    (
                        e.claim,
                        batch.conversation,
                        e.action,
                        e.other,
                        e.at.isoformat(),
                        json.dumps(e.detail),
                        now,
                    )
                    for e in batch.events
                ],
            )
            db.executemany(
                f"INSERT INTO conflicts({_CONFLICT_COLS.replace('id, ', '', 1)}, "
                "created_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?) ON CONFLICT DO NOTHING",
                [
                    (
                        c.conversation,
                        c.subject,
                        c.attribute,
                        c.old_claim,
                        c.new_claim,
                        c.old_value,
                        c.new_value,
                        c.old_time.isoformat(),
                        c.new_time.isoformat(),
                        c.kind,
                        c.resolution,
                        c.method,
                        now,
                    )
                    for c in batch.conflicts
                ],
            )
            self._put_vectors(db, batch.model, batch.vectors)
            for entity, claim_ids, search_text, embed_hash in batch.entities:
                self._save_entity(db, entity, claim_ids, search_text, embed_hash, batch.model, now)
            db.executemany(
                "UPDATE claims SET reconciled = 1 WHERE id = ?", [(i,) for i in batch.reconciled]
            )

    def _check_basis(self, db: Connection, conversation: str, basis: ReconcileBasis) -> None:
        """Raise StaleReconciliation unless the claims judged are still unreconciled (their
        rows locked on PostgreSQL, in id order), their speakers' reconciled claims as many
        and the conversation's entities unchanged (a competing batch or a reset has moved
        at least one of these: its claims to judge always include ours)."""
        todo = sorted(set(basis.todo))
        open_ = 0
        for chunk in self._d.chunks(todo):
            cond, params = self._d.in_ids("id", chunk)
            open_ += len(
                db.execute(
                    f"SELECT id FROM claims WHERE {cond} AND reconciled = 0 "
                    f"ORDER BY id{self._d.lock_rows}",
                    params,
                ).fetchall()
            )
        stale = open_ != len(todo)
        if not stale:
            speakers = sorted(
                {
                    k
                    for (k,) in self._by_ids(
                        "SELECT speaker_key FROM claims WHERE {ids}", "id", todo
                    )
                }
            )
            cond, params = self._d.in_ids("speaker_key", speakers)
            [(done,)] = db.execute(
                f"SELECT count(*) FROM claims WHERE conversation = ? AND reconciled <> 0 "
                f"AND {cond}",
                (conversation, *params),
            ).fetchall()
            [(n, top)] = db.execute(
                "SELECT count(*), coalesce(max(id), 0) FROM entities WHERE conversation = ?",
                (conversation,),
            ).fetchall()
            stale = (done, n, top) != (basis.done, basis.entities, basis.top_entity)
        if stale:
            raise StaleReconciliation(
                f"conversation {conversation!r} was reconciled by another writer meanwhile"
            )

    def _save_entity(
        self,
        db: Connection,
        e: Entity,
        claim_ids: tuple[int, ...],
        search_text: str,
        embed_hash: str,
        model: str,
        now: str,
    ) -> None:
        values = (
            e.owner,
            q.person_key(e.owner),
            e.name,
            q.person_key(e.name),
            e.kind,
            json.dumps(list(e.aliases)),
            json.dumps(list(e.roles)),
            json.dumps([list(s) for s in e.states]),
            e.brief or entity_brief(e),
            e.first_seen.isoformat() if e.first_seen else None,
            e.last_seen.isoformat() if e.last_seen else None,
            e.mentions,
            e.method,
            search_text,
            q.scope_text(e.conversation, (e.owner,)),
            embed_hash,
            self._vector_id(db, model, embed_hash),
        )
        if e.id is None:
            [eid] = db.insert_ids(
                "INSERT INTO entities(owner, owner_key, name, name_key, kind, aliases, roles, "
                "states, brief, first_seen, last_seen, mentions, method, search_text, scope, "
                "embed_hash, vec_id, conversation, created_at) "
                "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?) RETURNING id",
                [(*values, e.conversation, now)],
            )
        else:
            db.execute(
                "UPDATE entities SET owner = ?, owner_key = ?, name = ?, name_key = ?, kind = ?, "
                "aliases = ?, roles = ?, states = ?, brief = ?, first_seen = ?, last_seen = ?, "
                "mentions = ?, method = ?, search_text = ?, scope = ?, embed_hash = ?, "
                "vec_id = ? WHERE id = ?",
                (*values, e.id),
            )
            eid = e.id
        db.executemany(
            "INSERT INTO claim_entities(claim_id, entity_id) VALUES (?, ?) ON CONFLICT DO NOTHING",
            [(c, eid) for c in claim_ids],
        )

    @retried
    def reset_reconciliation(self, conversation: str) -> None:
        """Forget a conversation's reconciliation (claims back to as-extracted)."""
        with self._write() as db:
            self._reset_reconciliation(db, conversation)

    def _reset_reconciliation(self, db: Connection, conversation: str) -> None:
        for table in ("claim_events", "conflicts", "entities"):
            db.execute(f"DELETE FROM {table} WHERE conversation = ?", (conversation,))
        # what this conversation's claims closed in a declared person's other chats holds
        # again until this conversation is judged anew (its events went with it)
        db.execute(
            "UPDATE claims SET status = 'current', replaced_by = NULL, closed_at = NULL "
            "WHERE conversation <> ? AND status IN ('superseded', 'duplicate') AND "
            "replaced_by IN (SELECT id FROM claims WHERE conversation = ?)",
            (conversation, conversation),
        )
        db.execute(
            "UPDATE claims SET status = 'current', replaced_by = NULL, closed_at = NULL, "
            "reconciled = 0 WHERE conversation = ?",
            (conversation,),
        )
        # The user's corrections are no reconciliation of ours: they stay.
        self._reapply_corrections(db, conversation)  # type: ignore[attr-defined]

    def _reopen_orphans(self, db: Connection) -> None:
        """A claim closed by one that is gone (forgotten, its message deleted, its chat
        rebuilt) holds again: nothing that is still remembered ended it."""
        db.execute(
            "UPDATE claims SET status = 'current', replaced_by = NULL, closed_at = NULL "
            "WHERE replaced_by IS NOT NULL AND status IN ('superseded', 'duplicate') AND "
            "NOT EXISTS (SELECT 1 FROM claims k WHERE k.id = claims.replaced_by)"
        )

    # -- reads -----------------------------------------------------------------------------

    def list_entities(
        self,
        conversation: str | None = None,
        owner: str | None = None,
        name: str | None = None,
        limit: int = 1000,
    ) -> list[Entity]:
        """Entities, most mentioned first; ``name`` matches the name or any alias."""
        where, params = all_of(
            ("conversation = ?", [conversation]) if conversation is not None else None,
            ("owner_key = ?", [q.person_key(owner)]) if owner is not None else None,
            (
                f"(name_key = ? OR {self._d.json_has('entities.aliases')})",
                [q.person_key(name), q.person_key(name)],
            )
            if name is not None
            else None,
        )
        rows = self._db.execute(
            f"SELECT {ENTITY_COLS} FROM entities WHERE {where} ORDER BY mentions DESC, id LIMIT ?",
            (*params, int(limit)),
        )
        return [row_to_entity(r) for r in rows]

    def entity_claims(self, entity_id: int, current_only: bool = True) -> list[Claim]:
        """Claims mentioning the entity, oldest first (only current ones by default)."""
        status = "AND c.status = 'current'" if current_only else ""
        cols = claim_cols("c")
        rows = self._db.execute(
            f"SELECT {cols} FROM claims c JOIN claim_entities ce ON ce.claim_id = c.id "
            f"WHERE ce.entity_id = ? {status} ORDER BY c.said_epoch, c.id",
            (int(entity_id),),
        )
        return [row_to_claim(r) for r in rows]

    def claim_history(self, claim_id: int) -> list[ClaimEvent]:
        """Every event of a claim, in the order reconciliation recorded them."""
        return self.claim_histories([claim_id]).get(int(claim_id), [])

    def claim_histories(self, claim_ids: Iterable[int]) -> dict[int, list[ClaimEvent]]:
        """Claim id -> its events in recorded order (claims without events are absent)."""
        out: dict[int, list[ClaimEvent]] = {}
        for r in self._by_ids(
            "SELECT id, claim_id, action, other_claim, at, detail FROM claim_events "
            "WHERE {ids} ORDER BY id",
            "claim_id",
            (int(i) for i in claim_ids),
        ):
            event = record(
                ClaimEvent, _EVENT_FIELDS, r, at=datetime.fromisoformat, detail=json.loads
            )
            out.setdefault(event.claim, []).append(event)
        return out

    def list_conflicts(
        self, conversation: str | None = None, subject: str | None = None, limit: int = 1000
    ) -> list[Conflict]:
        """Conflicts in the order their newer claims start."""
        where, params = all_of(
            ("conversation = ?", [conversation]) if conversation is not None else None,
            ("lower(subject) = ?", [q.person_key(subject)]) if subject is not None else None,
        )
        rows = self._db.execute(
            f"SELECT {_CONFLICT_COLS} FROM conflicts WHERE {where} "
            f"ORDER BY new_time{self._d.order_text}, id LIMIT ?",
            (*params, int(limit)),
        )
        return [_row_to_conflict(r) for r in rows]

    def reconcile_stats(self) -> dict:
        """Counts for stats and benchmarks."""
        return self._counts(
            {
                "entities": "SELECT count(*) FROM entities",
                "entity_mentions": "SELECT count(*) FROM claim_entities",
                "claims_by_status": "SELECT status, count(*) FROM claims GROUP BY status",
                "conflicts": "SELECT count(*) FROM conflicts",
                "claims_unreconciled": "SELECT count(*) FROM claims WHERE reconciled = 0",
            }
        )
