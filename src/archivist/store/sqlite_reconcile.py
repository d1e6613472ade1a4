"""SQLite persistence of layers 1-2: entities, claim history, conflicts.

A mixin of SQLiteStore, kept apart so no module grows past ~500 lines.
Reconciliation never deletes or rewrites what the archivist extracted: it
sets a claim's status, ``replaced_by`` and ``closed_at`` (validity closed by a
newer claim; reads show ``coalesce(closed_at, valid_to)``), appends claim
events and conflicts, and files entity mentions. ``reset_reconciliation``
undoes all of it for a conversation, so a re-extracted session is reconciled
again from scratch.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable
from datetime import UTC, datetime

import numpy as np

from ..model import Claim, ClaimEvent, Conflict, Entity
from . import sql as q
from .base import ReconcileBatch
from .sqlite_derived import _dt
from .vecindex import pack

_ENTITY_COLS = (
    "id, conversation, owner, name, kind, aliases, roles, states, brief, dossier, "
    "first_seen, last_seen, mentions, method"
)
_CONFLICT_COLS = (
    "id, conversation, subject, attribute, old_claim, new_claim, old_value, new_value, "
    "old_time, new_time, kind, resolution, method"
)


def _row_to_entity(r: tuple) -> Entity:
    i, conv, owner, name, kind, aliases, roles, states, brief, dossier, fs, ls, n, meth = r
    return Entity(
        id=i,
        conversation=conv,
        owner=owner,
        name=name,
        kind=kind,
        aliases=tuple(json.loads(aliases)),
        roles=tuple(json.loads(roles)),
        states=tuple(tuple(s) for s in json.loads(states)),
        brief=brief,
        dossier=dossier,
        first_seen=_dt(fs),
        last_seen=_dt(ls),
        mentions=n,
        method=meth,
    )


def _row_to_conflict(r: tuple) -> Conflict:
    i, conv, subj, attr, oc, nc, ov, nv, ot, nt, kind, res, meth = r
    return Conflict(
        id=i,
        conversation=conv,
        subject=subj,
        attribute=attr,
        old_claim=oc,
        new_claim=nc,
        old_value=ov,
        new_value=nv,
        old_time=datetime.fromisoformat(ot),
        new_time=datetime.fromisoformat(nt),
        kind=kind,
        resolution=res,
        method=meth,
    )


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


class ReconcileMixin:
    """Part of SQLiteStore (see the module docstring)."""

    _db: sqlite3.Connection

    def claims_to_reconcile(self, conversation: str) -> tuple[list[Claim], list[Claim]]:
        """(claims already reconciled, claims not yet), each oldest first."""
        from .sqlite_derived import _CLAIM_COLS, _row_to_claim

        rows = self._db.execute(
            f"SELECT {_CLAIM_COLS}, reconciled FROM claims WHERE conversation = ? "
            "ORDER BY said_epoch, id",
            (conversation,),
        ).fetchall()
        done = [_row_to_claim(r[:-1]) for r in rows if r[-1]]
        todo = [_row_to_claim(r[:-1]) for r in rows if not r[-1]]
        return done, todo

    def claim_vectors(self, model: str, ids: Iterable[int]) -> dict[int, np.ndarray]:
        """claim id -> its stored vector (claims whose vector is missing are left out)."""
        return self._vectors_of("claims", model, ids)  # type: ignore[attr-defined]

    def save_reconciliation(self, batch: ReconcileBatch) -> None:
        """Write one conversation's reconciliation atomically (all of it or none)."""
        now = datetime.now(UTC).isoformat()
        with self._write() as db:  # type: ignore[attr-defined]
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
                f"INSERT OR IGNORE INTO conflicts({_CONFLICT_COLS.replace('id, ', '', 1)}, "
                "created_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
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
            db.executemany(
                "INSERT OR IGNORE INTO vectors(model, hash, dim, vec) VALUES (?, ?, ?, ?)",
                [(batch.model, h, int(v.shape[0]), pack(v)) for h, v in batch.vectors.items()],
            )
            for entity, claim_ids, search_text, embed_hash in batch.entities:
                self._save_entity(db, entity, claim_ids, search_text, embed_hash, batch.model, now)
            db.executemany(
                "UPDATE claims SET reconciled = 1 WHERE id = ?", [(i,) for i in batch.reconciled]
            )

    @staticmethod
    def _save_entity(
        db: sqlite3.Connection,
        e: Entity,
        claim_ids: tuple[int, ...],
        search_text: str,
        embed_hash: str,
        model: str,
        now: str,
    ) -> None:
        vec = db.execute(
            "SELECT id FROM vectors WHERE model = ? AND hash = ?", (model, embed_hash)
        ).fetchone()
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
            vec[0] if vec else None,
        )
        if e.id is None:
            cur = db.execute(
                "INSERT INTO entities(owner, owner_key, name, name_key, kind, aliases, roles, "
                "states, brief, first_seen, last_seen, mentions, method, search_text, scope, "
                "embed_hash, vec_id, conversation, created_at) "
                "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (*values, e.conversation, now),
            )
            eid = int(cur.lastrowid)
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
            "INSERT OR IGNORE INTO claim_entities(claim_id, entity_id) VALUES (?, ?)",
            [(c, eid) for c in claim_ids],
        )

    def reset_reconciliation(self, conversation: str) -> None:
        """Forget a conversation's reconciliation (claims back to as-extracted)."""
        with self._write() as db:  # type: ignore[attr-defined]
            self._reset_reconciliation(db, conversation)

    @staticmethod
    def _reset_reconciliation(db: sqlite3.Connection, conversation: str) -> None:
        for table in ("claim_events", "conflicts", "entities"):
            db.execute(f"DELETE FROM {table} WHERE conversation = ?", (conversation,))
        db.execute(
            "UPDATE claims SET status = 'current', replaced_by = NULL, closed_at = NULL, "
            "reconciled = 0 WHERE conversation = ?",
            (conversation,),
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
        parts, params = ["1"], []
        if conversation is not None:
            parts.append("conversation = ?")
            params.append(conversation)
        if owner is not None:
            parts.append("owner_key = ?")
            params.append(q.person_key(owner))
        if name is not None:
            parts.append(
                "(name_key = ? OR EXISTS (SELECT 1 FROM json_each(entities.aliases) a "
                "WHERE lower(a.value) = ?))"
            )
            params += [q.person_key(name), q.person_key(name)]
        rows = self._db.execute(
            f"SELECT {_ENTITY_COLS} FROM entities WHERE {' AND '.join(parts)} "
            "ORDER BY mentions DESC, id LIMIT ?",
            (*params, int(limit)),
        )
        return [_row_to_entity(r) for r in rows]

    def entity_claims(self, entity_id: int, current_only: bool = True) -> list[Claim]:
        """Claims mentioning the entity, oldest first (only current ones by default)."""
        from .sqlite_derived import _row_to_claim, claim_cols

        status = "AND c.status = 'current'" if current_only else ""
        cols = claim_cols("c")
        rows = self._db.execute(
            f"SELECT {cols} FROM claims c JOIN claim_entities ce ON ce.claim_id = c.id "
            f"WHERE ce.entity_id = ? {status} ORDER BY c.said_epoch, c.id",
            (int(entity_id),),
        )
        return [_row_to_claim(r) for r in rows]

    def claim_history(self, claim_id: int) -> list[ClaimEvent]:
        """Every event of a claim, in the order reconciliation recorded them."""
        return self.claim_histories([claim_id]).get(int(claim_id), [])

    def claim_histories(self, claim_ids: Iterable[int]) -> dict[int, list[ClaimEvent]]:
        """Claim id -> its events in recorded order (claims without events are absent)."""
        ids = list(dict.fromkeys(int(i) for i in claim_ids))
        out: dict[int, list[ClaimEvent]] = {}
        for k in range(0, len(ids), 500):
            chunk = ids[k : k + 500]
            rows = self._db.execute(
                "SELECT id, claim_id, action, other_claim, at, detail FROM claim_events "
                f"WHERE claim_id IN ({','.join('?' * len(chunk))}) ORDER BY id",
                chunk,
            )
            for i, c, a, o, at, d in rows:
                out.setdefault(c, []).append(
                    ClaimEvent(
                        id=i,
                        claim=c,
                        action=a,
                        other=o,
                        at=datetime.fromisoformat(at),
                        detail=json.loads(d),
                    )
                )
        return out

    def list_conflicts(
        self, conversation: str | None = None, subject: str | None = None, limit: int = 1000
    ) -> list[Conflict]:
        """Conflicts in the order their newer claims start."""
        parts, params = ["1"], []
        if conversation is not None:
            parts.append("conversation = ?")
            params.append(conversation)
        if subject is not None:
            parts.append("lower(subject) = ?")
            params.append(q.person_key(subject))
        rows = self._db.execute(
            f"SELECT {_CONFLICT_COLS} FROM conflicts WHERE {' AND '.join(parts)} "
            "ORDER BY new_time, id LIMIT ?",
            (*params, int(limit)),
        )
        return [_row_to_conflict(r) for r in rows]

    def reconcile_stats(self) -> dict:
        """Counts for stats and benchmarks."""
        one = lambda s: self._db.execute(s).fetchone()[0]  # noqa: E731
        return {
            "entities": one("SELECT count(*) FROM entities"),
            "entity_mentions": one("SELECT count(*) FROM claim_entities"),
            "claims_by_status": dict(
                self._db.execute("SELECT status, count(*) FROM claims GROUP BY status").fetchall()
            ),
            "conflicts": one("SELECT count(*) FROM conflicts"),
            "claims_unreconciled": one("SELECT count(*) FROM claims WHERE reconciled = 0"),
        }
