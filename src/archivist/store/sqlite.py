"""SQLite backend: one file, WAL, FTS5 kept in sync by triggers, vectors as BLOBs.

Why this layout (measured in shared/research/storage.md): a plain table with a
float32 BLOB column plus an external-content FTS5 table beat sqlite-vec's vec0
at 1M rows on load speed, disk and filtered keyword search, and needs no
extension (this Python's sqlite3 cannot load one). Exact vector search runs
in numpy over a cached matrix (``vecindex.DenseIndex``).
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from ..errors import EmbeddingMismatch, InputError, StoreError
from ..model import Attachment, Conversation, Message
from . import sql as q
from .base import AddResult, IndexedMessage
from .migrations import LEDGER_DDL, MIGRATIONS
from .sqlite_consolidate import ConsolidationMixin
from .sqlite_derived import DerivedMemoryMixin
from .sqlite_jobs import JobsMixin
from .sqlite_people import PeopleMixin
from .sqlite_reconcile import ReconcileMixin
from .vecindex import DenseIndex, pack, unpack_many

FREQUENT_TERMS_MIN_STORE = 50_000  # below this every query term is ranked
FREQUENT_TERM_SHARE = 0.05
_VECTOR_TABLES = {"messages": "rowid", "claims": "id", "episodes": "id"}  # table -> integer key
_MSG_COLS = (
    "rowid, conversation, msg_id, session, seq, speaker, addressees, role, text, "
    "attachments, ts, session_start"
)


def _row_to_message(r: sqlite3.Row | tuple) -> tuple[int, Message]:
    (rowid, conv, mid, session, seq, speaker, addr, role, text, att, ts, sstart) = r
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
    )


class _Rows:
    """A statement's fully fetched rows: a cursor's reading API, holding no connection state."""

    def __init__(self, rows: list, rowcount: int, lastrowid: int | None) -> None:
        self._rows = rows
        self._next = 0
        self.rowcount = rowcount
        self.lastrowid = lastrowid

    def fetchone(self):
        if self._next >= len(self._rows):
            return None
        self._next += 1
        return self._rows[self._next - 1]

    def fetchall(self) -> list:
        rest, self._next = self._rows[self._next :], len(self._rows)
        return rest

    def __iter__(self):
        return iter(self.fetchall())


FILLS_KEPT = 10_000  # vector_fills rows kept; a cache further behind reloads in full


class _SerialConnection:
    """The store's connections: one writer shared by threads, a reader per thread.

    Writes (and everything a thread runs inside a write transaction, so it
    sees its own changes) go to one connection, a statement at a time under
    the store's lock, rows fetched before the lock is released: two threads
    stepping cursors of one connection corrupt each other ("another row
    available"). Writers hold the lock for their whole transaction.

    Other reads go to the calling thread's own read-only connection: under WAL
    they never wait for the lock, so a request's search does not queue behind
    another thread's write, nor behind a write waiting for another process
    (a server's worker) to commit. Measured on the proxy: 60% of a turn's
    memory time was spent waiting for the shared connection.
    """

    _READS = ("SELECT", "WITH")

    def __init__(self, conn: sqlite3.Connection, lock: threading.RLock, path: Path) -> None:
        self._conn = conn
        self._lock = lock
        self._path = path
        self._local = threading.local()
        self._readers: list[sqlite3.Connection] = []
        self._readers_guard = threading.Lock()

    @contextmanager
    def hold(self):
        """The writer, for this thread alone, until the block ends (re-entrant)."""
        with self._lock:
            self._local.depth = getattr(self._local, "depth", 0) + 1
            try:
                yield self
            finally:
                self._local.depth -= 1

    def _reader(self) -> sqlite3.Connection | None:
        """This thread's read connection (None inside a write: read your own writes)."""
        if getattr(self._local, "depth", 0):
            return None
        conn = getattr(self._local, "reader", None)
        if conn is None:
            conn = sqlite3.connect(
                str(self._path), isolation_level=None, check_same_thread=False, timeout=30.0
            )
            conn.execute("PRAGMA query_only=ON")
            with self._readers_guard:
                self._readers.append(conn)
            self._local.reader = conn
        return conn

    def execute(self, sql: str, params: Sequence | dict = ()) -> _Rows:
        if sql.lstrip()[:6].upper().startswith(self._READS):
            reader = self._reader()
            if reader is not None:
                cur = reader.execute(sql, params)
                return _Rows(cur.fetchall(), cur.rowcount, cur.lastrowid)
        with self._lock:
            cur = self._conn.execute(sql, params)
            rows = cur.fetchall() if cur.description else []
            return _Rows(rows, cur.rowcount, cur.lastrowid)

    def executemany(self, sql: str, seq: Iterable) -> _Rows:
        with self._lock:
            cur = self._conn.executemany(sql, seq)
            return _Rows([], cur.rowcount, cur.lastrowid)

    def close(self) -> None:
        with self._lock:
            with self._readers_guard:
                readers, self._readers = self._readers, []
            for conn in readers:
                conn.close()
            self._conn.close()

    def __getattr__(self, name: str):
        return getattr(self._conn, name)


class SQLiteStore(DerivedMemoryMixin, ReconcileMixin, PeopleMixin, ConsolidationMixin, JobsMixin):
    """The embedded default Store. Safe to share between threads (one lock per store)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            raw = sqlite3.connect(
                str(self.path), isolation_level=None, check_same_thread=False, timeout=30.0
            )
        except (OSError, sqlite3.Error) as e:
            raise StoreError(f"cannot open store {self.path}: {e}") from e
        self._lock = threading.RLock()
        self._db = _SerialConnection(raw, self._lock, self.path)
        self._cache_lock = threading.Lock()  # the vector matrices (not the writer's lock)
        self._indexes: dict[str, DenseIndex] = {}
        self._term_df: dict[str, int] = {}  # see _frequent_terms
        self._term_df_size = 0
        try:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute("PRAGMA foreign_keys=ON")
            self._db.execute("PRAGMA busy_timeout=30000")
            self.migrate()
        except sqlite3.DatabaseError as e:
            self._db.close()
            raise StoreError(f"{self.path} is not a usable archivist store: {e}") from e

    # -- plumbing -------------------------------------------------------------------

    @contextmanager
    def _write(self):
        """One IMMEDIATE transaction: all or nothing, readers keep reading (WAL)."""
        with self._db.hold():
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            else:
                self._db.execute("COMMIT")

    def migrate(self) -> list[str]:
        """Apply pending migrations, each with its ledger row in one transaction."""
        applied: list[str] = []
        with self._db.hold():
            self._db.execute(LEDGER_DDL)
            done = {r[0] for r in self._db.execute("SELECT name FROM _migrations")}
            for mig in MIGRATIONS:
                if mig.name in done:
                    continue
                with self._write() as db:
                    for stmt in mig.statements:
                        db.execute(stmt)
                    db.execute(
                        "INSERT INTO _migrations(name, applied_at) VALUES (?, ?)",
                        (mig.name, datetime.now(UTC).isoformat()),
                    )
                applied.append(mig.name)
        return applied

    def migrations(self) -> list[str]:
        return [r[0] for r in self._db.execute("SELECT name FROM _migrations ORDER BY name")]

    def meta(self, key: str) -> str | None:
        row = self._db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return row[0] if row else None

    def embed_model(self) -> str | None:
        """The embedding model this store's vector index was built with (None if empty)."""
        return self.meta("embed_model")

    def close(self) -> None:
        with self._lock:
            self._db.close()

    # -- writes ---------------------------------------------------------------------

    def existing_hashes(self, conversation: str) -> dict[str, str]:
        """msg_id -> content hash of what is already stored for a conversation."""
        rows = self._db.execute(
            "SELECT msg_id, hash FROM messages WHERE conversation = ?", (conversation,)
        )
        return dict(rows.fetchall())

    def cached_vectors(self, model: str, hashes: Iterable[str]) -> dict[str, np.ndarray]:
        """Vectors already computed for these text hashes by this model."""
        hashes = list(dict.fromkeys(hashes))
        out: dict[str, np.ndarray] = {}
        for i in range(0, len(hashes), 500):
            chunk = hashes[i : i + 500]
            rows = self._db.execute(
                f"SELECT hash, dim, vec FROM vectors WHERE model = ? AND hash IN "
                f"({','.join('?' * len(chunk))})",
                (model, *chunk),
            )
            for h, dim, blob in rows:
                out[h] = np.frombuffer(blob, dtype="<f4", count=dim)
        return out

    def _check_model(self, db: sqlite3.Connection, model: str) -> None:
        current = self.embed_model()
        if current is None:
            db.execute("INSERT INTO meta(key, value) VALUES ('embed_model', ?)", (model,))
        elif current != model:
            raise EmbeddingMismatch(
                f"{self.path} is indexed with embedding model {current!r}, not {model!r}; "
                "use the same embedder or a new store"
            )

    def add_conversation(
        self,
        conv: Conversation,
        rows: Sequence[IndexedMessage],
        model: str,
        vectors: dict[str, np.ndarray],
    ) -> AddResult:
        """Store a conversation's new messages and their vectors in one transaction.

        Messages already stored with the same hash are skipped (idempotent
        re-ingestion); the same id with different content is refused, since the
        log is append-only.
        """
        result = AddResult(conversation=conv.id)
        with self._write() as db:
            self._check_model(db, model)
            existing = dict(
                db.execute(
                    "SELECT msg_id, hash FROM messages WHERE conversation = ?", (conv.id,)
                ).fetchall()
            )
            self._upsert_conversation(db, conv)
            new_rows = []
            for r in rows:
                m = r.message
                old = existing.get(m.id)
                if old is None:
                    new_rows.append(r)
                    existing[m.id] = m.hash
                elif old == m.hash:
                    result.unchanged += 1
                else:
                    raise InputError(
                        f"conversation {conv.id!r}, message {m.id!r}: already stored with "
                        "different content; the log is append-only (delete the conversation "
                        "to replace it)"
                    )
            vec_rows = [(model, h, int(v.shape[0]), pack(v)) for h, v in vectors.items()]
            before = db.total_changes
            db.executemany(
                "INSERT OR IGNORE INTO vectors(model, hash, dim, vec) VALUES (?, ?, ?, ?)",
                vec_rows,
            )
            result.vectors_added = db.total_changes - before
            self._insert_messages(db, new_rows, self._vector_ids(db, model, new_rows))
            result.added = len(new_rows)
            result.added_ids = [r.message.id for r in new_rows]
        return result

    def _upsert_conversation(self, db: sqlite3.Connection, conv: Conversation) -> None:
        row = db.execute(
            "SELECT participants FROM conversations WHERE id = ?", (conv.id,)
        ).fetchone()
        people = sorted(set(json.loads(row[0]) if row else []) | set(conv.participants))
        db.execute(
            "INSERT INTO conversations(id, participants, source, created_at) VALUES (?,?,?,?) "
            "ON CONFLICT(id) DO UPDATE SET participants = excluded.participants",
            (conv.id, json.dumps(people), conv.source, datetime.now(UTC).isoformat()),
        )
        db.executemany(
            "INSERT INTO sessions(conversation, number, started_at) VALUES (?,?,?) "
            "ON CONFLICT DO UPDATE SET started_at = COALESCE(sessions.started_at, "
            "excluded.started_at)",
            [
                (conv.id, s.number, s.started_at.isoformat() if s.started_at else None)
                for s in conv.sessions
            ],
        )

    @staticmethod
    def _vector_ids(
        db: sqlite3.Connection, model: str, rows: Sequence[IndexedMessage]
    ) -> dict[str, int]:
        hashes = list({r.embed_hash for r in rows})
        out: dict[str, int] = {}
        for i in range(0, len(hashes), 500):
            chunk = hashes[i : i + 500]
            out.update(
                db.execute(
                    f"SELECT hash, id FROM vectors WHERE model = ? AND hash IN "
                    f"({','.join('?' * len(chunk))})",
                    (model, *chunk),
                ).fetchall()
            )
        return out

    def _insert_messages(
        self, db: sqlite3.Connection, rows: Sequence[IndexedMessage], vec_ids: dict[str, int]
    ) -> None:
        for r in rows:
            m = r.message
            cur = db.execute(
                "INSERT INTO messages(conversation, msg_id, session, seq, speaker, speaker_key, "
                "addressees, "
                "role, text, attachments, ts, ts_epoch, session_start, hash, search_text, "
                "scope, embed_hash, vec_id) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
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
                ),
            )
            people = {q.person_key(p) for p in (m.speaker, *m.addressees) if p.strip()}
            db.executemany(
                "INSERT OR IGNORE INTO message_people(msg_rowid, person) VALUES (?, ?)",
                [(cur.lastrowid, p) for p in people],
            )

    # -- deletes --------------------------------------------------------------------

    def _after_delete(self, db: sqlite3.Connection) -> None:
        """Drop vectors nobody references and invalidate cached vector indexes."""
        # Derived rows that lost any of their messages go too: a claim or an
        # episode must not outlive the words it came from.
        db.execute(
            "DELETE FROM claims WHERE n_evidence > "
            "(SELECT count(*) FROM claim_evidence ce WHERE ce.claim_id = claims.id)"
        )
        db.execute(
            "DELETE FROM episodes WHERE n_messages > "
            "(SELECT count(*) FROM episode_messages em WHERE em.episode_id = episodes.id)"
        )
        db.execute(  # every table that embeds keeps its vectors (NULL hashes filtered out)
            "DELETE FROM vectors WHERE hash NOT IN (SELECT embed_hash FROM messages) "
            "AND hash NOT IN (SELECT embed_hash FROM claims) "
            "AND hash NOT IN (SELECT embed_hash FROM episodes WHERE embed_hash IS NOT NULL) "
            "AND hash NOT IN (SELECT embed_hash FROM entities WHERE embed_hash IS NOT NULL)"
        )
        db.execute(
            "INSERT INTO meta(key, value) VALUES ('vector_epoch', '1') ON CONFLICT(key) "
            "DO UPDATE SET value = CAST(value AS INTEGER) + 1"
        )

    def delete_conversation(self, conversation: str) -> int:
        """Remove a conversation and everything derived from it; returns messages removed."""
        with self._write() as db:
            n = db.execute("DELETE FROM messages WHERE conversation = ?", (conversation,)).rowcount
            db.execute("DELETE FROM sessions WHERE conversation = ?", (conversation,))
            gone = db.execute("DELETE FROM conversations WHERE id = ?", (conversation,)).rowcount
            if n or gone:
                self._after_delete(db)
        return n

    def delete_person(self, person: str) -> int:
        """Remove every message the person sent or received, from every index.

        The person also leaves the participant lists, and conversations left
        with no messages are removed with their sessions.
        """
        key = q.person_key(person)
        with self._write() as db:
            n = db.execute(
                "DELETE FROM messages WHERE rowid IN "
                "(SELECT msg_rowid FROM message_people WHERE person = ?)",
                (key,),
            ).rowcount
            for cid, parts in db.execute("SELECT id, participants FROM conversations").fetchall():
                kept = [p for p in json.loads(parts) if q.person_key(p) != key]
                if len(kept) != len(json.loads(parts)):
                    db.execute(
                        "UPDATE conversations SET participants = ? WHERE id = ?",
                        (json.dumps(kept), cid),
                    )
            db.execute(
                "DELETE FROM conversations WHERE id NOT IN (SELECT conversation FROM messages)"
            )
            if n:
                self._after_delete(db)
        return n

    # -- reads ----------------------------------------------------------------------

    def keyword_search(self, text: str, filters: q.Filters, limit: int) -> list[tuple[int, float]]:
        """BM25 over the FTS index; higher score is better."""
        match = q.fts_query(text, self._frequent_terms(q.query_terms(text)))
        if match is None:
            return []
        sql, params = q.keyword_search_sql(match, filters, limit)
        try:
            rows = self._db.execute(sql, params).fetchall()
        except sqlite3.OperationalError as e:  # should not happen: terms are quoted
            raise StoreError(f"keyword search failed for {text!r}: {e}") from e
        return [(rid, -score) for rid, score in rows]

    def _frequent_terms(self, terms: list[str]) -> set[str]:
        """Query terms in more than 5% of a large store's messages (≥ 50k): not worth ranking.

        BM25 must score every message a term matches; at 1M messages a word like
        "went" matches half of them and costs a second per query while adding
        almost nothing to the ranking (its IDF is near zero). Each term's
        document count is probed once, bounded by the cap, and cached until the
        store grows by a tenth.
        """
        n = self._db.execute("SELECT max(rowid) FROM messages").fetchone()[0] or 0
        if n < FREQUENT_TERMS_MIN_STORE:
            return set()
        cap = int(n * FREQUENT_TERM_SHARE)
        if self._term_df_size < n / 1.1:
            self._term_df, self._term_df_size = {}, n
        out = set()
        for t in terms:
            if t not in self._term_df:
                sql, params = q.term_probe_sql("messages_fts", t, cap + 1)
                self._term_df[t] = self._db.execute(sql, params).fetchone()[0]
            if self._term_df[t] > cap:
                out.add(t)
        return out

    def _dense_index(self, model: str, table: str = "messages") -> DenseIndex:
        """The cached matrix of ``model``'s vectors for ``table``, brought up to date."""
        pk = _VECTOR_TABLES[table]
        with self._cache_lock:
            epoch = self.meta("vector_epoch") or "0"
            idx = self._indexes.get(table)
            fills = self._fill_span() if table == "messages" else (0, 0)
            lost = idx is not None and fills[0] > idx.fill_seq + 1  # pruned before we looked
            if idx is None or idx.model != model or idx.epoch != epoch or lost:
                idx = DenseIndex(model)
                idx.epoch = epoch
                idx.fill_seq = fills[1]  # a full load covers every fill made before it
                self._indexes[table] = idx
            top = self._db.execute(f"SELECT max({pk}) FROM {table}").fetchone()[0] or 0
            if top > idx.max_rowid:
                rows = self._db.execute(
                    f"SELECT t.{pk}, v.vec, v.dim FROM {table} t JOIN vectors v "
                    f"ON v.id = t.vec_id AND v.model = ? WHERE t.{pk} > ? ORDER BY t.{pk}",
                    (model, idx.max_rowid),
                ).fetchall()
                if rows:
                    idx.append(
                        np.fromiter((r[0] for r in rows), np.int64, len(rows)),
                        unpack_many([r[1] for r in rows], rows[0][2]),
                    )
            if fills[1] > idx.fill_seq:
                self._add_late_fills(idx, model, fills[1])
            return idx

    def _fill_span(self) -> tuple[int, int]:
        """The lowest and highest seq in ``vector_fills`` (0, 0 when empty)."""
        lo, hi = self._db.execute("SELECT min(seq), max(seq) FROM vector_fills").fetchone()
        return lo or 0, hi or 0

    def _add_late_fills(self, idx: DenseIndex, model: str, upto: int) -> None:
        """Vectors filled in below rowids the index already covers (see fill_message_vectors);
        fills above them arrive with the next append."""
        rows = self._db.execute(
            "SELECT m.rowid, v.vec, v.dim FROM vector_fills f JOIN messages m "
            "ON m.rowid = f.msg_rowid JOIN vectors v ON v.id = m.vec_id AND v.model = ? "
            "WHERE f.seq > ? AND f.seq <= ?",
            (model, idx.fill_seq, upto),
        ).fetchall()
        idx.fill_seq = upto
        late = [r for r in rows if r[0] <= idx.max_rowid and r[0] not in idx]
        if late:
            idx.add_late(
                np.fromiter((r[0] for r in late), np.int64, len(late)),
                unpack_many([r[1] for r in late], late[0][2]),
            )

    def messages_without_vectors(self, conversation: str) -> dict[str, str]:
        """Message id -> embed hash of this conversation's messages stored without a vector."""
        return dict(
            self._db.execute(
                "SELECT msg_id, embed_hash FROM messages WHERE conversation = ? AND vec_id IS NULL",
                (conversation,),
            ).fetchall()
        )

    def fill_message_vectors(
        self, conversation: str, model: str, vectors: dict[str, np.ndarray]
    ) -> int:
        """Give messages stored without a vector theirs (by embed hash); how many got one."""
        if not vectors:
            return 0
        hashes = list(vectors)
        filled: list[tuple[int]] = []
        with self._write() as db:
            self._check_model(db, model)
            db.executemany(
                "INSERT OR IGNORE INTO vectors(model, hash, dim, vec) VALUES (?, ?, ?, ?)",
                [(model, h, int(v.shape[0]), pack(v)) for h, v in vectors.items()],
            )
            for i in range(0, len(hashes), 500):
                chunk = hashes[i : i + 500]
                filled += db.execute(
                    "UPDATE messages SET vec_id = (SELECT id FROM vectors WHERE model = ? "
                    "AND hash = messages.embed_hash) WHERE conversation = ? AND vec_id IS NULL "
                    f"AND embed_hash IN ({','.join('?' * len(chunk))}) RETURNING rowid",
                    (model, conversation, *chunk),
                ).fetchall()
            db.executemany("INSERT INTO vector_fills(msg_rowid) VALUES (?)", filled)
            db.execute(
                "DELETE FROM vector_fills WHERE seq <= (SELECT max(seq) FROM vector_fills) - ?",
                (FILLS_KEPT,),
            )
        return len(filled)

    def vector_search(
        self, model: str, query: np.ndarray, filters: q.Filters, limit: int
    ) -> list[tuple[int, float]]:
        """Exact cosine search (vectors are normalised) among the filtered messages."""
        idx = self._dense_index(model)
        if not len(idx):
            return []
        restrict = None
        if not filters.is_empty():
            sql, params = q.filtered_rowids_sql(filters)
            ids = [r[0] for r in self._db.execute(sql, params)]
            restrict = np.asarray(ids, dtype=np.int64)
        return idx.search(query, limit, restrict)

    def _vectors_of(self, table: str, model: str, ids: Iterable[int]) -> dict[int, np.ndarray]:
        """Row id -> its stored ``model`` vector, for a table that embeds (rows without one
        left out); claims and episodes both read theirs here."""
        pk = _VECTOR_TABLES[table]
        unique = list(dict.fromkeys(int(i) for i in ids))
        rows: list[tuple] = []
        for i in range(0, len(unique), 500):
            chunk = unique[i : i + 500]
            rows += self._db.execute(
                f"SELECT t.{pk}, v.vec, v.dim FROM {table} t JOIN vectors v ON v.id = t.vec_id "
                f"AND v.model = ? WHERE t.{pk} IN ({','.join('?' * len(chunk))})",
                (model, *chunk),
            ).fetchall()
        if not rows:
            return {}
        mat = unpack_many([r[1] for r in rows], rows[0][2])
        return {r[0]: mat[i] for i, r in enumerate(rows)}

    def _rows_by_ids(self, select: str, ids: Iterable[int]) -> Iterator[tuple]:
        """Rows of ``select`` (ending in ``IN``) for the given ids, 500 per query."""
        unique = list(dict.fromkeys(int(i) for i in ids))
        for i in range(0, len(unique), 500):
            chunk = unique[i : i + 500]
            yield from self._db.execute(f"{select} ({','.join('?' * len(chunk))})", chunk)

    def filter_rowids(self, rowids: Iterable[int], filters: q.Filters) -> set[int]:
        """The subset of ``rowids`` whose messages pass ``filters``."""
        if filters.is_empty():
            return set(rowids)
        where, params = q.filter_clause(filters)
        out: set[int] = set()
        ids = list(dict.fromkeys(int(r) for r in rowids))
        for i in range(0, len(ids), 500):
            chunk = ids[i : i + 500]
            rows = self._db.execute(
                f"SELECT m.rowid FROM messages m WHERE {where} AND m.rowid IN "
                f"({','.join('?' * len(chunk))})",
                (*params, *chunk),
            )
            out.update(r for (r,) in rows)
        return out

    def messages_by_rowid(self, rowids: Iterable[int]) -> dict[int, Message]:
        rows = self._rows_by_ids(f"SELECT {_MSG_COLS} FROM messages WHERE rowid IN", rowids)
        return dict(_row_to_message(r) for r in rows)

    def neighbours(
        self, rowid: int, before: int, after: int, filters: q.Filters | None = None
    ) -> list[tuple[int, Message]]:
        """Messages around ``rowid`` in the same conversation that pass ``filters``."""
        row = self._db.execute(
            "SELECT conversation, seq FROM messages WHERE rowid = ?", (rowid,)
        ).fetchone()
        if row is None:
            return []
        conv, seq = row
        where, params = q.filter_clause(filters or q.Filters())
        rows = self._db.execute(
            f"SELECT {_MSG_COLS.replace('rowid', 'm.rowid', 1)} FROM messages m "
            f"WHERE m.conversation = ? AND m.seq BETWEEN ? AND ? AND {where} ORDER BY m.seq",
            (conv, seq - before, seq + after, *params),
        )
        return [_row_to_message(r) for r in rows]

    def conversation_messages(self, conversation: str) -> list[tuple[int, Message]]:
        rows = self._db.execute(
            f"SELECT {_MSG_COLS} FROM messages WHERE conversation = ? ORDER BY seq",
            (conversation,),
        )
        return [_row_to_message(r) for r in rows]

    def get_message(self, conversation: str, msg_id: str) -> Message | None:
        row = self._db.execute(
            f"SELECT {_MSG_COLS} FROM messages WHERE conversation = ? AND msg_id = ?",
            (conversation, msg_id),
        ).fetchone()
        return _row_to_message(row)[1] if row else None

    def conversations(self) -> list[dict]:
        rows = self._db.execute(
            "SELECT c.id, c.participants, c.source, "
            "(SELECT count(*) FROM messages m WHERE m.conversation = c.id), "
            "(SELECT count(*) FROM sessions s WHERE s.conversation = c.id) "
            "FROM conversations c ORDER BY c.id"
        )
        return [
            {"id": i, "participants": json.loads(p), "source": s, "messages": n, "sessions": ns}
            for i, p, s, n, ns in rows
        ]

    def people(self) -> list[tuple[str, int]]:
        """Everyone who sent or received a message, with their message counts."""
        rows = self._db.execute(
            "SELECT person, count(*) FROM message_people GROUP BY person ORDER BY person"
        )
        return [(p, n) for p, n in rows]

    def stats(self) -> dict:
        one = lambda s: self._db.execute(s).fetchone()[0]  # noqa: E731
        return {
            "path": str(self.path),
            "conversations": one("SELECT count(*) FROM conversations"),
            "sessions": one("SELECT count(*) FROM sessions"),
            "messages": one("SELECT count(*) FROM messages"),
            "people": one("SELECT count(DISTINCT person) FROM message_people"),
            "vectors": dict(
                self._db.execute("SELECT model, count(*) FROM vectors GROUP BY model").fetchall()
            ),
            "embed_model": self.meta("embed_model"),
            "migrations": self.migrations(),
            "bytes": self.path.stat().st_size if self.path.exists() else 0,
            **self.derived_stats(),
            **self.reconcile_stats(),
            "persons": one("SELECT count(*) FROM persons"),
            "decisions": one("SELECT count(*) FROM decisions"),
            "scenes": one("SELECT count(*) FROM scenes"),
            "summaries": one("SELECT count(*) FROM summaries"),
            "jobs": self.job_counts(),
        }
