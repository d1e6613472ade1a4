"""SQLite backend: one file, WAL, FTS5 kept in sync by triggers, vectors as BLOBs.

Why this layout (measured in shared/research/storage.md): a plain table with a
float32 BLOB column plus an external-content FTS5 table beat sqlite-vec's vec0
at 1M rows on load speed, disk and filtered keyword search, and needs no
extension (this Python's sqlite3 cannot load one). Message vectors are searched
in a memory-mapped side file next to the database (store/vecfile.py): exactly
within a scope; over a large store's whole log, through a scan of 8-bit codes
(store/ann.py) whose best candidates are scored again exactly. Claims and
episodes use an in-process matrix (``vecindex.DenseIndex``).
"""

from __future__ import annotations

import math
import sqlite3
import threading
from collections.abc import Iterable, Sequence
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from ..clock import Clock, system_clock
from ..errors import StoreError
from ..model import Entity
from . import sql as q
from .base import Store
from .common import BIND_ERRORS, Connection, all_of, bind_error
from .dialect import SQLITE, Rows
from .migrations import Rekey, rekey_sql
from .reconcile import ENTITY_COLS, row_to_entity
from .vecfile import Snapshot, VectorFile
from .vecindex import DenseIndex, unpack_many

# Whole-store message search scans the 8-bit codes from this many vectors (an exact
# float32 product over 100k rows takes ~10 ms here; over 1M, 100–150 ms; the codes
# a quarter of that).
ANN_MIN_ROWS = 100_000
ANN_FETCH = 100  # candidates scored exactly per search (at least 10x the k asked)
# A filtered search is exact over the scope's rows up to this many of them; above
# it the codes of the admitted rows are scanned (a bitmap of their positions).
EXACT_SCOPE_ROWS = 50_000
# A filter that admits more is first tried on the unfiltered scan's best BROAD_FETCH x
# fetch candidates, checked against it in SQL, then on up to BROAD_MAX (_broad_filter).
BROAD_FETCH = 10
BROAD_MAX = 20_000
# The index is rebuilt (in the background, ~3 s at 1M) once this share of rows is
# outside it: those are scored exactly on every search, ~5 ms per 50k.
ANN_STALE_SHARE = 0.05

FREQUENT_TERMS_MIN_STORE = 50_000  # below this bm25() ranks every query term
FREQUENT_TERM_SHARE = 0.05  # terms in more of the messages are ranked by _add_frequent
FREQUENT_POSTINGS = 2_000  # newest postings of a frequent term read per query
FREQUENT_PROBE = 5_000  # postings read once to estimate a term's document count
FREQUENT_CANDIDATES = 200  # rarer terms' best matches a frequent term can lift


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

    def execute(self, sql: str, params: Sequence | dict = ()) -> Rows:
        try:
            if sql.lstrip()[:6].upper().startswith(self._READS):
                reader = self._reader()
                if reader is not None:
                    cur = reader.execute(sql, params)
                    return Rows(cur.fetchall(), cur.rowcount)
            with self._lock:
                cur = self._conn.execute(sql, params)
                rows = cur.fetchall() if cur.description else []
                return Rows(rows, cur.rowcount)
        except BIND_ERRORS as e:
            raise bind_error(e) from e

    def executemany(self, sql: str, seq: Iterable) -> Rows:
        try:
            with self._lock:
                cur = self._conn.executemany(sql, seq)
                return Rows([], cur.rowcount)
        except BIND_ERRORS as e:
            raise bind_error(e) from e

    def insert_ids(self, sql: str, seq: Iterable[Sequence]) -> list[int]:
        """One ``INSERT ... RETURNING`` per row (sqlite3's executemany returns no rows)."""
        try:
            with self._lock:
                return [int(self._conn.execute(sql, p).fetchall()[0][0]) for p in seq]
        except BIND_ERRORS as e:
            raise bind_error(e) from e

    def close(self) -> None:
        with self._lock:
            with self._readers_guard:
                readers, self._readers = self._readers, []
            for conn in readers:
                conn.close()
            self._conn.close()


class SQLiteStore(Store):
    """The embedded default Store. Safe to share between threads (one lock per store)."""

    _d = SQLITE

    def __init__(self, path: str | Path, *, clock: Clock = system_clock) -> None:
        self.path = Path(path)
        self.clock = clock
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
        self._vectors = VectorFile(self.path)
        self.ann_min_rows = ANN_MIN_ROWS  # instance settings: tests force the quantized path
        self.exact_scope_rows = EXACT_SCOPE_ROWS
        self.ann_auto = True  # build the quantized index in a background thread when due
        self._term_df: dict[str, int] = {}  # see _frequent_terms
        self._term_df_size = 0
        try:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute("PRAGMA foreign_keys=ON")
            self._db.execute("PRAGMA busy_timeout=30000")
            self.migrate()
            self._vectors.store_id = self.meta("store_id") or ""
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

    @contextmanager
    def _migration(self, rebuilds: bool):
        """A migration's transaction. One that rebuilds tables (Rekey) runs with foreign
        keys off, as SQLite's procedure for schema changes asks: dropping the old copy of
        a parent would otherwise delete its children (ON DELETE CASCADE). The pragmas
        only take effect outside a transaction; a rebuild that broke a reference (none
        should: every row keeps its id) rolls back."""
        if not rebuilds:
            with self._write() as db:
                yield db
            return
        with self._db.hold():
            self._db.execute("PRAGMA foreign_keys=OFF")
            self._db.execute("PRAGMA legacy_alter_table=ON")  # a rename rewrites nothing else
            try:
                with self._write() as db:
                    broken = len(db.execute("PRAGMA foreign_key_check").fetchall())
                    yield db
                    if len(db.execute("PRAGMA foreign_key_check").fetchall()) > broken:
                        raise StoreError("rebuilding tables broke a reference; rolled back")
            finally:
                self._db.execute("PRAGMA legacy_alter_table=OFF")
                self._db.execute("PRAGMA foreign_keys=ON")

    def _rekey(self, db: Connection, rekey: Rekey) -> None:
        """Rebuild one table with an AUTOINCREMENT key, keeping its rows (see Rekey)."""
        if db.execute("PRAGMA foreign_keys").fetchone()[0]:
            raise StoreError("a table is rebuilt only with foreign keys off")  # see _migration
        schema = db.execute(
            "SELECT type, name, sql FROM sqlite_master WHERE tbl_name = ?", (rekey.table,)
        ).fetchall()
        for sql in rekey_sql(rekey, schema):
            db.execute(sql)

    def _size_bytes(self) -> int:
        return self.path.stat().st_size if self.path.exists() else 0

    def close(self) -> None:
        with self._lock:
            self._db.close()

    # -- keyword ranking: FTS5 ------------------------------------------------------------

    def _keyword(
        self, table: str, text: str, filters: q.Filters, limit: int
    ) -> list[tuple[int, float]]:
        """BM25 over ``{table}_fts``; higher score is better. In a large store, message
        search ranks its most frequent terms apart, at a bounded cost (see _frequent)."""
        frequent = self._frequent_terms(q.query_terms(text)) if table == "messages" else {}
        match = q.fts_query(text, frequent)
        if match is None:
            return []
        rare_only = not frequent or set(q.query_terms(text)) - set(frequent)
        want = max(limit, FREQUENT_CANDIDATES) if frequent else limit
        found: dict[int, float] = {}
        if rare_only:
            sql, params = q.ranked_sql(table, match, filters, want)
            try:
                rows = self._db.execute(sql, params).fetchall()
            except sqlite3.OperationalError as e:  # should not happen: terms are quoted
                raise StoreError(f"keyword search failed for {text!r}: {e}") from e
            found = {key: -score for key, score in rows}
        if frequent:
            self._add_frequent(found, frequent, filters)
        return sorted(found.items(), key=lambda kv: -kv[1])[:limit]

    def _add_frequent(self, found: dict[int, float], frequent: dict[str, float], f) -> None:
        """Add each frequent term's BM25 weight to the candidates holding it.

        FTS5's bm25() reads a term's whole posting list to count its documents
        (a second per query for a word in half of 1M messages), so frequent
        terms are scored here instead: their IDF comes from the cached document
        count, and a document holding one gets that IDF (BM25 with tf = 1 at the
        average length; a frequent word rarely repeats in one message). Candidates
        are what the rarer terms found plus the term's newest postings within the
        filters (at most FREQUENT_POSTINGS each), so a query of common words alone
        still ranks, by how many of them a recent message holds.
        """
        scope = q.scope_match(f)
        cond, params = q.where(f, "messages", "m")
        rare = list(found)  # probed for each term; other terms' postings are not
        for term, idf in frequent.items():
            phrase = 'search_text : "' + term.replace('"', '""') + '"'
            full = f"{scope} AND {phrase}" if scope else phrase
            holders = set(
                r
                for (r,) in self._db.execute(
                    "SELECT m.rowid FROM messages_fts JOIN messages m ON m.rowid = "
                    f"messages_fts.rowid WHERE messages_fts MATCH ? AND {cond} "
                    "ORDER BY messages_fts.rowid DESC LIMIT ?",
                    (full, *params, FREQUENT_POSTINGS),
                )
            )
            known = [r for r in rare if r not in holders]
            for start in range(0, len(known), 500):
                chunk = known[start : start + 500]
                holders.update(
                    r
                    for (r,) in self._db.execute(
                        "SELECT rowid FROM messages_fts WHERE messages_fts MATCH ? "
                        f"AND rowid IN ({','.join('?' * len(chunk))})",
                        (phrase, *chunk),
                    )
                )
            for r in holders:
                found[r] = found.get(r, 0.0) + idf

    def _frequent_terms(self, terms: list[str]) -> dict[str, float]:
        """Query terms in more than 5% of a large store's messages (≥ 50k), with their
        IDF: ranked apart by _add_frequent.

        Each term's document count is probed once, reading at most FREQUENT_PROBE
        postings; past that it is extrapolated from how far into the log those
        reach (counting would read the whole list: 0.9 s for a first query's two
        words at 1M). Cached until the store grows by a tenth.
        """
        n = self._db.execute("SELECT max(rowid) FROM messages").fetchone()[0] or 0
        if n < FREQUENT_TERMS_MIN_STORE:
            return {}
        cap = int(n * FREQUENT_TERM_SHARE)
        if self._term_df_size < n / 1.1:
            self._term_df, self._term_df_size = {}, n
        out = {}
        for t in terms:
            if t not in self._term_df:
                sql, params = q.term_probe_sql("messages_fts", t, FREQUENT_PROBE)
                df, reach = self._db.execute(sql, params).fetchone()
                self._term_df[t] = int(df * n / reach) if df >= FREQUENT_PROBE else df
            df = self._term_df[t]
            if df > cap:  # FTS5's IDF, floored the way bm25() floors it
                out[t] = max(1e-6, math.log((n - df + 0.5) / (df + 0.5)))
        return out

    def entity_search(self, text: str, filters: q.Filters, limit: int) -> list[Entity]:
        """Entities of the filters' conversations whose name, aliases, roles or kind share a
        word with ``text``, most mentioned first (the caller decides which are named)."""
        match = q.fts_query(text)
        if match is None:
            return []
        where, params = all_of(self._in_conversations(filters, "e.conversation"))
        cols = ", ".join(f"e.{c}" for c in ENTITY_COLS.split(", "))
        rows = self._db.execute(
            f"SELECT {cols} FROM entities_fts JOIN entities e ON e.id = entities_fts.rowid "
            f"WHERE entities_fts MATCH ? AND {where} ORDER BY e.mentions DESC, e.id LIMIT ?",
            (match, *params, int(limit)),
        )
        return [row_to_entity(r) for r in rows]

    # -- vector search: messages in the side file, the rest in an in-process matrix ------

    def _nearest(
        self, table: str, model: str, query: np.ndarray, filters: q.Filters, limit: int
    ) -> list[tuple[int, float]]:
        """Cosine search (vectors are normalised) among ``table``'s filtered rows."""
        if table == "messages":
            return self._nearest_messages(model, query, filters, limit)
        idx = self._dense_index(model, table)
        if not len(idx):
            return []
        restrict = None
        if not filters.is_empty():
            sql, params = q.filtered_keys_sql(table, filters)
            restrict = np.sort(np.fromiter((r[0] for r in self._db.execute(sql, params)), np.int64))
        return idx.search(query, limit, restrict)

    def _vector_top(self) -> tuple[int, int]:
        """The newest message rowid and ``vector_fills`` seq: what the side file must cover."""
        top, seq = self._db.execute(
            "SELECT (SELECT max(rowid) FROM messages), "
            "(SELECT seq FROM sqlite_sequence WHERE name = 'vector_fills')"
        ).fetchone()
        return top or 0, seq or 0

    def _nearest_messages(
        self, model: str, query: np.ndarray, filters: q.Filters, limit: int
    ) -> list[tuple[int, float]]:
        """Exact over a scope's rows or a small store; the quantized scan's candidates,
        scored exactly, over a large store's whole log (or a filter that admits much
        of it)."""
        snap = self._vectors.snapshot(model, self._vector_top())
        if not len(snap):
            return []
        vec = np.asarray(query, dtype=np.float32).reshape(-1)
        if vec.shape[0] != snap.state.dim:
            raise ValueError(f"query has {vec.shape[0]} dims, index has {snap.state.dim}")
        big = len(snap) >= self.ann_min_rows
        if big:
            self._ann_due(snap, model)
        fetch = max(ANN_FETCH, 10 * limit)
        if filters.is_empty():
            if not big or snap.ann is None:
                return snap.exact(vec, limit)
            return snap.exact(vec, limit, snap.approximate(vec, fetch))
        if big and snap.ann is not None:
            sql, params = q.admits_more_sql("messages", filters, self.exact_scope_rows)
            if self._db.execute(sql, params).fetchone()[0] > self.exact_scope_rows:
                found = self._broad_filter(snap, vec, limit, fetch, filters)
                if found is not None:
                    return found
        sql, params = q.filtered_keys_sql("messages", filters)
        rowids = np.sort(np.fromiter((r[0] for r in self._db.execute(sql, params)), np.int64))
        pos = snap.positions(rowids)
        if pos.size <= self.exact_scope_rows or not big or snap.ann is None:
            return snap.exact(vec, limit, pos)
        return snap.exact(vec, limit, snap.approximate(vec, fetch, pos))

    def _broad_filter(
        self, snap: Snapshot, vec: np.ndarray, limit: int, fetch: int, filters: q.Filters
    ) -> list[tuple[int, float]] | None:
        """A filter that admits much of a large store (a time bound, ``at=``) without
        reading every key it admits (~0.45 s for half of 1M rows): the unfiltered scan's
        best candidates and the newest rows' best are checked against the filters in
        SQL, ``BROAD_FETCH`` × ``fetch`` of each, then as many again as the share that
        passed says are needed (up to ``BROAD_MAX``). Once at least ``fetch`` of the
        scan's and ``limit`` of the newest rows' pass (or all of them were checked), the
        answer is the one a scan of only the admitted rows gives: an admitted row left
        out scores below every checked one. None when too few pass: the caller reads
        the admitted keys and scans their codes."""
        index = snap.ann
        assert index is not None
        newest = np.arange(index.rows, snap.state.rows)
        newest = newest[snap.live[newest]]
        if newest.size > BROAD_FETCH * fetch:
            newest = newest[np.argsort(-np.asarray(snap.vecs[newest] @ vec), kind="stable")]
        count = BROAD_FETCH * fetch
        while True:
            scanned = snap.approximate(vec, count, tail=False)
            tail = np.sort(newest[:count])
            ids = snap.ids[np.concatenate([scanned, tail])]
            keep = np.fromiter(self.filter_rowids(ids, filters), np.int64)
            pass_scan = scanned[np.isin(snap.ids[scanned], keep)]
            pass_tail = tail[np.isin(snap.ids[tail], keep)]
            short_scan = pass_scan.size < fetch and scanned.size == count
            short_tail = pass_tail.size < limit and tail.size < newest.size
            if not (short_scan or short_tail):
                return snap.exact(vec, limit, np.concatenate([pass_scan[:fetch], pass_tail]))
            # as many as the share that passed says are needed, twice over
            passed = min(pass_scan.size / max(1, scanned.size), pass_tail.size / max(1, tail.size))
            wanted = int(math.ceil(2 * max(fetch, limit) / max(passed, 1 / count)))
            if count >= BROAD_MAX or wanted <= count:
                return None
            count = min(BROAD_MAX, wanted)

    def _ann_due(self, snap: Snapshot, model: str) -> None:
        """Start a background build of the quantized index when none covers enough of a
        large file (or the one there is of a kind this version no longer reads)."""
        st = snap.state
        outside = st.rows - st.ann_rows
        stale = outside > ANN_STALE_SHARE * max(st.ann_rows, self.ann_min_rows)
        # none, of a kind this version no longer reads, or unreadable: written anew
        if self.ann_auto and (snap.ann is None or stale or st.dead > 0.2 * st.rows):
            self._vectors.build_ann_soon(model, self._vector_top())

    def refresh_vector_index(self, build_ann: bool = False) -> dict:
        """Bring the message vector side file up to date now (and, with ``build_ann``, its
        quantized index, whatever the store's size); what it holds. For benchmarks and
        maintenance: searches do the same on their own, the index in the background."""
        model = self.embed_model()
        if model is None:
            return {"rows": 0}
        top = self._vector_top()
        snap = self._vectors.snapshot(model, top)
        if build_ann:
            self._vectors.build_ann(model, top, wait=True)
            snap = self._vectors.snapshot(model, top)
        st = snap.state
        return {
            "rows": st.rows,
            "dead": st.dead,
            "ann_rows": st.ann_rows,
            "dim": st.dim,
            "ann_error": self._vectors.ann_error,
        }

    def vector_file_bytes(self) -> int:
        """Bytes of the side file's directory (vectors, ids, tombstones, quantized index)."""
        root = self._vectors.root
        return sum(f.stat().st_size for f in root.glob("*") if f.is_file()) if root.exists() else 0

    def _dense_index(self, model: str, table: str = "messages") -> DenseIndex:
        """The cached matrix of ``model``'s vectors for ``table``, brought up to date."""
        pk = q.KEYS[table][1]
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
