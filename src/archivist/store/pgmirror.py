"""A process's 8-bit copy of a PostgreSQL store's message vectors, for whole-store search.

Why (measured with ``archivist bench scale --pg-dsn``, docs/postgres.md): on the
scale benchmark's vectors pgvector's HNSW index answered whole-store searches at
recall@10 0.42 (100k messages) and 0.26-0.31 (1M) against the exact scan, IVF at 0.68
reading a tenth of its lists, and keeping an HNSW graph up to date held inserts
under 250 rows/s past 700k messages. The SQLite store scans an 8-bit code of
every vector and scores its best 100 again exactly (store/ann.py), at recall
1.0. This does the same beside a PostgreSQL store: the codes (a quarter of the
float32 size: 384 MB for 1M vectors of 384 dimensions) live in the process that
searches, built from the server's rows, and the server scores the candidates
again from its own float vectors, so a deleted message is never returned.

Kept up to date before each search, in one read-only snapshot:

- rows above the watermark (the highest message rowid read) are appended;
- rowids logged in ``vector_fills`` since (a vector filled in late, a message
  deleted: migration 0017's trigger on PostgreSQL) lose their code and get a
  new one if their row still has a vector;
- rowids below the watermark that the snapshot did not show (a transaction
  that took its ids first and committed later) are asked for again for
  ``HOLE_SECONDS``;
- when the log was pruned past what the copy read, or the store's model or
  dimension changed, the copy is read again whole.

The server stays the source of truth; this copy is derived, per process, and
lost when the process ends. A process reads it on its first whole-store search
of a large store, in the background (10.6 s for 1M vectors here), and searches
the server's way meanwhile; a consolidation round in that process keeps it up to
date, and ``refresh_vector_index(build_ann=True)`` reads it at once.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator

import numpy as np

from . import ann

log = logging.getLogger("archivist.store")

READ_BATCH = 20_000  # rows per fetch while reading the server's vectors
TRAIN_ROWS = 50_000  # the first rows read set the 8-bit range
HOLE_SECONDS = 600.0  # how long an unseen rowid below the watermark is asked for again
RECENT_HOLES = 10_000  # only the newest rowids read can be another transaction's, late


def parse_vectors(blobs: list[bytes], dim: int) -> np.ndarray:
    """pgvector's binary output (``vector_send``: two big-endian uint16, the dimensions
    and a zero, then big-endian float4s) of equal-length vectors, as float32 rows."""
    if not blobs:
        return np.zeros((0, dim), dtype=np.float32)
    raw = np.frombuffer(b"".join(blobs), dtype=">f4").reshape(len(blobs), dim + 1)
    return raw[:, 1:].astype(np.float32)  # the header is exactly one float's width


class Stopped(Exception):
    """The store closed while the copy was being read: the read ends after its batch."""


class VectorMirror:
    """8-bit codes of one model's message vectors, keyed by position; ``rowids`` maps
    positions to messages, ``live`` says which positions still stand for one."""

    def __init__(self, connect: Callable, model: str, dim: int) -> None:
        self._connect = connect  # a new psycopg connection to the store's schema
        self.model = model
        self.dim = dim
        self._conn = None
        self._lock = threading.Lock()
        self._index = None
        # position -> message rowid, and whether it still stands for one; the first ``_n``
        # entries are used, the rest is room to grow (doubling: an append copies nothing)
        self._rowids = np.zeros(0, dtype=np.int64)
        self._live = np.zeros(0, dtype=bool)
        self._n = 0
        self.dead = 0
        self.watermark = 0  # highest message rowid read
        self.seq = 0  # vector_fills entries applied, up to this seq
        self._holes: dict[int, float] = {}  # rowid -> when it was first missed
        self.ready = False
        self.error: str | None = None
        self._building: threading.Thread | None = None
        self._stop = threading.Event()  # set by close(): a read under way ends

    def __len__(self) -> int:
        return self._n - self.dead

    @property
    def rowids(self) -> np.ndarray:
        return self._rowids[: self._n]

    @property
    def live(self) -> np.ndarray:
        return self._live[: self._n]

    # -- reading the server ------------------------------------------------------------

    def _cursor(self):
        if self._conn is None or self._conn.closed:
            self._conn = self._connect()
            self._conn.autocommit = False
        return self._conn.cursor(binary=True)

    def close(self) -> None:
        """Close its connection; a read under way (in the background) stops after the
        batch it is reading, so closing the store never waits for a whole read."""
        self._stop.set()
        with self._lock:
            if self._conn is not None and not self._conn.closed:
                self._conn.close()

    def _batches(self, where: str, params: tuple) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """(rowids, vectors) of the messages matching ``where`` that have this model's
        vector, in rowid order, ``READ_BATCH`` at a time through a server-side cursor (a
        client-side one would hold every row at once: 1.5 GB for 1M vectors)."""
        with self._conn.cursor(name="archivist_vector_copy", binary=True) as cur:  # type: ignore[union-attr]
            cur.execute(
                "SELECT m.rowid, v.vec FROM messages m JOIN vectors v ON v.id = m.vec_id "
                f"AND v.model = %s WHERE {where} ORDER BY m.rowid",
                (self.model, *params),
            )
            while rows := cur.fetchmany(READ_BATCH):
                if self._stop.is_set():
                    raise Stopped("the store was closed")
                ids = np.fromiter((r[0] for r in rows), np.int64, len(rows))
                yield ids, parse_vectors([r[1] for r in rows], self.dim)

    def _read(self, where: str, params: tuple) -> tuple[np.ndarray, np.ndarray]:
        """All of ``_batches`` at once (what a catch-up reads is small)."""
        got = list(self._batches(where, params))
        if not got:
            return np.zeros(0, dtype=np.int64), np.zeros((0, self.dim), dtype=np.float32)
        return np.concatenate([i for i, _ in got]), np.concatenate([v for _, v in got])

    def catch_up(self) -> None:
        """Bring the codes up to what the server holds now (the first call reads it all)."""
        with self._lock:
            try:
                self._catch_up()
                self.error = None
            except Exception as e:  # the server's way still answers; say why here
                self.error = f"{type(e).__name__}: {e}"
                if self._conn is not None:
                    self._conn.close()
                raise

    def _catch_up(self) -> None:
        cur = self._cursor()
        try:
            cur.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            cur.execute(
                "SELECT (SELECT coalesce(max(rowid), 0) FROM messages), "
                "(SELECT coalesce(max(seq), 0) FROM vector_fills), "
                "(SELECT coalesce(min(seq), 0) FROM vector_fills)"
            )
            top, hi, lo = (int(x) for x in cur.fetchone())
            if self._index is None or (lo > self.seq + 1 and hi > self.seq):
                self._rebuild(top, hi)
            else:
                self._apply(cur, top, hi)
            self._conn.commit()
        except BaseException:
            if self._conn is not None and not self._conn.closed:
                self._conn.rollback()
            raise
        self.ready = True

    def _rebuild(self, top: int, hi: int) -> None:
        """Read every vector again into a new index, batch by batch: the 8-bit range is
        learnt from the first ``TRAIN_ROWS`` (a value outside it is clipped, which only
        blurs a candidate: the server scores the candidates again)."""
        index = ann.new_index(self.dim)
        ids: list[np.ndarray] = []
        waiting: list[np.ndarray] = []  # vectors read before the range is learnt
        for batch_ids, vecs in self._batches("m.rowid <= %s", (top,)):
            ids.append(batch_ids)
            if index.is_trained:
                index.add(np.ascontiguousarray(vecs))
                continue
            waiting.append(vecs)
            if sum(len(v) for v in waiting) >= TRAIN_ROWS:
                self._train_and_add(index, waiting)
                waiting = []
        if waiting:
            self._train_and_add(index, waiting)
        every = np.concatenate(ids) if ids else np.zeros(0, dtype=np.int64)
        self._index = index
        self._rowids, self._live, self._n = every, np.ones(every.size, dtype=bool), every.size
        self.dead = 0
        self.watermark, self.seq = top, hi
        self._holes = {}
        self._note_holes(0, top, every)

    @staticmethod
    def _train_and_add(index, parts: list[np.ndarray]) -> None:
        vecs = np.ascontiguousarray(np.concatenate(parts))
        index.train(vecs)
        index.add(vecs)

    def _apply(self, cur, top: int, hi: int) -> None:
        if hi > self.seq:  # vectors filled in late, messages deleted: drop, read again
            cur.execute(
                "SELECT DISTINCT msg_rowid FROM vector_fills WHERE seq > %s AND seq <= %s",
                (self.seq, hi),
            )
            logged = np.fromiter((r[0] for r in cur.fetchall()), np.int64)
            self._drop(logged[logged <= self.watermark])
            ids, vecs = self._read(
                "m.rowid = ANY(%s) AND m.rowid <= %s", (logged.tolist(), self.watermark)
            )
            self._add(ids, vecs)
            for r in ids.tolist():
                self._holes.pop(r, None)
            self.seq = hi
        if self._holes:
            now = time.monotonic()
            self._holes = {r: t for r, t in self._holes.items() if now - t < HOLE_SECONDS}
            if self._holes:
                ids, vecs = self._read("m.rowid = ANY(%s)", (list(self._holes),))
                self._add(ids, vecs)  # never held: a fill read above left the holes
                for r in ids.tolist():
                    self._holes.pop(r, None)
        if top > self.watermark:
            ids, vecs = self._read("m.rowid > %s AND m.rowid <= %s", (self.watermark, top))
            self._add(ids, vecs)
            self._note_holes(self.watermark, top, ids)
            self.watermark = top

    def _note_holes(self, after: int, top: int, seen: np.ndarray) -> None:
        """Rowids among the newest ``RECENT_HOLES`` of (after, top] the snapshot did not
        show with a vector: asked for again. A transaction that took its ids before
        another and committed after it leaves these; so do messages stored without a
        vector (their fill is logged anyway) and ids of a write rolled back."""
        lo = max(after, top - RECENT_HOLES)
        missing = np.setdiff1d(np.arange(lo + 1, top + 1, dtype=np.int64), seen[seen > lo])
        now = time.monotonic()
        for r in missing.tolist():
            self._holes.setdefault(r, now)

    def _drop(self, rowids: np.ndarray) -> None:
        if not rowids.size or not self.rowids.size:
            return
        gone = np.flatnonzero(np.isin(self.rowids, rowids) & self.live)
        self.dead += int(gone.size)
        self._live[gone] = False

    def _add(self, ids: np.ndarray, vecs: np.ndarray) -> None:
        if not ids.size:
            return
        self._index.add(np.ascontiguousarray(vecs))
        need = self._n + int(ids.size)
        if need > self._rowids.size:
            room = max(need, 2 * self._rowids.size)
            self._rowids = np.concatenate([self.rowids, np.zeros(room - self._n, np.int64)])
            self._live = np.concatenate([self.live, np.zeros(room - self._n, bool)])
        self._rowids[self._n : need] = ids
        self._live[self._n : need] = True
        self._n = need

    # -- searching --------------------------------------------------------------------

    def candidates(self, query: np.ndarray, count: int) -> np.ndarray:
        """Message rowids of the ``count`` best live codes for ``query``, best first."""
        with self._lock:
            if self._index is None:
                return np.zeros(0, dtype=np.int64)
            admit = self.live if self.dead else None
            pos = ann.best_positions(self._index, self._n, query, count, admit)
            return self.rowids[pos]

    def build_soon(self) -> None:
        """Read the server's vectors in a thread of its own (once at a time)."""
        if self._building is not None and self._building.is_alive():
            return

        def run() -> None:
            try:
                self.catch_up()
            except Stopped:
                pass
            except Exception:
                log.warning("could not copy the message vectors: %s", self.error)

        self._building = threading.Thread(target=run, name="archivist-pg-mirror", daemon=True)
        self._building.start()

    def wait(self) -> None:
        """Until a build started by ``build_soon`` has ended (tests, benchmarks)."""
        if self._building is not None:
            self._building.join()
