"""PostgreSQL + pgvector backend: the same tables as SQLite, for servers and many processes.

Why this layout (measured in shared/research/storage.md and docs/postgres.md):
generated ``tsvector`` columns with GIN indexes pick keyword candidates and
BM25 is computed over them in SQL (``ts_rank`` ranks too differently from
BM25), with a large store's frequent terms scored apart as SQLite does;
vectors are pgvector columns searched exactly within the filtered rows (the
planner picks the B-tree filter, recall stays 1.0). Unfiltered search over a
large store scans 8-bit codes of every message vector in the searching
process and has the server score the best again (store/pgmirror.py): recall
1.0 at 1M messages, where pgvector's HNSW index reached 0.26-0.31 and its upkeep
held inserts under 250 rows/s (HNSW and IVF stay as ``ann_method`` options).
Vectors are written in pgvector's binary form. One connection per store,
guarded by a lock (the vector copy reads on one of its own); every write is
one transaction.

Install with ``pip install "archivist[postgres]"`` (from a clone:
``pip install ".[postgres]"``) and open
``PostgresStore("postgresql://user:pw@host/db", schema="archivist")``. On a
managed server (RDS, Cloud SQL, Azure, Supabase, Neon) an admin runs
``CREATE EXTENSION vector`` once (pgvector ≥ 0.8 for the iterative HNSW scan);
the store's role then needs only CREATE on its schema. Migrations take an
advisory lock, so several processes may open one store at once.
"""

from __future__ import annotations

import json
import logging
import math
import struct
from collections.abc import Sequence

import numpy as np

try:
    import psycopg
    from psycopg import sql as pgsql
    from psycopg.adapt import Dumper
    from psycopg.pq import Format
except ImportError as e:  # pragma: no cover - depends on the install
    from ..errors import ConfigError

    raise ConfigError(
        'the PostgreSQL backend needs psycopg: pip install "archivist[postgres]" '
        '(from a clone: pip install ".[postgres]")'
    ) from e

from ..clock import Clock, system_clock
from ..errors import ConfigError, StoreError
from ..model import Entity
from . import sql as q
from . import sql_pg as pq
from .base import Store
from .common import all_of, one_line
from .dialect import POSTGRES, PgVector
from .pgmirror import VectorMirror
from .pgpool import POOL_SIZE, TRANSIENT, LostConnection, PgPool
from .reconcile import ENTITY_COLS, row_to_entity

log = logging.getLogger("archivist.store")
FREQUENT_TERMS_MIN_STORE = 50_000  # as SQLite: below this every query term is ranked
FREQUENT_TERM_SHARE = 0.05  # other tables: terms in more of the rows are not ranked
FREQUENT_ROWS = 2_000  # message terms in this many rows or more are scored apart
TERM_ROWS_MIN = 200  # terms in this many messages or more are counted by refresh_term_counts
TERM_ROWS_GROWTH = 1.1  # counted again once the store holds this many times the messages
CORPUS_SAMPLED_FROM = 200_000  # rows from which BM25's N and avgdl are estimated, not counted
STATISTICS_STALE = 0.2  # rows changed since ANALYZE, as a share, past which it is not used
FREQUENT_POSTINGS = 200  # newest holders of the frequent terms read per search
FREQUENT_CANDIDATES = 200  # rarer terms' best matches a frequent term can lift
_MIGRATION_LOCK = 0x61726368  # pg_advisory_xact_lock key: one migrating process at a time
_ANN_LOCK = 0x61726369  # pg_advisory_lock key: one process (re)building the index at a time
# The approximate index of message vectors (``PostgresStore._build_ann``). HNSW: pgvector's
# defaults. IVF: one list per ANN_ROWS_PER_LIST messages, at most ANN_MAX_LISTS, rebuilt
# once the store holds ANN_REGROW times the rows it was built on; a search reads
# ``ann_probes(lists)`` lists. Both measured (recall@10 against the exact scan, in
# ``archivist bench scale --pg-dsn``) in docs/postgres.md.
ANN_ROWS_PER_LIST = 1000
ANN_MAX_LISTS = 4000
ANN_REGROW = 4
ANN_PROBE_SHARE = 0.05
HNSW_WITH = "m = 16, ef_construction = 64"
MIRROR_FETCH = 100  # the mirror's candidates scored again by the server (at least 10x k)


def ann_probes(lists: int) -> int:
    """Lists an approximate search reads: a share of them, at least 10 (all if fewer)."""
    return min(lists, max(10, math.ceil(lists * ANN_PROBE_SHARE)))


class _VectorDumper(Dumper):
    """pgvector's binary input (``vector_recv``): dimensions and a zero as two big-endian
    uint16, then the values as big-endian float4. Bound with no type of its own, so the
    statement casts it (``?::vector``) and the server reads it as a vector."""

    format = Format.BINARY

    def dump(self, obj: PgVector) -> bytes:
        return struct.pack(">HH", len(obj), 0) + obj.data.tobytes()


psycopg.adapters.register_dumper(PgVector, _VectorDumper)


# One round trip that plans a read of each table a proxied turn reads or writes
_PRIME = "SELECT " + ", ".join(
    f"(SELECT 1 FROM {t} LIMIT 1)"
    for t in (
        "messages",
        "message_people",
        "conversations",
        "sessions",
        "vectors",
        "meta",
        "jobs",
        "persons",
        "person_identities",
        "retired_persons",
    )
)


class PostgresStore(Store):
    """The server Store. Safe to share between threads (one connection, one lock)."""

    _d = POSTGRES
    # How an unfiltered message search finds its candidates on a large store (all three
    # measured in docs/postgres.md): "mirror", 8-bit codes of every vector in this process
    # (store/pgmirror.py) from ``mirror_min_rows`` messages, scored again by the server;
    # or a pgvector index, "hnsw" or "ivfflat", built by ``refresh_vector_index`` (which
    # each consolidation round runs) from ``ann_min_rows`` messages.
    ann_method = "mirror"
    mirror_min_rows = 20_000
    ann_min_rows = 100_000

    def __init__(
        self,
        dsn: str,
        *,
        schema: str = "public",
        clock: Clock = system_clock,
        pool_size: int = POOL_SIZE,
    ) -> None:
        self.schema = schema
        self.clock = clock
        self._dsn = dsn
        self._db = PgPool(self._connect, pool_size)
        self.path = f"{self._db.raw.info.dsn} schema={schema}"  # what stats() shows; no password
        # table -> (top key, N, avgdl, lexeme -> document count): BM25's corpus statistics
        self._corpus: dict[str, tuple[int, int, float, dict[str, int]]] = {}
        self._analysed: dict[str, bool] = {}  # table -> its planner statistics are current
        self._terms_counted = False  # term_rows holds a count (read with the corpus stats)
        self._mirror: VectorMirror | None = None
        try:
            self.migrate()
            self._record_older_index()
        except psycopg.Error as e:
            self._db.close()
            raise StoreError(f"{self.path} is not a usable archivist store: {e}") from e

    # -- plumbing -------------------------------------------------------------------

    def _write(self):
        return self._db.transaction()

    def _write_one(self, sql: str, params: Sequence = ()) -> list[tuple]:
        """In autocommit a statement is its own transaction: one round trip, where
        BEGIN and COMMIT around it took two more (and joins a transaction open here)."""
        return list(self._db.execute(sql, params).fetchall())

    def _connect(self) -> psycopg.Connection:
        """A new connection with the store's schema first on its search path (created if
        need be), the server's path kept after it so an extension installed elsewhere
        (e.g. ``extensions``) still resolves."""
        try:
            conn = psycopg.connect(self._dsn, autocommit=True)  # PgPool sends BEGIN
        except psycopg.Error as e:
            raise StoreError(f"cannot connect to PostgreSQL: {one_line(e)}") from e
        try:
            if self.schema != "public":
                conn.execute(
                    pgsql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(
                        pgsql.Identifier(self.schema)
                    )
                )
            conn.execute(
                "SELECT set_config('search_path', %s || ', ' || current_setting('search_path'), "
                "false)",
                (pgsql.Identifier(self.schema).as_string(conn),),
            )
            conn.commit()
        except psycopg.Error as e:
            where = f"{conn.info.dsn} schema={self.schema}"
            conn.close()
            raise StoreError(f"{where} is not a usable archivist store: {e}") from e
        return conn

    def warm(self) -> None:
        """Open the pool's connections now, each having read the catalog of the tables a
        chat's turn touches (a server start: its first turns, which may all come at
        once, then open no backend and read no catalog)."""
        self._db.fill(_PRIME)

    def _transient(self, error: BaseException) -> bool:
        return isinstance(error, (*TRANSIENT, LostConnection))

    def _in_transaction(self) -> bool:
        return self._db.in_transaction()

    def _lock_migrations(self, db) -> None:
        """One migrating process at a time, whatever the tables: an advisory lock."""
        db.execute("SELECT pg_advisory_xact_lock(?)", (_MIGRATION_LOCK,))

    def _size_bytes(self) -> int:
        row = self._db.execute(
            "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = ? AND c.relkind = 'r'",
            (self.schema,),
        ).fetchone()
        return int(row[0])

    def close(self) -> None:
        if self._mirror is not None:
            self._mirror.close()
        self._db.close()

    # -- keyword search ---------------------------------------------------------------

    def _keyword(
        self, table: str, text: str, filters: q.Filters, limit: int
    ) -> list[tuple[int, float]]:
        """BM25 (FTS5's formula and defaults) over ``table``'s GIN candidates; higher is better.

        Ranking a term in SQL costs about 9 µs for each row holding it (the row read,
        its tsvector unnested), so in a large store (≥ 50k rows) the messages' frequent
        terms, those in ``FREQUENT_ROWS`` rows or more, are scored apart
        (``_add_frequent``) as SQLite scores its own apart. A term's rows are counted up
        to that cap (each one read: ~10 µs); a frequent term's count is then the
        planner's estimate (the column's statistics, kept by ANALYZE), unless a fifth of
        the table changed since it was analysed. (Counting only up to 500 and
        estimating past it saved 3 ms a search at 1M messages but moved the top 10 away
        from BM25's: the estimate of a term the statistics do not list is a default.)
        Other tables drop terms in more than 5% of their rows, as before: they add
        almost nothing (IDF near 0).
        """
        terms = q.query_terms(text) or q.query_terms(text, keep_stopwords=True)
        if not terms:
            return []
        lexemes = [r[0] for r in self._db.execute(*pq.lexemes_sql(terms))][: pq.MAX_QUERY_LEXEMES]
        if not lexemes:
            return []
        n, avgdl, df = self._corpus_stats(table)
        if not n:
            return []
        cap = int(n * FREQUENT_TERM_SHARE) + 1 if n >= FREQUENT_TERMS_MIN_STORE else None
        apart = cap is not None and table == "messages"
        if apart:
            cap = min(cap, FREQUENT_ROWS)  # type: ignore[type-var]
        missing = [x for x in lexemes if x not in df]
        if missing and apart:
            df.update(self._counted_terms(missing))
            missing = [x for x in missing if x not in df]
        if missing:
            df.update(self._db.execute(*pq.doc_freq_sql(table, missing, cap)))  # type: ignore[arg-type]
            if apart and self._analysed.get(table):  # else the estimate is no better
                for x in missing:
                    if df[x] >= cap:  # type: ignore[operator]
                        df[x] = max(cap, self._estimated_rows(table, x))  # type: ignore[type-var]
        kept = [x for x in lexemes if df[x] > 0]
        rare = [x for x in kept if cap is None or df[x] < cap]
        if not apart:
            rare = rare or kept
        if not kept:
            return []
        # FTS5's IDF: log((N - df + 0.5) / (df + 0.5)), floored at 1e-6.
        n = max(n, *(df[x] for x in kept))  # the cached N may predate a delete
        idf = {x: max(math.log((n - df[x] + 0.5) / (df[x] + 0.5)), 1e-6) for x in kept}
        frequent = [x for x in kept if x not in rare] if apart else []
        want = max(limit, FREQUENT_CANDIDATES) if frequent else limit
        found: dict[int, float] = {}
        if rare:
            rows = self._db.execute(
                *pq.bm25_sql(
                    table,
                    rare,
                    [idf[x] for x in rare],
                    avgdl,
                    filters,
                    want,
                    [(x, idf[x]) for x in frequent],
                )
            )
            found = {int(k): float(s) for k, s in rows}
        if frequent:
            self._add_frequent(found, frequent, idf, avgdl, filters)
        return sorted(found.items(), key=lambda kv: (-kv[1], kv[0]))[:limit]

    def _counted_terms(self, lexemes: list[str]) -> dict[str, int]:
        """The messages holding each of ``lexemes`` as ``refresh_term_counts`` last
        counted them (terms in ``TERM_ROWS_MIN`` messages or more); a term it did not
        list was rarer then, and is counted at once (cheaply)."""
        if not self._terms_counted:
            return {}
        rows = self._db.execute(
            "SELECT lexeme, rows FROM term_rows WHERE lexeme = ANY(?)", (lexemes,)
        )
        return {str(x): int(n) for x, n in rows}

    def refresh_term_counts(self, force: bool = False) -> dict:
        """Count how many messages hold each term in ``TERM_ROWS_MIN`` of them or more, in
        one pass over the messages' ``tsvector``s (``ts_stat``: 2.8 s for 1M messages
        here), once the store holds ``FREQUENT_TERMS_MIN_STORE`` messages and again each
        time it grew a tenth (``force``: now). Keyword search then reads BM25's document
        counts from ``term_rows`` instead of counting a term's postings, each one a row
        read (10-20 ms a new word at 1M messages). Run by each consolidation round (the
        ``term_counts`` job)."""
        top = self._top_key("messages")
        done = int(self.meta("term_rows_top") or 0)
        if not force and (
            top < FREQUENT_TERMS_MIN_STORE or (done and top <= done * TERM_ROWS_GROWTH)
        ):
            return {"skipped": "no count due"}
        with self._write() as db:
            db.execute("DELETE FROM term_rows")
            # scope tokens ("c"/"p" and 16 hex digits) are no words: not counted
            (terms,) = db.execute(
                "WITH n AS (INSERT INTO term_rows(lexeme, rows) SELECT word, ndoc FROM "
                "ts_stat('SELECT search_tsv FROM messages') WHERE ndoc >= ? "
                "AND word !~ '^[cp][0-9a-f]{16}$' RETURNING 1) SELECT count(*) FROM n",
                (TERM_ROWS_MIN,),
            ).fetchone()
            self.set_meta("term_rows_top", str(top))  # joins this transaction
        self._corpus.pop("messages", None)  # document counts read afresh
        return {"terms": int(terms), "messages_up_to": top}

    def _estimated_rows(self, table: str, lexeme: str) -> int:
        """The planner's estimate of the rows holding ``lexeme`` (its statistics of the
        column, kept by autovacuum's ANALYZE): a frequent term is never counted."""
        (plan,) = self._db.execute(*pq.estimated_rows_sql(table, lexeme)).fetchone()
        if isinstance(plan, str):
            plan = json.loads(plan)
        return int(plan[0]["Plan"]["Plan Rows"])

    def _add_frequent(
        self,
        found: dict[int, float],
        frequent: list[str],
        idf: dict[str, float],
        avgdl: float,
        filters: q.Filters,
    ) -> None:
        """Add the messages that hold frequent terms and none of the rarer ones: the
        newest ``FREQUENT_POSTINGS`` holders within the filters, each scored by the
        frequent terms it holds, counted once (tf = 1: a frequent word rarely repeats in
        one message), as SQLite's ``_add_frequent`` does. (The rarer terms' candidates got
        the same weights in ``bm25_sql``.) A whole-store search reads only the newest
        keys, about twice as many as those postings need, so the GIN bitmap meets a key
        range before any row is read: a holder read costs 4–10 µs, a key of the range
        0.06 µs (reading all 4,600 holders of one term took 47 ms at 1M messages)."""

        def weight(doc_len: int, held: Sequence[bool]) -> float:
            norm = 1 - pq.BM25_B + pq.BM25_B * doc_len / max(avgdl, 1e-9)
            tf = (pq.BM25_K1 + 1) / (1 + pq.BM25_K1 * norm)
            return sum(idf[x] * tf for x, h in zip(frequent, held, strict=True) if h)

        after = None
        top, n, _, df = self._corpus["messages"]
        postings = sum(df[x] for x in frequent)
        if filters.is_empty():
            after = top - math.ceil(2 * FREQUENT_POSTINGS * n / postings)
        for key, doc_len, *held in self._db.execute(
            *pq.holders_sql("messages", frequent, filters, after, FREQUENT_POSTINGS)
        ):
            found.setdefault(int(key), weight(int(doc_len), held))

    def _top_key(self, table: str) -> int:
        """The highest key ``table`` has handed out and still holds (keys are never
        reused): how far it grew, read from its primary key's B-tree."""
        key = "rowid" if table == "messages" else "id"
        return int(self._db.execute(f"SELECT coalesce(max({key}), 0) FROM {table}").fetchone()[0])

    def _corpus_stats(self, table: str) -> tuple[int, float, dict[str, int]]:
        """(rows, mean words, cached document counts) of ``table``.

        Kept until rows are added (a table of 10k rows or more: until it grows
        by a tenth); deletes leave them a little stale, which only nudges IDFs. From
        ``CORPUS_SAMPLED_FROM`` rows N is the count the last VACUUM or ANALYZE left
        and avgdl a sample's, one page in 400: an N a tenth off moves each IDF by 0.1.
        Queries repeat words, so most document counts come from the cache.
        """
        top = self._top_key(table)
        cached = self._corpus.get(table)
        if cached and (top == cached[0] or cached[1] >= 10_000 and top <= cached[0] * 1.1):
            return cached[1], cached[2], cached[3]
        n, avgdl = -1, 0.0
        if top >= CORPUS_SAMPLED_FROM:  # counting 1M rows took 0.25-0.4 s, once a tenth
            n, avgdl = self._db.execute(*pq.sampled_corpus_sql(table)).fetchone()
        if n <= 0 or avgdl <= 0:  # a small table, or one no VACUUM or ANALYZE counted yet
            n, avgdl = self._db.execute(*pq.corpus_sql(table)).fetchone()
        self._corpus[table] = (top, int(n), float(avgdl), {})
        (changed, live) = self._db.execute(
            "SELECT coalesce(max(n_mod_since_analyze), 0), coalesce(max(n_live_tup), 0) "
            "FROM pg_stat_user_tables WHERE relid = to_regclass(?)",
            (table,),
        ).fetchone()
        self._analysed[table] = int(changed) <= STATISTICS_STALE * max(int(live), 1)
        if table == "messages":
            self._terms_counted = self.meta("term_rows_top") is not None
        return int(n), float(avgdl), self._corpus[table][3]

    def entity_search(self, text: str, filters: q.Filters, limit: int) -> list[Entity]:
        """Entities of the filters' conversations whose name, aliases, roles or kind share a
        word with ``text``, most mentioned first (as SQLite's, through the GIN index)."""
        terms = q.query_terms(text) or q.query_terms(text, keep_stopwords=True)
        if not terms:
            return []
        lexemes = [r[0] for r in self._db.execute(*pq.lexemes_sql(terms))]
        if not lexemes:
            return []
        tsquery = " | ".join(pq.quote_lexeme(x, "A") for x in lexemes[: pq.MAX_QUERY_LEXEMES])
        where, params = all_of(self._in_conversations(filters, "conversation"))
        rows = self._db.execute(
            f"SELECT {ENTITY_COLS} FROM entities WHERE search_tsv @@ ?::tsquery AND {where} "
            "ORDER BY mentions DESC, id LIMIT ?",
            (tsquery, *params, int(limit)),
        )
        return [row_to_entity(r) for r in rows]

    # -- vector search ----------------------------------------------------------------

    def _nearest(
        self, table: str, model: str, query: np.ndarray, filters: q.Filters, limit: int
    ) -> list[tuple[int, float]]:
        """Exact cosine top-k (vectors are normalised) among ``table``'s filtered rows."""
        if table == "messages" and filters.is_empty():
            found = self._mirror_search(model, query, limit)
            if found is not None:
                return found
        vec = np.asarray(query, dtype=np.float32).reshape(-1).tolist()
        if table == "messages" and filters.is_empty() and (index := self._ann_index()):
            return self._ann_search(model, vec, limit, index)
        sql, params = pq.exact_vector_sql(table, vec, model, filters, limit)
        try:
            rows = self._db.execute(sql, params).fetchall()
        except psycopg.errors.DataException as e:  # another dimension than the stored vectors
            raise ValueError(f"vector search failed: {e}") from e
        return [(int(k), float(s)) for k, s in rows]

    def _mirror_for(self, model: str, dim: int, build: bool) -> VectorMirror | None:
        """This process's copy of ``model``'s message vectors (``ann_method`` "mirror"),
        up to date, or None when the store is below ``mirror_min_rows`` messages, the copy
        is not read yet (``build``: read now; else it starts reading in the background),
        or cannot be read (the server's way answers meanwhile)."""
        if self.ann_method != "mirror":
            return None
        mirror = self._mirror
        if mirror is None or (mirror.model, mirror.dim) != (model, dim):
            # a small store pays one query for this on every whole-store search
            if not build and self._top_key("messages") < self.mirror_min_rows:
                return None
            if (model, str(dim)) != (self.embed_model(), self.meta("vector_dim")):
                return None  # another model's query: the server's way answers, or says why
            if mirror is not None:
                mirror.close()
            mirror = self._mirror = VectorMirror(self._connect, model, dim)
        if not mirror.ready and not build:
            mirror.build_soon()
            return None
        try:
            mirror.catch_up()
        except Exception:  # noqa: BLE001 - logged with its cause; search goes on
            log.warning("the message vector copy is behind: %s", mirror.error)
            return None
        return mirror

    def _mirror_search(
        self, model: str, query: np.ndarray, limit: int
    ) -> list[tuple[int, float]] | None:
        """Whole-store top-k from the mirror's candidates, scored exactly by the server
        (a message deleted meanwhile drops out there); None when there is no mirror."""
        vec = np.asarray(query, dtype=np.float32).reshape(-1)
        mirror = self._mirror_for(model, int(vec.shape[0]), build=False)
        if mirror is None:
            return None
        rowids = mirror.candidates(vec, max(MIRROR_FETCH, 10 * int(limit)))
        if not rowids.size:
            return []
        rows = self._db.execute(
            "SELECT m.rowid, (1 - (v.vec <=> ?::vector))::float8 FROM messages m "
            "JOIN vectors v ON v.id = m.vec_id AND v.model = ? WHERE m.rowid = ANY(?)",
            (PgVector(vec), model, rowids.tolist()),
        ).fetchall()
        found = sorted(((int(k), float(s)) for k, s in rows), key=lambda r: (-r[1], r[0]))
        return found[: int(limit)]

    def _ann_index(self) -> tuple[str, int, int] | None:
        """The approximate index unfiltered message search goes through, as ``meta`` holds
        it: (method, lists, the messages it was built on), or None while there is none
        and search is exact. The consolidation round's ``vector_index`` job builds it
        once the store passes ``ann_min_rows`` messages."""
        raw = self.meta("ann_index")
        if not raw:
            return None
        method, lists, rows, *_ = raw.split(":")
        return method, int(lists), int(rows)

    def _record_older_index(self) -> None:
        """A store made before 2026-11-30 built ``vectors_hnsw`` with its first vectors:
        ``meta`` records it once, so that searches read one row to know."""
        self._db.execute(
            "INSERT INTO meta(key, value) SELECT 'ann_index', 'hnsw:0:0:vectors_hnsw' "
            "FROM pg_indexes WHERE schemaname = current_schema() "
            "AND indexname = 'vectors_hnsw' ON CONFLICT (key) DO NOTHING"
        )

    def refresh_vector_index(self, build_ann: bool = False) -> dict:
        """Build the approximate index of message vectors now when the store needs one
        (past ``ann_min_rows`` messages with none; an IVF index grown ``ANN_REGROW``
        times past the rows it was built on), or whatever its size with ``build_ann``;
        what it holds. Run by each consolidation round (the ``vector_index`` job)."""
        model, dim = self.embed_model(), self.meta("vector_dim")
        if model is None or dim is None:
            return {"ann_index": None}
        if self.ann_method == "mirror":  # read by the searching process; kept warm here
            if build_ann or self._mirror is not None:
                mirror = self._mirror_for(model, int(dim), build=True)
                if mirror is not None:
                    return {"ann_index": self.meta("ann_index"), "mirror_rows": len(mirror)}
            return {"ann_index": self.meta("ann_index")}
        index = self._ann_index()
        if build_ann or index is None or index[0] == "ivfflat":  # else nothing can be due
            (rows,) = self._db.execute("SELECT count(*) FROM messages").fetchone()
            if index is None:
                due = rows >= self.ann_min_rows
            else:  # an IVF index's lists are set at its build: rebuilt as the store grows
                due = rows >= ANN_REGROW * index[2]
            if build_ann or due:
                self._build_ann(model, int(dim))
        return {"ann_index": self.meta("ann_index")}

    def _build_ann(self, model: str, dim: int) -> None:
        """(Re)build the approximate index of ``model``'s vectors (``ann_method``) on a
        connection of its own, with ``CREATE INDEX CONCURRENTLY`` so writes go on; the
        older index goes once the new one is valid. Not built before the store needs it:
        keeping an HNSW graph up to date cost three times all the rest of an insert at
        10k messages here. An IVF index gets one list per ``ANN_ROWS_PER_LIST`` messages
        (an insert then costs one distance per list)."""
        conn = self._connect()
        conn.autocommit = True
        try:
            conn.execute("SELECT pg_advisory_lock(%s)", (_ANN_LOCK,))
            try:
                (rows,) = conn.execute(  # type: ignore[misc]
                    "SELECT count(*) FROM vectors v JOIN messages m ON m.vec_id = v.id "
                    "WHERE v.model = %s",
                    (model,),
                ).fetchone()
                lists = max(1, min(ANN_MAX_LISTS, int(rows) // ANN_ROWS_PER_LIST))
                method = self.ann_method
                if method == "hnsw":
                    lists = 0
                name = f"vectors_{method}_{lists}_{int(rows)}"
                # what a build of the same size left, had it failed half way (invalid)
                conn.execute(
                    pgsql.SQL("DROP INDEX CONCURRENTLY IF EXISTS {}").format(pgsql.Identifier(name))
                )
                conn.execute(
                    pgsql.SQL(
                        "CREATE INDEX CONCURRENTLY {} ON vectors USING {} "
                        "((vec::vector({})) vector_cosine_ops) WITH ({}) WHERE model = {}"
                    ).format(
                        pgsql.Identifier(name),
                        pgsql.SQL(method),
                        pgsql.Literal(dim),
                        pgsql.SQL(f"lists = {lists}" if lists else HNSW_WITH),
                        pgsql.Literal(model),
                    )
                )
                old = [
                    r[0]
                    for r in conn.execute(
                        "SELECT indexname FROM pg_indexes WHERE schemaname = current_schema() "
                        "AND tablename = 'vectors' AND (indexname LIKE 'vectors_ivfflat_%%' "
                        "OR indexname LIKE 'vectors_hnsw_%%' "
                        "OR indexname = 'vectors_hnsw') AND indexname <> %s",
                        (name,),
                    )
                ]
                conn.execute(
                    "INSERT INTO meta(key, value) VALUES ('ann_index', %s) ON CONFLICT (key) "
                    "DO UPDATE SET value = EXCLUDED.value",
                    (f"{method}:{lists}:{int(rows)}:{name}",),
                )
                for index in old:
                    conn.execute(
                        pgsql.SQL("DROP INDEX CONCURRENTLY IF EXISTS {}").format(
                            pgsql.Identifier(index)
                        )
                    )
            finally:
                conn.execute("SELECT pg_advisory_unlock(%s)", (_ANN_LOCK,))
        finally:
            conn.close()

    def _ann_search(
        self, model: str, vec: list[float], limit: int, index: tuple[str, int, int]
    ) -> list[tuple[int, float]]:
        dim = int(self.meta("vector_dim") or 0)
        if dim != len(vec):
            raise ValueError(f"query has {len(vec)} dims, the index has {dim}")
        kind, lists, _ = index
        sql, params = pq.ann_vector_sql(vec, model, dim, limit)
        with self._write() as db:  # SET LOCAL needs the transaction
            if kind == "ivfflat":
                db.execute("SET LOCAL ivfflat.iterative_scan = 'relaxed_order'")
                db.execute(
                    pgsql.SQL("SET LOCAL ivfflat.probes = {}").format(
                        pgsql.Literal(ann_probes(lists))
                    )
                )
            else:
                db.execute("SET LOCAL hnsw.iterative_scan = 'relaxed_order'")
                db.execute(
                    pgsql.SQL("SET LOCAL hnsw.ef_search = {}").format(
                        pgsql.Literal(max(100, 2 * int(limit)))
                    )
                )
            rows = db.execute(sql, params).fetchall()
        # relaxed order: the index hands rows back nearly sorted
        return sorted(((int(k), float(s)) for k, s in rows), key=lambda r: (-r[1], r[0]))
