"""The deletion audit log and what is kept of deleted claims, written once for both backends.

Every deletion a caller asks for (a claim, a message, a conversation, a person, a
reset, a rebuild's clearing) writes one ``audit_log`` line in its own transaction:
who (the front end's ``actor``), when, what kind, how many messages and claims went,
and its scope (ids, a conversation or person name), never the deleted text. A reset
keeps the log: it records the reset.

``deleted_claims`` is filled by a trigger on every deleted claim, whatever deleted it
(a forget, a message's or conversation's deletion, a session re-extracted, a rebuild):
its id, the claim that superseded it, its method and times. A deleted memory id thus
still answers its history (mem0's ADD, UPDATE and DELETE entries) without its words.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import datetime

from ..errors import InputError
from ..model import AUDIT_KINDS, MAX_ID, AuditEntry, DeletedClaim, text_problem
from .common import Body, Connection, record, retried

MAX_ACTOR = 200  # characters of an actor name
_AUDIT_COLS = "id, at, actor, kind, scope, messages, claims"
_DELETED_COLS = "id, replaced_by, method, said_at, created_at, deleted_at"
MAX_CHAIN = 50  # wordings of one memory followed (a guard against a cycle)


def _deleted(r: tuple) -> DeletedClaim:
    when = datetime.fromisoformat
    return record(DeletedClaim, _DELETED_COLS, r, said_at=when, created_at=when, deleted_at=when)


def check_actor(actor: str) -> str:
    """``actor`` if it can name who deleted (a short storable string); else InputError."""
    if not isinstance(actor, str) or not actor.strip():
        raise InputError(f"actor must be a non-empty string; got {actor!r}")
    if problem := text_problem(actor):
        raise InputError(f"actor {problem}")
    if len(actor) > MAX_ACTOR:
        raise InputError(f"actor is over {MAX_ACTOR} characters")
    return actor


class Audit(Body):
    """The audit part of the Store protocol (see the module docstring)."""

    @retried
    def append_audit(
        self,
        actor: str,
        kind: str,
        scope: dict | None = None,
        *,
        messages: int = 0,
        claims: int = 0,
    ) -> AuditEntry:
        """Record one deletion done elsewhere (the store's own deletes record theirs)."""
        with self._write() as db:
            aid = self._audit(db, actor, kind, scope or {}, messages=messages, claims=claims)
        return self.audit_log(1, before=aid + 1)[0]

    def audit_log(self, limit: int = 100, *, before: int | None = None) -> list[AuditEntry]:
        """The newest ``limit`` lines, newest first (``before``: lines older than that id)."""
        if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
            raise InputError(f"limit must be a positive integer; got {limit!r}")
        top = MAX_ID if before is None else min(int(before), MAX_ID)
        rows = self._db.execute(
            f"SELECT {_AUDIT_COLS} FROM audit_log WHERE id < ? ORDER BY id DESC LIMIT ?",
            (top, min(limit, MAX_ID)),
        )
        return [
            record(AuditEntry, _AUDIT_COLS, r, at=datetime.fromisoformat, scope=json.loads)
            for r in rows
        ]

    def _audit(
        self,
        db: Connection,
        actor: str,
        kind: str,
        scope: dict,
        *,
        messages: int = 0,
        claims: int = 0,
    ) -> int:
        """Write one audit line inside the deletion's own transaction; its id."""
        if kind not in AUDIT_KINDS:
            raise InputError(f"audit kind must be one of {', '.join(AUDIT_KINDS)}; got {kind!r}")
        [aid] = db.insert_ids(
            "INSERT INTO audit_log(at, actor, kind, scope, messages, claims) "
            "VALUES (?, ?, ?, ?, ?, ?) RETURNING id",
            [
                (
                    self._now_iso(),
                    check_actor(actor),
                    kind,
                    json.dumps(scope, ensure_ascii=False, sort_keys=True),
                    max(int(messages), 0),
                    max(int(claims), 0),
                )
            ],
        )
        return aid

    @staticmethod
    def _count(db: Connection, table: str, conversation: str | None = None) -> int:
        """Rows of ``table`` (of one conversation): a deletion's counts are the difference."""
        where, params = ("WHERE conversation = ?", (conversation,)) if conversation else ("", ())
        return int(db.execute(f"SELECT count(*) FROM {table} {where}", params).fetchone()[0])

    # -- what is kept of deleted claims ----------------------------------------------------

    def deleted_claims(self, ids: Iterable[int]) -> dict[int, DeletedClaim]:
        """Claim id -> what is kept of it, for those of ``ids`` that were deleted."""
        wanted = [int(i) for i in ids if 0 < int(i) <= MAX_ID]
        rows = self._by_ids(
            f"SELECT {_DELETED_COLS} FROM deleted_claims WHERE {{ids}}", "id", wanted
        )
        return {r[0]: _deleted(r) for r in rows}

    def deleted_claim_chain(self, claim_id: int) -> list[DeletedClaim]:
        """The deleted memory ``claim_id`` belonged to, as its wordings oldest first: the
        claims the user's corrections linked to it (empty: ``claim_id`` was not deleted)."""
        first = self.deleted_claims([claim_id]).get(claim_id)
        if first is None:
            return []
        chain = [first]
        while chain[0].method == "user-correction" and len(chain) < MAX_CHAIN:
            row = self._db.execute(
                f"SELECT {_DELETED_COLS} FROM deleted_claims WHERE replaced_by = ? "
                "ORDER BY id DESC LIMIT 1",
                (chain[0].id,),
            ).fetchone()
            if row is None or any(c.id == row[0] for c in chain):
                break
            chain.insert(0, _deleted(row))
        while chain[-1].replaced_by is not None and len(chain) < MAX_CHAIN:
            nxt = self.deleted_claims([chain[-1].replaced_by]).get(chain[-1].replaced_by)
            if nxt is None or nxt.method != "user-correction" or nxt in chain:
                break
            chain.append(nxt)
        return chain
