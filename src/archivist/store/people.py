"""Layer 3, written once for both backends: persons across conversations, identity
decisions and key info per person.

Every (conversation, participant name) is an identity row; each identity
belongs to one person. A person made from one identity has the id
``p-<hash>`` (salted when a deleted person had that id: ids are never reused); a
person the caller declared (a user id) has that id and ``declared = 1``. A
decision's ``steps`` column holds a JSON list whose first element may be
``{"fingerprint": ...}``: what the pair looked like when it was decided (see
write/people.py); ``decisions()`` strips it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from datetime import datetime

from ..model import Decision, Person
from . import sql as q
from .common import Body, Connection, json_tuple, record, retried


def person_id_for(conversation: str, name: str) -> str:
    """The deterministic id of the person first made from one identity."""
    digest = hashlib.sha1(f"{conversation}\x1f{q.person_key(name)}".encode()).hexdigest()
    return f"p-{digest[:12]}"


class People(Body):
    """The PeopleStore part of the Store protocol (see the module docstring)."""

    # -- identities and persons ---------------------------------------------------------

    @retried
    def ensure_identities(self, conversations: Sequence[str] | None = None) -> int:
        """Give every non-system speaker of every conversation an identity and a person.

        Identities whose speaker no longer has messages (and that nobody
        declared) go, and so do persons left without identities. Returns the
        number of identities created; running it again creates none.
        ``conversations`` limits the work to those (what add() just wrote).
        """
        scope, params = "", []
        if conversations is not None:
            cond, params = self._d.in_ids("conversation", list(conversations))
            scope = f"AND {cond}"
        with self._write() as db:
            # Read inside the transaction: two threads must not both see an identity missing.
            # The speaker spelling of each identity is that of its first message.
            rows = db.execute(
                "SELECT m.conversation, m.speaker, m.speaker_key FROM messages m JOIN "
                "(SELECT conversation, speaker_key, min(seq) AS first FROM messages "
                f"WHERE role <> 'system' {scope} GROUP BY conversation, speaker_key) f "
                "ON f.conversation = m.conversation AND f.speaker_key = m.speaker_key "
                "AND f.first = m.seq ORDER BY m.conversation, m.rowid",
                params,
            ).fetchall()
            known = set(
                db.execute(
                    f"SELECT conversation, name_key FROM person_identities WHERE 1 = 1 {scope}",
                    params,
                ).fetchall()
            )
            fresh = list(dict.fromkeys((c, k) for c, _, k in rows if (c, k) not in known))
            speakers = {(c, k): s for c, s, k in reversed(rows)}  # first row wins
            created = 0
            for conv, key in fresh:
                speaker = speakers[(conv, key)]
                pid = _unretired(db, person_id_for(conv, speaker), f"{conv}\x1f{key}")
                db.execute(
                    "INSERT INTO persons(id, name, declared, created_at) VALUES (?, ?, 0, ?) "
                    "ON CONFLICT DO NOTHING",
                    (pid, speaker, self._now_iso()),
                )
                created += db.execute(  # another process may have just added it
                    "INSERT INTO person_identities(person_id, conversation, name, name_key) "
                    "VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING",
                    (pid, conv, speaker, key),
                ).rowcount
            gone = db.execute(
                f"DELETE FROM person_identities WHERE declared_id IS NULL {scope} AND NOT EXISTS "
                "(SELECT 1 FROM messages m WHERE m.conversation = person_identities.conversation "
                "AND m.speaker_key = person_identities.name_key) RETURNING person_id",
                params,
            ).fetchall()
            # a store-wide run looks at every person; a scoped one (each add) at those it
            # took an identity from, so its cost does not grow with the store
            self._drop_empty_persons(db, None if conversations is None else [p for (p,) in gone])
        return created

    def persons(self) -> list[Person]:
        """Every person with its identities, declared ones first, then by name."""
        c = self._d.order_text
        ids = self._identities()
        rows = self._db.execute(
            "SELECT id, name, declared, key_info FROM persons "
            f"ORDER BY declared DESC, name{c}, id{c}"
        )
        return [
            Person(pid, name, tuple(ids.get(pid, ())), bool(declared), key_info)
            for pid, name, declared, key_info in rows
        ]

    def _drop_empty_persons(self, db: Connection, candidates: Sequence[str] | None) -> None:
        """Delete the persons left without an identity: of ``candidates`` only (None: of
        every person, a scan of the table)."""
        scope, params = "", []
        if candidates is not None:
            if not candidates:
                return
            cond, params = self._d.in_ids("id", sorted(set(candidates)))
            scope = f"{cond} AND "
        db.execute(
            f"DELETE FROM persons WHERE {scope}NOT EXISTS "
            "(SELECT 1 FROM person_identities pi WHERE pi.person_id = persons.id)",
            params,
        )

    def person(self, person_id: str) -> Person | None:
        """One person with its identities (by conversation, then name), or None."""
        row = self._db.execute(
            "SELECT id, name, declared, key_info FROM persons WHERE id = ?", (person_id,)
        ).fetchone()
        if row is None:
            return None
        c = self._d.order_text
        ids = self._db.execute(
            "SELECT conversation, name FROM person_identities WHERE person_id = ? "
            f"ORDER BY conversation{c}, name_key{c}",
            (person_id,),
        )
        pid, name, declared, key_info = row
        return Person(pid, name, tuple((conv, n) for conv, n in ids), bool(declared), key_info)

    def identity_count(self, person_id: str, besides: tuple[str, str] | None = None) -> int:
        """How many identities the person holds, ``besides`` the identity (conversation,
        name) if given."""
        sql, params = "SELECT count(*) FROM person_identities WHERE person_id = ?", (person_id,)
        if besides is not None:
            sql += " AND NOT (conversation = ? AND name_key = ?)"
            params = (person_id, besides[0], q.person_key(besides[1]))
        return int(self._db.execute(sql, params).fetchone()[0])

    def identity_names(self, conversation: str) -> list[str]:
        """The names of the identities held in ``conversation``."""
        rows = self._db.execute(
            "SELECT name FROM person_identities WHERE conversation = ?", (conversation,)
        )
        return [n for (n,) in rows]

    def identity_message_counts(self) -> dict[tuple[str, str], int]:
        """(conversation, name key) -> messages that identity sent."""
        rows = self._db.execute(
            "SELECT pi.conversation, pi.name_key, count(m.rowid) FROM person_identities pi "
            "LEFT JOIN messages m ON m.conversation = pi.conversation "
            "AND m.speaker_key = pi.name_key GROUP BY pi.conversation, pi.name_key"
        )
        return {(c, k): int(n) for c, k, n in rows}

    def declared_identities(self) -> list[tuple[str, str, str, str]]:
        """(conversation, name, declared id, person id) of every declared identity."""
        c = self._d.order_text
        rows = self._db.execute(
            "SELECT conversation, name, declared_id, person_id FROM person_identities "
            f"WHERE declared_id IS NOT NULL ORDER BY declared_id{c}, conversation{c}, name_key{c}"
        )
        return [tuple(r) for r in rows]  # type: ignore[misc]

    @retried
    def declare_identity(
        self, conversation: str, name: str, user_id: str, most: int | None = None
    ) -> list[tuple[str, str]] | None:
        """Put the identity (conversation, name) under the declared person ``user_id``.

        Returns None when it was already there (nothing changed), else the
        identities the declared person held before it joined (the first ``most``
        of them: an assistant declared in every chat holds one per chat).
        Undeclared identities merged into the identity's old person move along with it.
        """
        key = q.person_key(name)
        c = self._d.order_text
        with self._write() as db:
            row = db.execute(
                "SELECT person_id, declared_id FROM person_identities "
                f"WHERE conversation = ? AND name_key = ?{self._d.lock_rows}",
                (conversation, key),
            ).fetchone()
            if row is not None and row[0] == user_id and row[1] == user_id:
                return None
            limit, params = ("", (user_id,)) if most is None else (" LIMIT ?", (user_id, most + 1))
            joined = [
                (c, n)
                for c, n in db.execute(
                    "SELECT conversation, name FROM person_identities WHERE person_id = ? "
                    f"ORDER BY conversation{c}, name_key{c}{limit}",
                    params,
                )
                if (c, q.person_key(n)) != (conversation, key)
            ][:most]
            db.execute(
                "INSERT INTO persons(id, name, declared, created_at) VALUES (?, ?, 1, ?) "
                "ON CONFLICT(id) DO UPDATE SET declared = 1",
                (user_id, name, self._now_iso()),
            )
            if row is None:
                db.execute(
                    "INSERT INTO person_identities(person_id, conversation, name, name_key, "
                    "declared_id) VALUES (?, ?, ?, ?, ?)",
                    (user_id, conversation, name, key, user_id),
                )
            else:
                _move_declared(db, row[0], conversation, key, user_id)
                self._drop_empty_persons(db, [row[0]])
        return joined

    @retried
    def split_identity(self, conversation: str, name: str) -> str:
        """Move one identity out of its person into a new, undeclared person of its own
        (the user split them); returns the new person's id."""
        key = q.person_key(name)
        with self._write() as db:
            row = db.execute(
                "SELECT person_id, name FROM person_identities "
                f"WHERE conversation = ? AND name_key = ?{self._d.lock_rows}",
                (conversation, key),
            ).fetchone()
            if row is None:
                raise ValueError(f"no identity {name!r} in conversation {conversation!r}")
            pid = person_id_for(conversation, row[1])
            taken = db.execute("SELECT 1 FROM persons WHERE id = ?", (pid,)).fetchone()
            if taken is not None:
                salt = f"{conversation}\x1f{key}\x1fsplit\x1f{self._now_iso()}"
                pid = f"p-{hashlib.sha1(salt.encode()).hexdigest()[:12]}"
            pid = _unretired(db, pid, f"{conversation}\x1f{key}\x1fsplit")
            db.execute(
                "INSERT INTO persons(id, name, declared, created_at) VALUES (?, ?, 0, ?)",
                (pid, row[1], self._now_iso()),
            )
            db.execute(
                "UPDATE person_identities SET person_id = ?, declared_id = NULL "
                "WHERE conversation = ? AND name_key = ?",
                (pid, conversation, key),
            )
            self._drop_empty_persons(db, [row[0]])
        return pid

    @retried
    def merge_persons(self, keep: str, drop: str) -> None:
        """Move every identity of ``drop`` under ``keep`` and remove ``drop``."""
        with self._write() as db:
            _merge(db, keep, drop)

    # -- decisions ------------------------------------------------------------------------

    @retried
    def add_decision(
        self, decision: Decision, fingerprint: str = "", merge: tuple[str, str] | None = None
    ) -> int:
        """Store a decision (and apply its merge, ``(keep, drop)``) in one transaction."""
        steps = ([{"fingerprint": fingerprint}] if fingerprint else []) + list(decision.steps)
        created = (decision.created_at or self.clock()).isoformat()
        with self._write() as db:
            if merge is not None:
                _merge(db, *merge)
            [did] = db.insert_ids(
                "INSERT INTO decisions(kind, a, b, verdict, reasons, evidence, steps, method, "
                "created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
                [
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
                    )
                ],
            )
        return did

    def decisions(self, kind: str | None = None) -> list[Decision]:
        """Stored decisions, oldest first (optionally of one kind)."""
        where, params = ("WHERE kind = ?", (kind,)) if kind else ("", ())
        rows = self._db.execute(
            "SELECT id, kind, a, b, verdict, reasons, evidence, steps, method, created_at "
            f"FROM decisions {where} ORDER BY id",
            params,
        )
        return [
            record(
                Decision,
                "id, kind, a, b, verdict, reasons, evidence, steps, method, created_at",
                r,
                evidence=json_tuple,
                steps=_steps,
                created_at=datetime.fromisoformat,
            )
            for r in rows
        ]

    def decision_keys(self, kind: str) -> set[tuple[str, str, str, str]]:
        """(a, b, fingerprint, method) of every decision of ``kind``: what is decided already."""
        out = set()
        for a, b, steps, method in self._db.execute(
            "SELECT a, b, steps, method FROM decisions WHERE kind = ?", (kind,)
        ):
            first = (json.loads(steps) or [{}])[0]
            out.add((a, b, str(first.get("fingerprint", "")), method))
        return out


def _steps(text: str) -> tuple[dict, ...]:
    """A decision's agent steps without the fingerprint entry (see the module docstring)."""
    return tuple(s for s in json.loads(text) if set(s) != {"fingerprint"})


def _merge(db: Connection, keep: str, drop: str) -> None:
    if keep == drop:
        raise ValueError(f"cannot merge person {keep!r} into itself")
    db.execute("UPDATE person_identities SET person_id = ? WHERE person_id = ?", (keep, drop))
    db.execute("DELETE FROM persons WHERE id = ?", (drop,))


def _move_declared(db: Connection, old: str, conversation: str, key: str, user_id: str) -> None:
    """Move a declared identity (and the undeclared ones merged with it) to ``user_id``."""
    old_declared = db.execute("SELECT declared FROM persons WHERE id = ?", (old,)).fetchone()
    db.execute(
        "UPDATE person_identities SET person_id = ?, declared_id = ? "
        "WHERE conversation = ? AND name_key = ?",
        (user_id, user_id, conversation, key),
    )
    if old != user_id and old_declared is not None and not old_declared[0]:
        db.execute(
            "UPDATE person_identities SET person_id = ? "
            "WHERE person_id = ? AND declared_id IS NULL",
            (user_id, old),
        )


def _unretired(db: Connection, pid: str, salt: str) -> str:
    """``pid``, or when a deleted person had it (``retired_persons``), the first id of a
    salted series that no deleted person had: a person id never names another person."""
    candidate, n = pid, 0
    while db.execute("SELECT 1 FROM retired_persons WHERE id = ?", (candidate,)).fetchone():
        n += 1
        digest = hashlib.sha1(f"{salt}\x1f{n}".encode()).hexdigest()
        candidate = f"p-{digest[:12]}"
    return candidate
