"""PostgreSQL + pgvector backend: the same tables as SQLite, for servers and many processes.

Why this layout (measured in shared/research/storage.md): generated
``tsvector`` columns with GIN indexes pick keyword candidates and BM25 is
computed over them in SQL (``ts_rank`` ranks too differently from BM25);
vectors are pgvector columns searched exactly within the filtered rows (the
planner picks the B-tree filter, recall stays 1.0), with an HNSW index only
for unfiltered search over a large store. One connection per store, guarded
by a lock; every write is one transaction.

Install with ``pip install "archivist[postgres]"`` and open
``PostgresStore("postgresql://user:pw@host/db", schema="archivist")``. On a
managed server (RDS, Cloud SQL, Azure, Supabase, Neon) an admin runs
``CREATE EXTENSION vector`` once (pgvector ≥ 0.8 for the iterative HNSW scan);
the store's role then needs only CREATE on its schema. Migrations take an
advisory lock, so several processes may open one store at once.
"""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime

import numpy as np

try:
    import psycopg
    from psycopg import sql as pgsql
except ImportError as e:  # pragma: no cover - depends on the install
    from ..errors import ConfigError

    raise ConfigError(
        'the PostgreSQL backend needs psycopg: pip install "archivist[postgres]"'
    ) from e

from ..errors import EmbeddingMismatch, InputError, StoreError
from ..model import Conversation, Message
from . import sql as q
from . import sql_pg as pq
from .base import AddResult, IndexedMessage
from .postgres_derived import PostgresDerivedMixin
from .postgres_memory import PostgresMemoryMixin
from .postgres_schema import LEDGER_DDL, MIGRATIONS
from .sqlite import _MSG_COLS, _row_to_message

FREQUENT_TERMS_MIN_STORE = 50_000  # as SQLite: below this every query term is ranked
FREQUENT_TERM_SHARE = 0.05
_MIGRATION_LOCK = 0x61726368  # pg_advisory_xact_lock key: one migrating process at a time


def vector_param(vec: np.ndarray) -> list[float]:
    """A vector as the ``real[]`` parameter the SQL casts to ``vector`` (no adapter needed)."""
    return np.asarray(vec, dtype=np.float32).reshape(-1).tolist()


class PostgresStore(PostgresDerivedMixin, PostgresMemoryMixin):
    """The server Store. Safe to share between threads (one connection, one lock)."""

    hnsw_min_rows = 100_000  # unfiltered vector search goes approximate above this many messages

    def __init__(self, dsn: str, *, schema: str = "public") -> None:
        self.schema = schema
        try:
            self._pg: psycopg.Connection = psycopg.connect(dsn, autocommit=False)
        except psycopg.Error as e:
            raise StoreError(f"cannot connect to PostgreSQL: {e}") from e
        self.path = f"{self._pg.info.dsn} schema={schema}"  # what stats() shows; no password
        self._lock = threading.RLock()
        self._depth = 0  # open _write() blocks (reads inside one must not end its transaction)
        # table -> (top key, N, avgdl, lexeme -> document count): BM25's corpus statistics
        self._corpus: dict[str, tuple[int, int, float, dict[str, int]]] = {}
        try:
            self._use_schema(schema)
            self.migrate()
        except psycopg.Error as e:
            self._pg.close()
            raise StoreError(f"{self.path} is not a usable archivist store: {e}") from e

    # -- plumbing -------------------------------------------------------------------

    def _use_schema(self, schema: str) -> None:
        """Put ``schema`` first on the search path (creating it), keeping the server's path
        after it so an extension installed elsewhere (e.g. ``extensions``) still resolves."""
        with self._write() as cur:
            if schema != "public":
                cur.execute(
                    pgsql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(pgsql.Identifier(schema))
                )
            path = pgsql.Identifier(schema).as_string(cur)
            cur.execute(
                "SELECT set_config('search_path', %s || ', ' || current_setting('search_path'), "
                "false)",
                (path,),
            )

    @contextmanager
    def _write(self) -> Iterator[psycopg.Cursor]:
        """One transaction: commit on success, roll back on error; nested blocks join it."""
        with self._lock:
            if self._depth:
                self._depth += 1
                try:
                    yield self._pg.cursor()
                finally:
                    self._depth -= 1
                return
            self._pg.rollback()  # nothing is open between calls; be sure
            self._depth = 1
            try:
                yield self._pg.cursor()
            except BaseException:
                self._pg.rollback()
                raise
            else:
                self._pg.commit()
            finally:
                self._depth = 0

    def _read(self, sql: str, params: Sequence = ()) -> list[tuple]:
        """A read query's rows; outside a write its implicit transaction ends at once."""
        with self._lock:
            try:
                return self._pg.execute(sql, params).fetchall()  # type: ignore[arg-type]
            finally:
                if not self._depth:
                    self._pg.rollback()

    def _read_one(self, sql: str, params: Sequence = ()) -> tuple | None:
        rows = self._read(sql, params)
        return rows[0] if rows else None

    def migrate(self) -> list[str]:
        """Apply pending migrations, each with its ledger row in one transaction."""
        applied: list[str] = []
        with self._write() as cur:
            cur.execute(LEDGER_DDL)
        for mig in MIGRATIONS:
            with self._write() as cur:
                cur.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
                done = cur.execute("SELECT 1 FROM _migrations WHERE name = %s", (mig.name,))
                if done.fetchone():
                    continue
                for stmt in mig.statements:
                    cur.execute(stmt)  # type: ignore[arg-type]
                cur.execute(
                    "INSERT INTO _migrations(name, applied_at) VALUES (%s, %s)",
                    (mig.name, datetime.now(UTC).isoformat()),
                )
            applied.append(mig.name)
        return applied

    def migrations(self) -> list[str]:
        return [r[0] for r in self._read('SELECT name FROM _migrations ORDER BY name COLLATE "C"')]

    def meta(self, key: str) -> str | None:
        row = self._read_one("SELECT value FROM meta WHERE key = %s", (key,))
        return row[0] if row else None

    def set_meta(self, key: str, value: str) -> None:
        with self._write() as cur:
            cur.execute(
                "INSERT INTO meta(key, value) VALUES (%s, %s) "
                "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (key, value),
            )

    def embed_model(self) -> str | None:
        """The embedding model this store's vector index was built with (None if empty)."""
        return self.meta("embed_model")

    def close(self) -> None:
        with self._lock:
            if not self._pg.closed:
                self._pg.rollback()
                self._pg.close()

    # -- writes ---------------------------------------------------------------------

    def existing_hashes(self, conversation: str) -> dict[str, str]:
        """msg_id -> content hash of what is already stored for a conversation."""
        rows = self._read(
            "SELECT msg_id, hash FROM messages WHERE conversation = %s", (conversation,)
        )
        return dict(rows)  # type: ignore[arg-type]

    def cached_vectors(self, model: str, hashes: Iterable[str]) -> dict[str, np.ndarray]:
        """Vectors already computed for these text hashes by this model."""
        wanted = list(dict.fromkeys(hashes))
        if not wanted:
            return {}
        rows = self._read(
            "SELECT hash, vec::real[] FROM vectors WHERE model = %s AND hash = ANY(%s)",
            (model, wanted),
        )
        return {h: np.asarray(v, dtype=np.float32) for h, v in rows}

    def messages_without_vectors(self, conversation: str) -> dict[str, str]:
        """Message id -> embed hash of this conversation's messages stored without a vector."""
        return dict(
            self._read(
                "SELECT msg_id, embed_hash FROM messages WHERE conversation = %s "
                "AND vec_id IS NULL",
                (conversation,),
            )
        )

    def fill_message_vectors(
        self, conversation: str, model: str, vectors: dict[str, np.ndarray]
    ) -> int:
        """Give messages stored without a vector theirs (by embed hash); how many got one."""
        if not vectors:
            return 0
        dim = next(int(v.shape[0]) for v in vectors.values())
        with self._write() as cur:
            self._check_model(cur, model, dim)
            self._put_vectors_pg(cur, model, vectors)
            cur.execute(
                "UPDATE messages m SET vec_id = v.id FROM vectors v WHERE m.conversation = %s "
                "AND m.vec_id IS NULL AND m.embed_hash = ANY(%s) AND v.model = %s "
                "AND v.hash = m.embed_hash",
                (conversation, list(vectors), model),
            )
            return cur.rowcount

    def _check_model(self, cur: psycopg.Cursor, model: str, dim: int | None) -> None:
        """Refuse another model's vectors; the first model (and dimension) builds the HNSW index."""
        cur.execute(
            "INSERT INTO meta(key, value) VALUES ('embed_model', %s) ON CONFLICT DO NOTHING",
            (model,),
        )
        current = cur.execute("SELECT value FROM meta WHERE key = 'embed_model'").fetchone()[0]  # type: ignore[index]
        if current != model:
            raise EmbeddingMismatch(
                f"{self.path} is indexed with embedding model {current!r}, not {model!r}; "
                "use the same embedder or a new store"
            )
        if dim is None:
            return
        fresh = cur.execute(
            "INSERT INTO meta(key, value) VALUES ('vector_dim', %s) ON CONFLICT DO NOTHING",
            (str(dim),),
        ).rowcount
        if fresh:
            cur.execute(
                pgsql.SQL(
                    "CREATE INDEX IF NOT EXISTS vectors_hnsw ON vectors USING hnsw "
                    "((vec::vector({})) vector_cosine_ops) WHERE model = {}"
                ).format(pgsql.Literal(int(dim)), pgsql.Literal(model))
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
        log is append-only. The conversation row is locked first, so two
        processes adding to one conversation take turns.
        """
        result = AddResult(conversation=conv.id)
        dim = next((int(v.shape[0]) for v in vectors.values()), None)
        with self._write() as cur:
            self._check_model(cur, model, dim)
            self._upsert_conversation(cur, conv)
            existing = dict(
                cur.execute(
                    "SELECT msg_id, hash FROM messages WHERE conversation = %s", (conv.id,)
                ).fetchall()
            )
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
            result.vectors_added = self._put_vectors_pg(cur, model, vectors)
            self._insert_messages(cur, new_rows, self._vector_ids(cur, model, new_rows))
            result.added = len(new_rows)
            result.added_ids = [r.message.id for r in new_rows]
        return result

    @staticmethod
    def _put_vectors_pg(cur: psycopg.Cursor, model: str, vectors: dict[str, np.ndarray]) -> int:
        """Cache vectors under (model, hash), keeping ones already there; returns rows added."""
        if not vectors:
            return 0
        cur.executemany(
            "INSERT INTO vectors(model, hash, dim, vec) VALUES (%s, %s, %s, %s::real[]::vector) "
            "ON CONFLICT (model, hash) DO NOTHING",
            [(model, h, int(v.shape[0]), vector_param(v)) for h, v in vectors.items()],
        )
        return max(cur.rowcount, 0)

    @staticmethod
    def _upsert_conversation(cur: psycopg.Cursor, conv: Conversation) -> None:
        cur.execute(
            "INSERT INTO conversations(id, participants, source, created_at) "
            "VALUES (%s, '[]', %s, %s) ON CONFLICT (id) DO NOTHING",
            (conv.id, conv.source, datetime.now(UTC).isoformat()),
        )
        (parts,) = cur.execute(
            "SELECT participants FROM conversations WHERE id = %s FOR UPDATE", (conv.id,)
        ).fetchone()  # type: ignore[misc]
        people = sorted(set(json.loads(parts)) | set(conv.participants))
        cur.execute(
            "UPDATE conversations SET participants = %s WHERE id = %s",
            (json.dumps(people), conv.id),
        )
        cur.executemany(
            "INSERT INTO sessions(conversation, number, started_at) VALUES (%s, %s, %s) "
            "ON CONFLICT (conversation, number) DO UPDATE SET started_at = "
            "COALESCE(sessions.started_at, excluded.started_at)",
            [
                (conv.id, s.number, s.started_at.isoformat() if s.started_at else None)
                for s in conv.sessions
            ],
        )

    @staticmethod
    def _vector_ids(
        cur: psycopg.Cursor, model: str, rows: Sequence[IndexedMessage]
    ) -> dict[str, int]:
        hashes = list({r.embed_hash for r in rows})
        if not hashes:
            return {}
        found = cur.execute(
            "SELECT hash, id FROM vectors WHERE model = %s AND hash = ANY(%s)", (model, hashes)
        )
        return dict(found.fetchall())

    @staticmethod
    def _insert_messages(
        cur: psycopg.Cursor, rows: Sequence[IndexedMessage], vec_ids: dict[str, int]
    ) -> None:
        if not rows:
            return
        cur.executemany(
            "INSERT INTO messages(conversation, msg_id, session, seq, speaker, speaker_key, "
            "addressees, role, text, attachments, ts, ts_epoch, session_start, hash, "
            "search_text, scope, embed_hash, vec_id) VALUES "
            f"({', '.join(['%s'] * 18)}) RETURNING rowid",
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
                )
                for r in rows
                for m in (r.message,)
            ],
            returning=True,
        )
        rowids = []
        while True:
            rowids.append(cur.fetchone()[0])  # type: ignore[index]
            if not cur.nextset():
                break
        people = [
            (rowid, p)
            for rowid, r in zip(rowids, rows, strict=True)
            for p in {q.person_key(x) for x in (r.message.speaker, *r.message.addressees)}
            if p
        ]
        cur.executemany(
            "INSERT INTO message_people(msg_rowid, person) VALUES (%s, %s) ON CONFLICT DO NOTHING",
            people,
        )

    # -- deletes --------------------------------------------------------------------

    @staticmethod
    def _after_delete(cur: psycopg.Cursor) -> None:
        """Drop derived rows that lost evidence and vectors nothing references any more."""
        cur.execute(
            "DELETE FROM claims c WHERE c.n_evidence > "
            "(SELECT count(*) FROM claim_evidence ce WHERE ce.claim_id = c.id)"
        )
        cur.execute(
            "DELETE FROM episodes e WHERE e.n_messages > "
            "(SELECT count(*) FROM episode_messages em WHERE em.episode_id = e.id)"
        )
        cur.execute(
            "DELETE FROM vectors v WHERE "
            "NOT EXISTS (SELECT 1 FROM messages m WHERE m.embed_hash = v.hash) AND "
            "NOT EXISTS (SELECT 1 FROM claims c WHERE c.embed_hash = v.hash) AND "
            "NOT EXISTS (SELECT 1 FROM episodes e WHERE e.embed_hash = v.hash)"
        )

    def delete_conversation(self, conversation: str) -> int:
        """Remove a conversation and everything derived from it; returns messages removed."""
        with self._write() as cur:
            n = cur.execute(
                "DELETE FROM messages WHERE conversation = %s", (conversation,)
            ).rowcount
            cur.execute("DELETE FROM sessions WHERE conversation = %s", (conversation,))
            gone = cur.execute("DELETE FROM conversations WHERE id = %s", (conversation,)).rowcount
            if n or gone:
                self._after_delete(cur)
        return max(n, 0)

    def delete_person(self, person: str) -> int:
        """Remove every message the person sent or received, from every index.

        The person also leaves the participant lists, and conversations left
        with no messages are removed with their sessions.
        """
        key = q.person_key(person)
        with self._write() as cur:
            n = cur.execute(
                "DELETE FROM messages WHERE rowid IN "
                "(SELECT msg_rowid FROM message_people WHERE person = %s)",
                (key,),
            ).rowcount
            convs = cur.execute("SELECT id, participants FROM conversations FOR UPDATE")
            for cid, parts in convs.fetchall():
                kept = [p for p in json.loads(parts) if q.person_key(p) != key]
                if len(kept) != len(json.loads(parts)):
                    cur.execute(
                        "UPDATE conversations SET participants = %s WHERE id = %s",
                        (json.dumps(kept), cid),
                    )
            cur.execute(
                "DELETE FROM conversations c WHERE NOT EXISTS "
                "(SELECT 1 FROM messages m WHERE m.conversation = c.id)"
            )
            if n:
                self._after_delete(cur)
        return max(n, 0)

    # -- keyword search ---------------------------------------------------------------

    def _bm25(
        self, table: str, text: str, filters: q.Filters, limit: int
    ) -> list[tuple[int, float]]:
        """BM25 (FTS5's formula and defaults) over ``table``'s GIN candidates; higher is better.

        Terms in more than 5% of a large table's rows (≥ 50k) are not ranked,
        as in SQLite: they cost the most and add almost nothing (IDF near 0).
        """
        terms = q.query_terms(text) or q.query_terms(text, keep_stopwords=True)
        if not terms:
            return []
        lexemes = [r[0] for r in self._read(*pq.lexemes_sql(terms))][: pq.MAX_QUERY_LEXEMES]
        if not lexemes:
            return []
        n, avgdl, df = self._corpus_stats(table)
        if not n:
            return []
        cap = int(n * FREQUENT_TERM_SHARE) + 1 if n >= FREQUENT_TERMS_MIN_STORE else None
        missing = [x for x in lexemes if x not in df]
        if missing:
            df.update(self._read(*pq.doc_freq_sql(table, missing, cap)))  # type: ignore[arg-type]
        kept = [x for x in lexemes if df[x] > 0]
        if cap is not None:
            kept = [x for x in kept if df[x] < cap] or kept
        if not kept:
            return []
        # FTS5's IDF: log((N - df + 0.5) / (df + 0.5)), floored at 1e-6.
        n = max(n, *(df[x] for x in kept))  # the cached N may predate a delete
        idfs = [max(math.log((n - df[x] + 0.5) / (df[x] + 0.5)), 1e-6) for x in kept]
        rows = self._read(*pq.bm25_sql(table, kept, idfs, avgdl, filters, limit))
        return [(int(k), float(s)) for k, s in rows]

    def _corpus_stats(self, table: str) -> tuple[int, float, dict[str, int]]:
        """(rows, mean words, cached document counts) of ``table``.

        Kept until rows are added (a table of 10k rows or more: until it grows
        by a tenth); deletes leave them a little stale, which only nudges IDFs.
        Queries repeat words, so most document counts come from the cache.
        """
        key = "rowid" if table == "messages" else "id"
        top = int(self._read_one(f"SELECT coalesce(max({key}), 0) FROM {table}")[0])  # type: ignore[index]
        cached = self._corpus.get(table)
        if cached and (top == cached[0] or cached[1] >= 10_000 and top <= cached[0] * 1.1):
            return cached[1], cached[2], cached[3]
        n, avgdl = self._read_one(*pq.corpus_sql(table))  # type: ignore[misc]
        self._corpus[table] = (top, int(n), float(avgdl), {})
        return int(n), float(avgdl), self._corpus[table][3]

    def keyword_search(self, text: str, filters: q.Filters, limit: int) -> list[tuple[int, float]]:
        """BM25 over the messages' search text; higher score is better."""
        return self._bm25("messages", text, filters, limit)

    # -- vector search ----------------------------------------------------------------

    def _vector_search(
        self, table: str, model: str, query: np.ndarray, filters: q.Filters, limit: int
    ) -> list[tuple[int, float]]:
        """Exact cosine top-k (vectors are normalised) among ``table``'s filtered rows."""
        vec = vector_param(query)
        if table == "messages" and filters.is_empty() and self._use_hnsw():
            return self._hnsw_search(model, vec, limit)
        sql, params = pq.exact_vector_sql(table, vec, model, filters, limit)
        try:
            rows = self._read(sql, params)
        except psycopg.errors.DataException as e:  # another dimension than the stored vectors
            raise ValueError(f"vector search failed: {e}") from e
        return [(int(k), float(s)) for k, s in rows]

    def _use_hnsw(self) -> bool:
        """Whether unfiltered message search is big enough to go through the HNSW index."""
        if self.meta("vector_dim") is None:
            return False
        if self.hnsw_min_rows <= 0:
            return True
        row = self._read_one("SELECT reltuples FROM pg_class WHERE oid = 'messages'::regclass")
        return bool(row and row[0] >= self.hnsw_min_rows)

    def _hnsw_search(self, model: str, vec: list[float], limit: int) -> list[tuple[int, float]]:
        dim = int(self.meta("vector_dim") or 0)
        if dim != len(vec):
            raise ValueError(f"query has {len(vec)} dims, the index has {dim}")
        sql, params = pq.hnsw_vector_sql(vec, model, dim, limit)
        with self._write() as cur:  # SET LOCAL needs the transaction
            cur.execute("SET LOCAL hnsw.iterative_scan = 'relaxed_order'")
            cur.execute(
                pgsql.SQL("SET LOCAL hnsw.ef_search = {}").format(
                    pgsql.Literal(max(100, 2 * int(limit)))
                )
            )
            rows = cur.execute(sql, params).fetchall()  # type: ignore[arg-type]
        # relaxed order: the index hands rows back nearly sorted
        return sorted(((int(k), float(s)) for k, s in rows), key=lambda r: (-r[1], r[0]))

    def vector_search(
        self, model: str, query: np.ndarray, filters: q.Filters, limit: int
    ) -> list[tuple[int, float]]:
        """Cosine search among the filtered messages (exact; HNSW only unfiltered, at scale)."""
        return self._vector_search("messages", model, query, filters, limit)

    # -- reads ----------------------------------------------------------------------

    def filter_rowids(self, rowids: Iterable[int], filters: q.Filters) -> set[int]:
        """The subset of ``rowids`` whose messages pass ``filters``."""
        ids = list(dict.fromkeys(int(r) for r in rowids))
        if filters.is_empty() or not ids:
            return set(ids)
        cond, params = pq.where(filters, "messages", "m")
        rows = self._read(
            f"SELECT m.rowid FROM messages m WHERE {cond} AND m.rowid = ANY(%s)", (*params, ids)
        )
        return {int(r) for (r,) in rows}

    def messages_by_rowid(self, rowids: Iterable[int]) -> dict[int, Message]:
        ids = list(dict.fromkeys(int(r) for r in rowids))
        if not ids:
            return {}
        rows = self._read(f"SELECT {_MSG_COLS} FROM messages WHERE rowid = ANY(%s)", (ids,))
        return dict(_row_to_message(r) for r in rows)

    def neighbours(
        self, rowid: int, before: int, after: int, filters: q.Filters | None = None
    ) -> list[tuple[int, Message]]:
        """Messages around ``rowid`` in the same conversation that pass ``filters``."""
        row = self._read_one(
            "SELECT conversation, seq FROM messages WHERE rowid = %s", (int(rowid),)
        )
        if row is None:
            return []
        conv, seq = row
        cond, params = pq.where(filters or q.Filters(), "messages", "m")
        rows = self._read(
            f"SELECT {_MSG_COLS.replace('rowid', 'm.rowid', 1)} FROM messages m "
            f"WHERE m.conversation = %s AND m.seq BETWEEN %s AND %s AND {cond} ORDER BY m.seq",
            (conv, seq - before, seq + after, *params),
        )
        return [_row_to_message(r) for r in rows]

    def conversation_messages(self, conversation: str) -> list[tuple[int, Message]]:
        rows = self._read(
            f"SELECT {_MSG_COLS} FROM messages WHERE conversation = %s ORDER BY seq",
            (conversation,),
        )
        return [_row_to_message(r) for r in rows]

    def get_message(self, conversation: str, msg_id: str) -> Message | None:
        row = self._read_one(
            f"SELECT {_MSG_COLS} FROM messages WHERE conversation = %s AND msg_id = %s",
            (conversation, msg_id),
        )
        return _row_to_message(row)[1] if row else None

    def conversations(self) -> list[dict]:
        rows = self._read(
            "SELECT c.id, c.participants, c.source, "
            "(SELECT count(*) FROM messages m WHERE m.conversation = c.id), "
            "(SELECT count(*) FROM sessions s WHERE s.conversation = c.id) "
            'FROM conversations c ORDER BY c.id COLLATE "C"'
        )
        return [
            {"id": i, "participants": json.loads(p), "source": s, "messages": n, "sessions": ns}
            for i, p, s, n, ns in rows
        ]

    def people(self) -> list[tuple[str, int]]:
        """Everyone who sent or received a message, with their message counts."""
        rows = self._read(
            "SELECT person, count(*) FROM message_people GROUP BY person "
            'ORDER BY person COLLATE "C"'
        )
        return [(p, int(n)) for p, n in rows]

    def stats(self) -> dict:
        def one(sql: str, params: Sequence = ()) -> int:
            return int(self._read_one(sql, params)[0])  # type: ignore[index]

        return {
            "path": self.path,
            "conversations": one("SELECT count(*) FROM conversations"),
            "sessions": one("SELECT count(*) FROM sessions"),
            "messages": one("SELECT count(*) FROM messages"),
            "people": one("SELECT count(DISTINCT person) FROM message_people"),
            "vectors": {
                m: int(n)
                for m, n in self._read("SELECT model, count(*) FROM vectors GROUP BY model")
            },
            "embed_model": self.meta("embed_model"),
            "migrations": self.migrations(),
            "bytes": one(
                "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
                "JOIN pg_namespace n ON n.oid = c.relnamespace "
                "WHERE n.nspname = %s AND c.relkind = 'r'",
                (self.schema,),
            ),
            **self.derived_stats(),
            **self.reconcile_stats(),
            "persons": one("SELECT count(*) FROM persons"),
            "decisions": one("SELECT count(*) FROM decisions"),
            "scenes": one("SELECT count(*) FROM scenes"),
            "summaries": one("SELECT count(*) FROM summaries"),
            "jobs": self.job_counts(),
        }
