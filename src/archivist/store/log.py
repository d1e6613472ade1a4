"""The message log, written once for both backends: conversations, sessions, messages,
the people each message involves, cached vectors, deletes and the log's reads.

The log is append-only: a message already stored with the same content hash
is skipped (idempotent re-ingestion) and the same id with other content is
refused. Each conversation is written in one transaction, its row locked
first where the engine locks rows, so two processes adding to one
conversation take turns.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from functools import lru_cache

import numpy as np

from ..errors import EmbeddingMismatch, InputError
from ..model import MAX_YEAR, MIN_YEAR, Attachment, Conversation, Message, metadata_json
from . import sql as q
from .audit import Audit
from .common import FILLS_KEPT, Connection, retried
from .records import AddResult, IndexedMessage

# model.MIN_YEAR..MAX_YEAR as epoch seconds, for counting messages stored outside them.
_EPOCH_MIN = int(datetime(MIN_YEAR, 1, 1, tzinfo=UTC).timestamp())
_EPOCH_MAX = int(datetime(MAX_YEAR + 1, 1, 1, tzinfo=UTC).timestamp())
MSG_COLS = (
    "rowid, conversation, msg_id, session, seq, speaker, addressees, role, text, "
    "attachments, ts, session_start, metadata"
)


def row_to_message(r: Sequence) -> tuple[int, Message]:
    (rowid, conv, mid, session, seq, speaker, addr, role, text, att, ts, sstart, meta) = r
    return rowid, Message(
        id=mid,
        conversation=conv,
        session=session,
        seq=seq,
        speaker=speaker,
        addressees=tuple(json.loads(addr)),
        role=role,
        text=text,
        attachments=tuple(Attachment(**a) for a in json.loads(att)),
        timestamp=datetime.fromisoformat(ts),
        session_start=datetime.fromisoformat(sstart) if sstart else None,
        metadata=json.loads(meta) if meta and meta != "{}" else {},
    )


def _sessions_of(conv: Conversation) -> dict[int, datetime | None]:
    """Every session the conversation's messages sit in, with its start: the declared
    sessions', else the first message's own ``session_start`` or time (a client that
    sends bare messages, as the proxy does, still gets its sessions counted)."""
    out: dict[int, datetime | None] = {s.number: s.started_at for s in conv.sessions}
    for m in conv.messages:
        if out.get(m.session) is None:
            out[m.session] = m.session_start or out.get(m.session) or m.timestamp
    return out


@lru_cache(maxsize=1 << 14)
def _cached_message(r: tuple) -> tuple[int, Message]:
    return row_to_message(r)


def decoded_message(r: Sequence) -> tuple[int, Message]:
    """``row_to_message``, remembered per process by the whole row: an add reads its
    conversation back (a 300-message log was a fifth of the add) and the row decodes
    to the same frozen Message every time; a changed row is another key."""
    try:
        return _cached_message(tuple(r))
    except TypeError:  # a value that does not hash: decode it as it is
        return row_to_message(r)


def _at(row: IndexedMessage, seq: int) -> IndexedMessage:
    return replace(row, message=replace(row.message, seq=seq))


def _place(
    rows: list[IndexedMessage], stored: list[tuple[str, str, int]]
) -> tuple[list[IndexedMessage], list[tuple[int, str]]]:
    """Positions for new messages among the stored ones, in time order.

    ``stored`` is (msg_id, ts, seq) of the conversation's messages. A new
    message goes after the last stored message not later than it, and never
    before a new message the caller put ahead of it, so a conversation's
    positions follow its timestamps even when several writers append to it at
    once (a writer whose turn came late does not land after later turns).
    When every new message falls after the stored ones, the caller's positions
    are kept if they are free and above the stored ones; otherwise the
    messages are numbered from the first place they take, and the stored
    messages after it move up. Returns the new rows and the (seq, msg_id)
    moves of stored messages, highest first, so each move lands on a free
    position.
    """
    if not rows:
        return rows, []
    rows = sorted(rows, key=lambda r: r.message.seq)  # the caller's order
    stored = sorted(stored, key=lambda s: s[2])
    times = [datetime.fromisoformat(ts) for _, ts, _ in stored]
    slots: list[int] = []  # index into ``stored`` each new row goes before
    floor = 0
    for r in rows:
        at = len(times)
        while at > floor and times[at - 1] > r.message.timestamp:
            at -= 1
        slots.append(at)
        floor = at
    top = stored[-1][2] if stored else -1
    seqs = [r.message.seq for r in rows]
    if slots[0] == len(stored):
        if min(seqs) > top and seqs == sorted(set(seqs)):
            return rows, []
        return [_at(r, top + 1 + i) for i, r in enumerate(rows)], []
    first = slots[0]
    nxt = stored[first - 1][2] + 1 if first else 0
    placed: list[IndexedMessage] = []
    moves: list[tuple[int, str]] = []
    k = 0
    for i in range(first, len(stored) + 1):
        while k < len(rows) and slots[k] == i:
            placed.append(_at(rows[k], nxt))
            nxt, k = nxt + 1, k + 1
        if i < len(stored):
            mid, _, seq = stored[i]
            nxt = max(nxt, seq)  # keep a gap the stored positions had
            if seq != nxt:
                moves.append((nxt, mid))
            nxt += 1
    return placed, moves[::-1]


class MessageLog(Audit):
    """The message-log part of the Store protocol (see the module docstring)."""

    path: object  # what stats() shows: a file path or a DSN without its password

    def _size_bytes(self) -> int:
        raise NotImplementedError

    def embed_model(self) -> str | None:
        """The embedding model this store's vector index was built with (None if empty)."""
        return self.meta("embed_model")  # type: ignore[attr-defined]

    def migrations(self) -> list[str]:
        return [
            r[0]
            for r in self._db.execute(
                f"SELECT name FROM _migrations ORDER BY name{self._d.order_text}"
            )
        ]

    # -- writes ---------------------------------------------------------------------

    def existing_hashes(self, conversation: str) -> dict[str, str]:
        """msg_id -> content hash of what is already stored for a conversation."""
        rows = self._db.execute(
            "SELECT msg_id, hash FROM messages WHERE conversation = ?", (conversation,)
        )
        return dict(rows.fetchall())

    def cached_vectors(self, model: str, hashes: Iterable[str]) -> dict[str, np.ndarray]:
        """Vectors already computed for these text hashes by this model."""
        rows = self._by_ids(
            f"SELECT v.hash, {self._d.vector_read} FROM vectors v WHERE v.model = ? AND {{ids}}",
            "v.hash",
            hashes,
            before=(model,),
        )
        return {h: self._d.decode_vector(raw) for h, raw in rows}

    def _check_model(self, db: Connection, model: str, dim: int | None) -> None:
        """Refuse another model's vectors (the first model to arrive is the store's)."""
        found = db.execute("SELECT value FROM meta WHERE key = 'embed_model'").fetchone()
        if found is None:  # the first vectors ever; another writer may be just as early
            db.execute(
                "INSERT INTO meta(key, value) VALUES ('embed_model', ?) ON CONFLICT DO NOTHING",
                (model,),
            )
            found = db.execute("SELECT value FROM meta WHERE key = 'embed_model'").fetchone()
        current = found[0]
        if current != model:
            raise EmbeddingMismatch(
                f"{self.path} is indexed with embedding model {current!r}, not {model!r}; "
                "use the same embedder or a new store"
            )
        if dim is not None:
            db.execute(
                "INSERT INTO meta(key, value) VALUES ('vector_dim', ?) ON CONFLICT DO NOTHING",
                (str(dim),),
            )

    @retried
    def add_conversation(
        self,
        conv: Conversation,
        rows: Sequence[IndexedMessage],
        model: str,
        vectors: dict[str, np.ndarray],
    ) -> AddResult:
        """Store a conversation's new messages and their vectors in one transaction.

        Messages already stored with the same content are skipped (idempotent
        re-ingestion; the same instant under another UTC offset counts as the
        same); the same id with different content is refused, since the log is
        append-only. Positions are settled here, under the write lock (see
        ``_place``): new messages take their place among the stored ones by
        timestamp, in the caller's order, so concurrent appends never share a
        position and a conversation reads in time order whichever writer
        committed first.
        """
        result = AddResult(conversation=conv.id)
        dim = next((int(v.shape[0]) for v in vectors.values()), None)
        with self._write() as db:
            self._check_model(db, model, dim)
            self._upsert_conversation(db, conv)
            stored = db.execute(
                "SELECT msg_id, hash, ts, seq FROM messages WHERE conversation = ?", (conv.id,)
            ).fetchall()
            existing = {mid: (h, ts) for mid, h, ts, _ in stored}
            new_rows = []
            for r in rows:
                m = r.message
                old = existing.get(m.id)
                if old is None:
                    new_rows.append(r)
                    existing[m.id] = (m.hash, m.timestamp.isoformat())
                elif m.same_as_stored(old[0], datetime.fromisoformat(old[1])):
                    result.unchanged += 1
                else:
                    raise InputError(
                        f"conversation {conv.id!r}, message {m.id!r}: already stored with "
                        "different content; the log is append-only (delete the conversation "
                        "to replace it)"
                    )
            new_rows, moves = _place(new_rows, [(mid, ts, seq) for mid, _, ts, seq in stored])
            db.executemany(
                "UPDATE messages SET seq = ? WHERE conversation = ? AND msg_id = ?",
                [(seq, conv.id, mid) for seq, mid in moves],
            )
            result.vectors_added = self._put_vectors(db, model, vectors)
            self._insert_messages(db, new_rows, self._vector_ids(db, model, new_rows))
            result.added = len(new_rows)
            result.added_ids = [r.message.id for r in new_rows]
        return result

    def _upsert_conversation(self, db: Connection, conv: Conversation) -> None:
        db.execute(
            "INSERT INTO conversations(id, participants, source, created_at) "
            "VALUES (?, '[]', ?, ?) ON CONFLICT (id) DO NOTHING",
            (conv.id, conv.source, self._now_iso()),
        )
        (parts,) = db.execute(
            f"SELECT participants FROM conversations WHERE id = ?{self._d.lock_rows}", (conv.id,)
        ).fetchone()
        had = json.loads(parts)
        people = sorted(set(had) | set(conv.participants))
        if people != had:  # a chat's later turns mostly add no one
            db.execute(
                "UPDATE conversations SET participants = ? WHERE id = ?",
                (json.dumps(people), conv.id),
            )
        db.executemany(
            "INSERT INTO sessions(conversation, number, started_at) VALUES (?, ?, ?) "
            "ON CONFLICT (conversation, number) DO UPDATE SET started_at = "
            "COALESCE(sessions.started_at, excluded.started_at)",
            [
                (conv.id, n, when.isoformat() if when else None)
                for n, when in _sessions_of(conv).items()
            ],
        )

    def _vector_ids(
        self, db: Connection, model: str, rows: Sequence[IndexedMessage]
    ) -> dict[str, int]:
        out: dict[str, int] = {}
        for chunk in self._d.chunks(list({r.embed_hash for r in rows})):
            cond, params = self._d.in_ids("hash", chunk)
            found = db.execute(
                f"SELECT hash, id FROM vectors WHERE model = ? AND {cond}", (model, *params)
            )
            out.update(found.fetchall())
        return out

    @staticmethod
    def _insert_messages(
        db: Connection, rows: Sequence[IndexedMessage], vec_ids: dict[str, int]
    ) -> None:
        rowids = db.insert_ids(
            "INSERT INTO messages(conversation, msg_id, session, seq, speaker, speaker_key, "
            "addressees, role, text, attachments, ts, ts_epoch, session_start, hash, "
            "search_text, scope, embed_hash, vec_id, metadata) "
            "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?) RETURNING rowid",
            [
                (
                    m.conversation,
                    m.id,
                    m.session,
                    m.seq,
                    m.speaker,
                    q.person_key(m.speaker),
                    json.dumps(list(m.addressees)),
                    m.role,
                    m.text,
                    json.dumps([a.to_dict() for a in m.attachments]),
                    m.timestamp.isoformat(),
                    m.timestamp.timestamp(),
                    m.session_start.isoformat() if m.session_start else None,
                    m.hash,
                    r.search_text,
                    q.scope_text(m.conversation, (m.speaker, *m.addressees)),
                    r.embed_hash,
                    vec_ids.get(r.embed_hash),
                    metadata_json(m.metadata),
                )
                for r in rows
                for m in (r.message,)
            ],
        )
        db.executemany(
            "INSERT INTO message_people(msg_rowid, person) VALUES (?, ?) ON CONFLICT DO NOTHING",
            [
                (rowid, p)
                for rowid, r in zip(rowids, rows, strict=True)
                for p in {q.person_key(x) for x in (r.message.speaker, *r.message.addressees)}
                if p
            ],
        )

    def messages_without_vectors(self, conversation: str) -> dict[str, str]:
        """Message id -> embed hash of this conversation's messages stored without a vector."""
        return dict(
            self._db.execute(
                "SELECT msg_id, embed_hash FROM messages WHERE conversation = ? AND vec_id IS NULL",
                (conversation,),
            ).fetchall()
        )

    @retried
    def fill_message_vectors(
        self, conversation: str, model: str, vectors: dict[str, np.ndarray]
    ) -> int:
        """Give messages stored without a vector theirs (by embed hash); how many got one.

        Each filled message is noted in ``vector_fills`` so an in-process vector
        cache that already covers its rowid picks it up (store/sqlite.py).
        """
        if not vectors:
            return 0
        dim = next(int(v.shape[0]) for v in vectors.values())
        filled: list[tuple[int]] = []
        with self._write() as db:
            self._check_model(db, model, dim)
            self._put_vectors(db, model, vectors)
            for chunk in self._d.chunks(list(vectors)):
                cond, params = self._d.in_ids("embed_hash", chunk)
                filled += db.execute(
                    "UPDATE messages SET vec_id = (SELECT id FROM vectors WHERE model = ? "
                    "AND hash = messages.embed_hash) WHERE conversation = ? AND vec_id IS NULL "
                    f"AND {cond} RETURNING rowid",
                    (model, conversation, *params),
                ).fetchall()
            db.executemany("INSERT INTO vector_fills(msg_rowid) VALUES (?)", filled)
            db.execute(
                "DELETE FROM vector_fills WHERE seq <= (SELECT max(seq) FROM vector_fills) - ?",
                (FILLS_KEPT,),
            )
        return len(filled)

    # -- deletes --------------------------------------------------------------------

    def _after_delete(self, db: Connection) -> None:
        """Drop derived rows that lost evidence and vectors nothing references any more."""
        # A claim or an episode must not outlive the words it came from.
        db.execute(
            "DELETE FROM claims WHERE n_evidence > "
            "(SELECT count(*) FROM claim_evidence ce WHERE ce.claim_id = claims.id)"
        )
        self._reopen_orphans(db)  # type: ignore[attr-defined]  # store/reconcile.py
        db.execute(
            "DELETE FROM episodes WHERE n_messages > "
            "(SELECT count(*) FROM episode_messages em WHERE em.episode_id = episodes.id)"
        )
        # every table that embeds keeps its vectors: the hashes no row uses, as one set
        # difference (NOT IN over a large subquery makes PostgreSQL rescan it per vector
        # once it no longer fits work_mem as a hash)
        db.execute(
            "DELETE FROM vectors WHERE hash IN (SELECT hash FROM vectors "
            "EXCEPT SELECT embed_hash FROM messages "
            "EXCEPT SELECT embed_hash FROM claims "
            "EXCEPT SELECT embed_hash FROM episodes WHERE embed_hash IS NOT NULL "
            "EXCEPT SELECT embed_hash FROM entities WHERE embed_hash IS NOT NULL "
            "EXCEPT SELECT embed_hash FROM claim_edits WHERE embed_hash IS NOT NULL)"
        )
        self._bump_vector_epoch(db)
        self._forget_in_logs(db)  # type: ignore[attr-defined]  # store/consolidate.py

    @retried
    def delete_conversation(self, conversation: str, *, actor: str | None = None) -> int:
        """Remove a conversation and everything derived from it; returns messages removed.
        ``actor``: who asked, for the audit line written with the deletion."""
        with self._write() as db:
            claims = self._count(db, "claims", conversation)
            n = db.execute("DELETE FROM messages WHERE conversation = ?", (conversation,)).rowcount
            db.execute("DELETE FROM sessions WHERE conversation = ?", (conversation,))
            gone = db.execute("DELETE FROM conversations WHERE id = ?", (conversation,)).rowcount
            if n or gone:
                self._after_delete(db)
                if actor is not None:
                    scope = {"conversation": conversation}
                    self._audit(db, actor, "conversation", scope, messages=n, claims=claims)
        return max(n, 0)

    @retried
    def delete_person(
        self, person: str, received: bool = False, *, actor: str | None = None
    ) -> int:
        """Remove what the person said and every claim about them, from every index.

        Other people's messages to them stay (they are the others' words) unless
        ``received``; claims about the person that others made are forgotten for
        good (store/edits.py), so re-extraction does not bring them back. The
        person also leaves the participant lists, and conversations left with
        no messages are removed with their sessions. Returns messages removed.
        """
        key = q.person_key(person)
        with self._write() as db:
            claims = self._count(db, "claims")
            about = [
                r for (r,) in db.execute("SELECT id FROM claims WHERE subject_key = ?", (key,))
            ]
            self._forget_claims(db, about, f"forgot person {person.strip()}")  # type: ignore[attr-defined]
            said = "SELECT rowid FROM messages WHERE speaker_key = ?"
            if received:
                said = "SELECT msg_rowid FROM message_people WHERE person = ?"
            n = db.execute(f"DELETE FROM messages WHERE rowid IN ({said})", (key,)).rowcount
            convs = db.execute(f"SELECT id, participants FROM conversations{self._d.lock_rows}")
            for cid, parts in convs.fetchall():
                kept = [p for p in json.loads(parts) if q.person_key(p) != key]
                if len(kept) != len(json.loads(parts)):
                    db.execute(
                        "UPDATE conversations SET participants = ? WHERE id = ?",
                        (json.dumps(kept), cid),
                    )
            db.execute(
                "DELETE FROM conversations WHERE NOT EXISTS "
                "(SELECT 1 FROM messages m WHERE m.conversation = conversations.id)"
            )
            if n:
                self._after_delete(db)
            claims -= self._count(db, "claims")
            if actor is not None and (n or claims):
                scope = {"person": person, "received": bool(received)}
                self._audit(db, actor, "person", scope, messages=n, claims=claims)
        return max(n, 0)

    # -- reads ----------------------------------------------------------------------

    def keyword_search(self, text: str, filters: q.Filters, limit: int) -> list[tuple[int, float]]:
        """BM25 over the messages' search text; higher score is better."""
        return self._keyword("messages", text, filters, limit)

    def vector_search(
        self, model: str, query: np.ndarray, filters: q.Filters, limit: int
    ) -> list[tuple[int, float]]:
        """Cosine search among the filtered messages (vectors are normalised)."""
        return self._nearest("messages", model, query, filters, limit)

    def filter_rowids(self, rowids: Iterable[int], filters: q.Filters) -> set[int]:
        """The subset of ``rowids`` whose messages pass ``filters``."""
        ids = list(dict.fromkeys(int(r) for r in rowids))
        if filters.is_empty():
            return set(ids)
        where, params = q.where(filters, "messages", "m", self._d)
        rows = self._by_ids(
            f"SELECT m.rowid FROM messages m WHERE {where} AND {{ids}}",
            "m.rowid",
            ids,
            before=params,
        )
        return {int(r) for (r,) in rows}

    def messages_by_rowid(self, rowids: Iterable[int]) -> dict[int, Message]:
        rows = self._by_ids(
            f"SELECT {MSG_COLS} FROM messages WHERE {{ids}}", "rowid", (int(r) for r in rowids)
        )
        return dict(row_to_message(r) for r in rows)

    def neighbours(
        self, rowid: int, before: int, after: int, filters: q.Filters | None = None
    ) -> list[tuple[int, Message]]:
        """Messages around ``rowid`` in the same conversation that pass ``filters``."""
        row = self._db.execute(
            "SELECT conversation, seq FROM messages WHERE rowid = ?", (int(rowid),)
        ).fetchone()
        return [] if row is None else self.around([(row[0], row[1])], before, after, filters)

    def around(
        self,
        positions: Iterable[tuple[str, int]],
        before: int,
        after: int,
        filters: q.Filters | None = None,
    ) -> list[tuple[int, Message]]:
        """Messages from ``before`` turns before to ``after`` turns after any
        (conversation, seq) that pass ``filters``, in conversation and log order: the
        neighbours of many messages in one query (search expands its top 30 so)."""
        spots = list(dict.fromkeys(positions))
        if not spots:
            return []
        where, params = q.where(filters or q.Filters(), "messages", "m", self._d)
        near = " OR ".join("(m.conversation = ? AND m.seq BETWEEN ? AND ?)" for _ in spots)
        rows = self._db.execute(
            f"SELECT {MSG_COLS.replace('rowid', 'm.rowid', 1)} FROM messages m "
            f"WHERE ({near}) AND {where} ORDER BY m.conversation, m.seq",
            (*(x for c, n in spots for x in (c, n - before, n + after)), *params),
        )
        return [row_to_message(r) for r in rows]

    def conversation_messages(self, conversation: str) -> list[tuple[int, Message]]:
        rows = self._db.execute(
            f"SELECT {MSG_COLS} FROM messages WHERE conversation = ? ORDER BY seq",
            (conversation,),
        )
        return [decoded_message(r) for r in rows]

    def last_messages(self, conversation: str, n: int) -> list[tuple[int, Message]]:
        """The last ``n`` messages of a conversation, in log order: what an append follows."""
        rows = self._db.execute(
            f"SELECT {MSG_COLS} FROM messages WHERE conversation = ? ORDER BY seq DESC LIMIT ?",
            (conversation, int(n)),
        )
        return [decoded_message(r) for r in reversed(rows.fetchall())]

    def message_before(self, conversation: str, seq: int) -> Message | None:
        """The message said just before position ``seq`` of a conversation, if any."""
        row = self._db.execute(
            f"SELECT {MSG_COLS} FROM messages WHERE conversation = ? AND seq < ? "
            "ORDER BY seq DESC LIMIT 1",
            (conversation, int(seq)),
        ).fetchone()
        return row_to_message(row)[1] if row else None

    def get_message(self, conversation: str, msg_id: str) -> Message | None:
        row = self._db.execute(
            f"SELECT {MSG_COLS} FROM messages WHERE conversation = ? AND msg_id = ?",
            (conversation, msg_id),
        ).fetchone()
        return row_to_message(row)[1] if row else None

    def participants(self, conversation: str) -> list[str] | None:
        """Who took part in a conversation (None: no such conversation)."""
        row = self._db.execute(
            "SELECT participants FROM conversations WHERE id = ?", (conversation,)
        ).fetchone()
        return None if row is None else json.loads(row[0])

    def holds_beyond(self, person: str, conversation: str, ids: Collection[str]) -> bool:
        """Whether memory holds anything of ``person`` beyond messages ``ids`` of ``conversation``.

        True when, outside ``conversation``, they sent or received a stored
        message, a claim is by or about them, an entity or a person bears their
        name; or when ``conversation`` has a stored message not among ``ids``.
        False means whatever memory knows of them came from those messages (or
        there is nothing at all): a chat request holding them all has nothing
        to be reminded of. Index probes, each stopping at its first row.
        """
        key = q.person_key(person)
        probes = (
            "SELECT 1 FROM message_people mp JOIN messages m ON m.rowid = mp.msg_rowid "
            "WHERE mp.person = ? AND m.conversation <> ?",
            "SELECT 1 FROM claims WHERE speaker_key = ? AND conversation <> ?",
            "SELECT 1 FROM claims WHERE subject_key = ? AND conversation <> ?",
            "SELECT 1 FROM entities WHERE name_key = ? AND conversation <> ?",
            "SELECT 1 FROM person_identities WHERE name_key = ? AND conversation <> ?",
        )
        # one statement (a new user's every turn asks all five): each EXISTS stops at
        # its first row, and the next is not evaluated once one is true
        (found,) = self._db.execute(
            "SELECT CASE WHEN " + " OR ".join(f"EXISTS ({p})" for p in probes) + " "
            "THEN 1 ELSE 0 END",
            [x for _ in probes for x in (key, conversation)],
        ).fetchone()
        if found:
            return True
        return not set(self.existing_hashes(conversation)) <= set(ids)

    def conversations_of(self, person: str, most: int) -> list[str] | None:
        """The conversations in which ``person`` sent or received a message, in the
        order they first did; None when they did so more than ``most`` times.

        One index range read of at most ``most + 1`` rows: a caller that only
        wants a history short enough to show whole stops reading past that.
        """
        rows = self._db.execute(
            "SELECT m.conversation FROM message_people mp "
            "JOIN messages m ON m.rowid = mp.msg_rowid WHERE mp.person = ? "
            "ORDER BY mp.msg_rowid LIMIT ?",
            (q.person_key(person), most + 1),
        ).fetchall()
        if len(rows) > most:
            return None
        return list(dict.fromkeys(r[0] for r in rows))

    def conversations(self) -> list[dict]:
        rows = self._db.execute(
            "SELECT c.id, c.participants, c.source, "
            "(SELECT count(*) FROM messages m WHERE m.conversation = c.id), "
            "(SELECT count(*) FROM sessions s WHERE s.conversation = c.id) "
            f"FROM conversations c ORDER BY c.id{self._d.order_text}"
        )
        return [
            {
                "id": i,
                "participants": json.loads(p),
                "source": s,
                "messages": int(n),
                "sessions": int(ns),
            }
            for i, p, s, n, ns in rows
        ]

    def people(self) -> list[tuple[str, int]]:
        """Everyone who sent or received a message, with their message counts."""
        rows = self._db.execute(
            "SELECT person, count(*) FROM message_people GROUP BY person "
            f"ORDER BY person{self._d.order_text}"
        )
        return [(p, int(n)) for p, n in rows]

    def stats(self) -> dict:
        log = self._counts(
            {
                "conversations": "SELECT count(*) FROM conversations",
                "sessions": "SELECT count(*) FROM sessions",
                "messages": "SELECT count(*) FROM messages",
                "people": "SELECT count(DISTINCT person) FROM message_people",
                "vectors": "SELECT model, count(*) FROM vectors GROUP BY model",
            }
        )
        rest = self._counts(
            {
                "persons": "SELECT count(*) FROM persons",
                "decisions": "SELECT count(*) FROM decisions",
                "scenes": "SELECT count(*) FROM scenes",
                "summaries": "SELECT count(*) FROM summaries",
                "jobs": "SELECT status, count(*) FROM jobs GROUP BY status",
                # Stored before dates were bounded at input: time grounding skips them.
                "messages_out_of_range": "SELECT count(*) FROM messages "
                f"WHERE ts_epoch < {_EPOCH_MIN} OR ts_epoch >= {_EPOCH_MAX}",
            }
        )
        return {
            "path": str(self.path),
            **log,
            "embed_model": self.embed_model(),
            "migrations": self.migrations(),
            "bytes": self._size_bytes(),
            **self.derived_stats(),  # type: ignore[attr-defined]
            **self.reconcile_stats(),  # type: ignore[attr-defined]
            **rest,
        }
