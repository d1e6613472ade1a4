"""PostgreSQL persistence of layer 3: persons, identities, decisions and key info.

A mixin of PostgresStore (through PostgresMemoryMixin), the port of
store/sqlite_people.py with the same semantics: identities are (conversation,
participant name) rows, each under one person; declared persons carry the
caller's user id. The deterministic person ids and the decision fingerprint
convention are shared with SQLite (see that module's docstring).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from contextlib import AbstractContextManager
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from ..model import Claim, Decision, Person
from . import sql as q
from .sqlite_consolidate import _SELF_KINDS
from .sqlite_derived import _CLAIM_COLS, _row_to_claim
from .sqlite_people import _now, person_id_for

if TYPE_CHECKING:
    import numpy as np
    import psycopg

C = 'COLLATE "C"'  # sort text by codepoint, as SQLite does, whatever the locale


class PgAccess:
    """What the memory mixins use of PostgresStore (store/postgres.py), for type checkers."""

    if TYPE_CHECKING:
        _pg: psycopg.Connection

        def _write(self) -> AbstractContextManager[psycopg.Cursor]: ...

        def _read(self, sql: str, params: Sequence = ()) -> list[tuple]: ...

        def _read_one(self, sql: str, params: Sequence = ()) -> tuple | None: ...

        @staticmethod
        def _put_vectors_pg(
            cur: psycopg.Cursor, model: str, vectors: dict[str, np.ndarray]
        ) -> int: ...


class PostgresPeopleMixin(PgAccess):
    """Persons, identities and decisions for PostgresStore (see the module docstring)."""

    def ensure_identities(self, conversations: Sequence[str] | None = None) -> int:
        """Give every non-system speaker an identity and a person; drop stale ones.

        Returns the number of identities created; running it again creates none.
        ``conversations`` limits the work to those (what add() just wrote).
        """
        scope, params = "", ()
        if conversations is not None:
            scope, params = "AND conversation = ANY(%s)", (list(conversations),)
        # The speaker spelling of each identity's first message (SQLite's bare
        # column beside min(seq)).
        rows = self._read(
            "SELECT DISTINCT ON (conversation, speaker_key) conversation, speaker, speaker_key "
            f"FROM messages WHERE role <> 'system' {scope} "
            "ORDER BY conversation, speaker_key, seq",
            params,
        )
        known = set(
            self._read(
                f"SELECT conversation, name_key FROM person_identities WHERE true {scope}", params
            )
        )
        fresh = [(c, s, k) for c, s, k in rows if (c, k) not in known]
        created = 0
        with self._write() as cur:
            for conv, speaker, key in fresh:
                pid = person_id_for(conv, speaker)
                cur.execute(
                    "INSERT INTO persons(id, name, declared, created_at) VALUES (%s, %s, 0, %s) "
                    "ON CONFLICT DO NOTHING",
                    (pid, speaker, _now()),
                )
                cur.execute(  # another process may have just added it: not an error
                    "INSERT INTO person_identities(person_id, conversation, name, name_key) "
                    "VALUES (%s, %s, %s, %s) ON CONFLICT DO NOTHING",
                    (pid, conv, speaker, key),
                )
                created += cur.rowcount
            cur.execute(
                f"DELETE FROM person_identities pi WHERE declared_id IS NULL {scope} "
                "AND NOT EXISTS (SELECT 1 FROM messages m WHERE m.conversation = pi.conversation "
                "AND m.speaker_key = pi.name_key)",
                params,
            )
            _drop_empty_persons(cur)
        return created

    def persons(self) -> list[Person]:
        """Every person with its identities, declared ones first, then by name."""
        ids: dict[str, list[tuple[str, str]]] = {}
        for pid, conv, name in self._read(
            "SELECT person_id, conversation, name FROM person_identities "
            f"ORDER BY conversation {C}, name_key {C}"
        ):
            ids.setdefault(pid, []).append((conv, name))
        rows = self._read(
            f"SELECT id, name, declared, key_info FROM persons "
            f"ORDER BY declared DESC, name {C}, id {C}"
        )
        return [
            Person(pid, name, tuple(ids.get(pid, ())), bool(declared), key_info)
            for pid, name, declared, key_info in rows
        ]

    def identity_message_counts(self) -> dict[tuple[str, str], int]:
        """(conversation, name key) -> messages that identity sent."""
        rows = self._read(
            "SELECT pi.conversation, pi.name_key, count(m.conversation) "
            "FROM person_identities pi LEFT JOIN messages m ON m.conversation = pi.conversation "
            "AND m.speaker_key = pi.name_key GROUP BY pi.conversation, pi.name_key"
        )
        return {(c, k): n for c, k, n in rows}

    def declared_identities(self) -> list[tuple[str, str, str, str]]:
        """(conversation, name, declared id, person id) of every declared identity."""
        rows = self._read(
            "SELECT conversation, name, declared_id, person_id FROM person_identities "
            f"WHERE declared_id IS NOT NULL "
            f"ORDER BY declared_id {C}, conversation {C}, name_key {C}"
        )
        return [tuple(r) for r in rows]  # type: ignore[misc]

    def declare_identity(
        self, conversation: str, name: str, user_id: str
    ) -> list[tuple[str, str]] | None:
        """Put (conversation, name) under the declared person ``user_id``.

        None when it was already there, else the identities the declared
        person held before it joined (see SQLite's declare_identity).
        """
        key = q.person_key(name)
        with self._write() as cur:
            row = cur.execute(
                "SELECT person_id, declared_id FROM person_identities "
                "WHERE conversation = %s AND name_key = %s FOR UPDATE",
                (conversation, key),
            ).fetchone()
            if row is not None and row[0] == user_id and row[1] == user_id:
                return None
            held = cur.execute(
                "SELECT conversation, name FROM person_identities WHERE person_id = %s "
                f"ORDER BY conversation {C}, name_key {C}",
                (user_id,),
            ).fetchall()
            joined = [(c, n) for c, n in held if (c, q.person_key(n)) != (conversation, key)]
            cur.execute(
                "INSERT INTO persons(id, name, declared, created_at) VALUES (%s, %s, 1, %s) "
                "ON CONFLICT (id) DO UPDATE SET declared = 1",
                (user_id, name, _now()),
            )
            if row is None:
                cur.execute(
                    "INSERT INTO person_identities(person_id, conversation, name, name_key, "
                    "declared_id) VALUES (%s, %s, %s, %s, %s)",
                    (user_id, conversation, name, key, user_id),
                )
            else:
                _move_declared(cur, row[0], conversation, key, user_id)
            _drop_empty_persons(cur)
        return joined

    def merge_persons(self, keep: str, drop: str) -> None:
        """Move every identity of ``drop`` under ``keep`` and remove ``drop``."""
        with self._write() as cur:
            _merge(cur, keep, drop)

    # -- key info per person ---------------------------------------------------------------

    def key_info_states(
        self, conversation: str | None = None
    ) -> list[tuple[str, str, str, list[tuple[str, str]]]]:
        """(person id, name, key_info_hash, identities) of persons (those in ``conversation``)."""
        idents: dict[str, list[tuple[str, str]]] = {}
        for pid, conv, name in self._read(
            "SELECT person_id, conversation, name FROM person_identities "
            f"ORDER BY person_id {C}, conversation {C}, name_key {C}"
        ):
            idents.setdefault(pid, []).append((conv, name))
        out = []
        for pid, name, h in self._read(
            f"SELECT id, name, key_info_hash FROM persons ORDER BY id {C}"
        ):
            mine = idents.get(pid, [])
            if conversation is None or any(c == conversation for c, _ in mine):
                out.append((pid, name, h, mine))
        return out

    def self_claims(self, identities: Iterable[tuple[str, str]]) -> list[Claim]:
        """Current first-hand claims each identity made about itself (facts, plans, ...)."""
        out: list[Claim] = []
        for conv, name in identities:
            key = q.person_key(name)
            rows = self._read(
                f"SELECT {_CLAIM_COLS} FROM claims WHERE conversation = %s "
                "AND speaker_key = %s AND subject_key = %s AND source = 'first_hand' "
                "AND status = 'current' AND kind = ANY(%s) ORDER BY said_epoch, id",
                (conv, key, key, list(_SELF_KINDS)),
            )
            out += [_row_to_claim(r) for r in rows]
        return out

    def save_key_info(self, rows: Iterable[tuple[str, str, str]]) -> int:
        """Write (person id, key_info, key_info_hash) rows; returns how many were written."""
        with self._write() as cur:
            cur.executemany(
                "UPDATE persons SET key_info = %s, key_info_hash = %s WHERE id = %s",
                [(k, h, i) for i, k, h in rows],
            )
            return max(cur.rowcount, 0)

    def person_key_info(self, person_id: str) -> str | None:
        """A person's key info ('' before consolidation), or None if there is no such person."""
        row = self._read_one("SELECT key_info FROM persons WHERE id = %s", (person_id,))
        return row[0] if row else None

    # -- decisions ------------------------------------------------------------------------

    def add_decision(
        self, decision: Decision, fingerprint: str = "", merge: tuple[str, str] | None = None
    ) -> int:
        """Store a decision (and apply its merge, ``(keep, drop)``) in one transaction."""
        steps = ([{"fingerprint": fingerprint}] if fingerprint else []) + list(decision.steps)
        created = (decision.created_at or datetime.now(UTC)).isoformat()
        with self._write() as cur:
            if merge is not None:
                _merge(cur, *merge)
            row = cur.execute(
                "INSERT INTO decisions(kind, a, b, verdict, reasons, evidence, steps, method, "
                "created_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s) RETURNING id",
                (
                    decision.kind,
                    decision.a,
                    decision.b,
                    decision.verdict,
                    decision.reasons,
                    json.dumps(list(decision.evidence), ensure_ascii=False),
                    json.dumps(steps, ensure_ascii=False, default=str),
                    decision.method,
                    created,
                ),
            ).fetchone()
        return int(row[0]) if row else 0

    def decisions(self, kind: str | None = None) -> list[Decision]:
        """Stored decisions, oldest first (optionally of one kind)."""
        where, params = ("WHERE kind = %s", (kind,)) if kind else ("", ())
        rows = self._read(
            "SELECT id, kind, a, b, verdict, reasons, evidence, steps, method, created_at "
            f"FROM decisions {where} ORDER BY id",
            params,
        )
        return [_row_to_decision(r) for r in rows]

    def decision_keys(self, kind: str) -> set[tuple[str, str, str, str]]:
        """(a, b, fingerprint, method) of every decision of ``kind``: what is decided already."""
        out = set()
        for a, b, steps, method in self._read(
            "SELECT a, b, steps, method FROM decisions WHERE kind = %s", (kind,)
        ):
            first = (json.loads(steps) or [{}])[0]
            out.add((a, b, str(first.get("fingerprint", "")), method))
        return out


def _row_to_decision(r: tuple) -> Decision:
    did, kind, a, b, verdict, reasons, evidence, steps, method, created = r
    return Decision(
        kind=kind,
        a=a,
        b=b,
        verdict=verdict,
        reasons=reasons,
        evidence=tuple(json.loads(evidence)),
        method=method,
        steps=tuple(s for s in json.loads(steps) if set(s) != {"fingerprint"}),
        created_at=datetime.fromisoformat(created),
        id=did,
    )


def _merge(cur: psycopg.Cursor, keep: str, drop: str) -> None:
    if keep == drop:
        raise ValueError(f"cannot merge person {keep!r} into itself")
    cur.execute("UPDATE person_identities SET person_id = %s WHERE person_id = %s", (keep, drop))
    cur.execute("DELETE FROM persons WHERE id = %s", (drop,))


def _move_declared(cur: psycopg.Cursor, old: str, conversation: str, key: str, user: str) -> None:
    """Move a declared identity (and the undeclared ones merged with it) to ``user``."""
    old_declared = cur.execute("SELECT declared FROM persons WHERE id = %s", (old,)).fetchone()
    cur.execute(
        "UPDATE person_identities SET person_id = %s, declared_id = %s "
        "WHERE conversation = %s AND name_key = %s",
        (user, user, conversation, key),
    )
    if old != user and old_declared is not None and not old_declared[0]:
        cur.execute(
            "UPDATE person_identities SET person_id = %s "
            "WHERE person_id = %s AND declared_id IS NULL",
            (user, old),
        )


def _drop_empty_persons(cur: psycopg.Cursor) -> None:
    cur.execute(
        "DELETE FROM persons p WHERE NOT EXISTS "
        "(SELECT 1 FROM person_identities pi WHERE pi.person_id = p.id)"
    )
