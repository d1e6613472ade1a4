"""The SQLite store's message vectors as a side file that opens in milliseconds.

Loading a million float32 BLOBs out of SQLite into one matrix took 22–41 s,
paid by the first search of every process. The same vectors laid end to end
in a file open as a numpy memmap in well under a millisecond, so
``<db>.vectors/`` keeps them there:

- ``vecs-G.f32`` and ``ids-G.i64``: one row per message vector, append-only;
- ``dead-G.i64``: positions whose message was deleted (or got another vector) since;
- ``ann-G-N.sq8``: 8-bit codes of the first N positions, scanned for whole-store
  candidates (store/ann.py), optional;
- ``state.json``: what the files hold — model, dimension, rows, tombstones, the
  highest message rowid read (the watermark) and the ``vector_fills`` seq read;
- ``lock``: ``flock``ed by whichever process brings the files up to date.

SQLite stays the source of truth; the directory is derived and can be deleted.
Every change to a message's vector below the watermark is logged in
``vector_fills``: fills by ``fill_message_vectors``, deletes by a trigger
(migration 0009). A process brings the files up to date before it searches,
inside one read transaction (one snapshot): rows above the watermark are
appended, logged rowids lose their old position (a tombstone) and gain a new
one if their row still has a vector — which also covers a rowid SQLite reuses
after the newest messages were deleted. ``state.json`` is replaced atomically
after the arrays are written, so a crash leaves it describing what was there
before (bytes past its row count are ignored and overwritten); rows it missed
are still above its watermark or in the log. When the log was pruned past the
file, the store was swapped for another copy, or the files are missing or
short, the file is rebuilt from the rows under a new generation G; processes
still mapping the old generation keep reading it until they next look.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import sqlite3
import threading
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np

from . import ann
from .vecindex import top_k, unpack_many

READ_BATCH = 20_000  # rows read from SQLite per statement while catching up
log = logging.getLogger("archivist.store")


@dataclass(frozen=True)
class State:
    """What the side file covers (``state.json``)."""

    model: str
    dim: int
    store: str = ""  # the database's meta store_id (migration 0009)
    gen: int = 0
    rows: int = 0
    dead: int = 0
    rowid: int = 0  # every message up to this rowid is in the file (or logged)
    seq: int = 0  # vector_fills entries up to this seq are applied
    ordered: bool = True  # ids ascend (no late row): rowid lookups can bisect
    ann_rows: int = 0  # positions [0, ann_rows) are in the quantized index
    ann_file: str = ""


class Snapshot:
    """The side file as one process maps it: what a search reads."""

    def __init__(self, root: Path, state: State) -> None:
        self.state = state
        n, g = state.rows, state.gen
        self.ids = _map(root / f"ids-{g}.i64", np.int64, (n,))
        self.vecs = _map(root / f"vecs-{g}.f32", np.float32, (n, state.dim))
        self.live = np.ones(n, dtype=bool)
        if state.dead:
            self.live[_map(root / f"dead-{g}.i64", np.int64, (state.dead,))] = False
        self._root = root
        self._ann: ann.QuantizedScan | None = None
        self._unread = False  # the index file could not be read
        self._lookup: tuple[np.ndarray, np.ndarray] | None = None

    @property
    def ann(self) -> ann.QuantizedScan | None:
        """The quantized index over the first ``ann_rows`` positions, opened on first use
        (None when there is none, or it is of a kind this version no longer reads)."""
        if self._ann is None and self.state.ann_file.endswith(ann.SUFFIX) and not self._unread:
            try:
                self._ann = ann.QuantizedScan(self._root / self.state.ann_file, self.state.ann_rows)
            except OSError as e:  # short or damaged: searched exactly until it is rewritten
                log.warning("vector index not read: %s", e)
                self._unread = True
        return self._ann

    def __len__(self) -> int:
        return int(self.state.rows - self.state.dead)

    def positions(self, rowids: np.ndarray) -> np.ndarray:
        """Live positions of the given message rowids (those without a vector left out)."""
        if self._lookup is None:
            if self.state.ordered and not self.state.dead:
                self._lookup = (np.asarray(self.ids), np.arange(self.state.rows))
            else:
                pos = np.flatnonzero(self.live)
                order = pos[np.argsort(self.ids[pos], kind="stable")]
                self._lookup = (np.asarray(self.ids[order]), order)
        keys, pos = self._lookup
        if not keys.size or not rowids.size:
            return np.zeros(0, dtype=np.int64)
        at = np.searchsorted(keys, rowids)
        at = at[at < keys.size]
        at = at[np.isin(keys[at], rowids)]
        out = pos[at]
        return out[self.live[out]]

    def exact(self, query: np.ndarray, k: int, pos: np.ndarray | None = None) -> list:
        """Exact top-k (rowid, cosine) over ``pos`` (None: every live row)."""
        if pos is None:
            scores = np.asarray(self.vecs @ query)
            if self.state.dead:
                scores[~self.live] = -np.inf
            best = [int(i) for i in top_k(scores, k) if self.live[i]]
            return [(int(self.ids[i]), float(scores[i])) for i in best]
        pos = np.sort(pos)
        scores = np.asarray(self.vecs[pos] @ query) if pos.size else np.zeros(0)
        return [(int(self.ids[pos[i]]), float(scores[i])) for i in top_k(scores, k)]

    def approximate(
        self, query: np.ndarray, fetch: int, pos: np.ndarray | None = None, *, tail: bool = True
    ) -> np.ndarray:
        """Candidate positions: the index's ``fetch`` best among the live positions it
        covers (and among ``pos``, when given), best first; then, with ``tail``, every
        admitted row after the index."""
        index = self.ann
        assert index is not None
        admit = None
        if pos is not None:
            admit = np.zeros(self.state.rows, dtype=bool)
            admit[pos] = True
            admit &= self.live
        elif self.state.dead:
            admit = self.live
        cand = index.candidates(query, fetch, None if admit is None else admit[: index.rows])
        if not tail:
            return cand
        after = np.arange(index.rows, self.state.rows)
        return np.concatenate([cand, after[(self.live if admit is None else admit)[after]]])


def _map(path: Path, dtype, shape: tuple[int, ...]) -> np.ndarray:
    if not shape[0]:
        return np.zeros(shape, dtype=dtype)
    return np.memmap(path, dtype=dtype, mode="r", shape=shape)


class VectorFile:
    """One store's side file: brought up to date from SQLite, shared by its threads."""

    def __init__(self, db_path: Path, store_id: str = "") -> None:
        self.db_path = db_path
        self.store_id = store_id
        self.root = db_path.with_name(db_path.name + ".vectors")
        self._guard = threading.Lock()
        self._snap: Snapshot | None = None
        self._stamp: int | None = None  # state.json's mtime_ns when mapped
        self._building = False
        self.ann_error: str | None = None  # the last background build's failure

    # -- reading --------------------------------------------------------------------

    def snapshot(self, model: str, top: tuple[int, int]) -> Snapshot:
        """The file mapped and up to date with the store's ``top`` (max rowid, log seq)."""
        with self._guard:
            snap = self._mapped()
            if snap is not None and self._covers(snap, model, top):
                return snap
            with self._flock("lock"):
                snap = self._mapped()
                if snap is None or not self._covers(snap, model, top):
                    new = self._catch_up(snap.state if snap else None, model)
                    if (
                        snap is not None
                        and replace(new, rowid=snap.state.rowid, seq=snap.state.seq) == snap.state
                    ):
                        # only the watermark moved (messages stored without a vector, a
                        # log entry for a row without one): the files are as mapped, so
                        # nothing is written or mapped again; another process reading
                        # state.json finds the same nothing when it catches up
                        snap.state = new
                    else:
                        self._write_state(new)
                        snap = self._mapped()
            assert snap is not None
            return snap

    def _covers(self, snap: Snapshot, model: str, top: tuple[int, int]) -> bool:
        st = snap.state
        return st.model == model and st.store == self.store_id and (st.rowid, st.seq) == top

    def _mapped(self) -> Snapshot | None:
        """The current state's files, mapped again only when ``state.json`` changed."""
        try:
            stamp = (self.root / "state.json").stat().st_mtime_ns
        except FileNotFoundError:
            self._snap = self._stamp = None
            return None
        if self._snap is None or stamp != self._stamp:
            try:
                state = State(**json.loads((self.root / "state.json").read_text()))
                self._snap, self._stamp = Snapshot(self.root, state), stamp
            except (OSError, ValueError, TypeError):  # missing, short or foreign files
                self._snap = self._stamp = None
        return self._snap

    # -- writing --------------------------------------------------------------------

    @contextlib.contextmanager
    def _flock(self, name: str, wait: bool = True):
        self.root.mkdir(parents=True, exist_ok=True)
        with open(self.root / name, "a+b") as fh:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
            except BlockingIOError:
                yield False
                return
            try:
                yield True
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    def _write_state(self, state: State) -> None:
        tmp = self.root / "state.json.tmp"
        tmp.write_text(json.dumps(asdict(state)))
        os.replace(tmp, self.root / "state.json")

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(str(self.db_path), isolation_level=None, timeout=30.0)
        conn.execute("PRAGMA query_only=ON")
        return conn

    def _catch_up(self, state: State | None, model: str) -> State:
        """Read what the file lacks from one snapshot of the store; the new state."""
        conn = self._connect()
        try:
            conn.execute("BEGIN")
            top = conn.execute("SELECT max(rowid) FROM messages").fetchone()[0] or 0
            hi = conn.execute(
                "SELECT coalesce(max(seq), 0) FROM sqlite_sequence WHERE name = 'vector_fills'"
            ).fetchone()[0]
            lo = conn.execute("SELECT min(seq) FROM vector_fills").fetchone()[0]
            fresh = (
                state is None
                or state.model != model
                or state.store != self.store_id  # a file left beside another database
                or state.seq > hi  # another copy of the store (a restore)
                or (hi > state.seq and (lo is None or lo > state.seq + 1))  # log pruned
                or (hi == state.seq and top < state.rowid)
                or not self._files_hold(state)
            )
            if fresh:
                state = self._rebuild(conn, state, model)
            else:
                assert state is not None
                state = self._apply_log(conn, state, model, hi)
            state = self._append(conn, state, model, state.rowid, top, ordered=True)
            conn.execute("COMMIT")
            return replace(state, rowid=top, seq=hi)
        finally:
            conn.close()

    def _files_hold(self, state: State) -> bool:
        g = state.gen
        sizes = {
            f"ids-{g}.i64": state.rows * 8,
            f"vecs-{g}.f32": state.rows * state.dim * 4,
            f"dead-{g}.i64": state.dead * 8,
        }
        for name, size in sizes.items():
            p = self.root / name
            if size and (not p.exists() or p.stat().st_size < size):
                return False
        return not state.ann_file or (self.root / state.ann_file).exists()

    def _rebuild(self, conn: sqlite3.Connection, old: State | None, model: str) -> State:
        """Start a new generation (empty files); the caller appends every row."""
        gen = (old.gen + 1) if old else 1
        row = conn.execute("SELECT value FROM meta WHERE key = 'vector_dim'").fetchone()
        dim = int(row[0]) if row else (old.dim if old else 0)
        for f in self.root.glob("*"):  # earlier generations (mapped ones stay readable)
            if f.name not in ("lock", "ann.lock") and not f.name.startswith("state"):
                f.unlink(missing_ok=True)
        for name in (f"ids-{gen}.i64", f"vecs-{gen}.f32", f"dead-{gen}.i64"):
            (self.root / name).write_bytes(b"")
        return State(model=model, dim=dim, store=self.store_id, gen=gen)

    def _apply_log(self, conn: sqlite3.Connection, state: State, model: str, hi: int) -> State:
        """Tombstone the logged rowids' old rows; append their rows that have a vector now."""
        logged = np.unique(
            np.fromiter(
                (
                    r
                    for (r,) in conn.execute(
                        "SELECT msg_rowid FROM vector_fills WHERE seq > ? AND seq <= ?",
                        (state.seq, hi),
                    )
                ),
                dtype=np.int64,
            )
        )
        if not logged.size:
            return state
        snap = Snapshot(self.root, state)
        gone = np.flatnonzero(np.isin(snap.ids, logged) & snap.live)
        if gone.size:
            _append_file(self.root / f"dead-{state.gen}.i64", state.dead * 8, gone.astype("<i8"))
            state = replace(state, dead=state.dead + int(gone.size))
        for chunk in np.array_split(logged, max(1, logged.size // 500)):
            marks = ",".join("?" * chunk.size)
            rows = conn.execute(
                f"SELECT m.rowid, v.vec FROM messages m JOIN vectors v ON v.id = m.vec_id "
                f"AND v.model = ? WHERE m.rowid IN ({marks}) AND m.rowid <= ? ORDER BY m.rowid",
                (model, *(int(r) for r in chunk), state.rowid),
            ).fetchall()
            state = self._add_rows(state, rows, ordered=False)
        return state

    def _append(
        self, conn: sqlite3.Connection, state: State, model: str, after: int, upto: int, *, ordered
    ) -> State:
        """Append the rows with a vector whose rowid is in (after, upto], in rowid order."""
        while after < upto:
            rows = conn.execute(
                "SELECT m.rowid, v.vec FROM messages m JOIN vectors v ON v.id = m.vec_id "
                "AND v.model = ? WHERE m.rowid > ? AND m.rowid <= ? ORDER BY m.rowid LIMIT ?",
                (model, after, upto, READ_BATCH),
            ).fetchall()
            if not rows:
                break
            state = self._add_rows(state, rows, ordered=ordered)
            after = rows[-1][0]
        return state

    def _add_rows(self, state: State, rows: list, *, ordered: bool) -> State:
        if not rows:
            return state
        dim = state.dim or len(rows[0][1]) // 4
        ids = np.fromiter((r[0] for r in rows), np.int64, len(rows))
        mat = unpack_many([r[1] for r in rows], dim)
        g = state.gen
        if state.rows and ordered:
            last = np.fromfile(self.root / f"ids-{g}.i64", "<i8", 1, offset=(state.rows - 1) * 8)
            ordered = int(last[0]) < int(ids[0])
        _append_file(self.root / f"ids-{g}.i64", state.rows * 8, ids.astype("<i8"))
        _append_file(self.root / f"vecs-{g}.f32", state.rows * dim * 4, mat.astype("<f4"))
        return replace(
            state, dim=dim, rows=state.rows + len(rows), ordered=state.ordered and ordered
        )

    # -- the quantized index ---------------------------------------------------------------

    def build_ann(self, model: str, top: tuple[int, int], wait: bool = False) -> bool:
        """Encode every row the file holds now in a new quantized index; False if another
        process is building one (``wait``: wait for it, then build what it left out).

        Runs outside the catch-up lock (seconds at 1M rows): searches go on over
        the old index and the exact tail meanwhile. The new index is adopted only
        if the file is still the generation it was built from.
        """
        with self._flock("ann.lock", wait=wait) as got:
            if not got:
                return False
            snap = self.snapshot(model, top)
            state = snap.state
            if not state.rows or (snap.ann is not None and state.ann_rows == state.rows):
                return True
            name = f"ann-{state.gen}-{state.rows}{ann.SUFFIX}"
            ann.build(snap.vecs, state.rows, self.root / name)
            with self._guard, self._flock("lock"):
                now = self._mapped()
                if now is None or now.state.gen != state.gen:
                    (self.root / name).unlink(missing_ok=True)
                    return True
                old = now.state.ann_file
                self._write_state(replace(now.state, ann_rows=state.rows, ann_file=name))
                if old and old != name:
                    (self.root / old).unlink(missing_ok=True)
            return True

    def build_ann_soon(self, model: str, top: tuple[int, int]) -> None:
        """Build the quantized index in a background thread of this process (one at a time)."""
        with self._guard:
            if self._building:
                return
            self._building = True

        def run() -> None:
            try:
                self.build_ann(model, top)
                self.ann_error = None
            except Exception as e:  # searches go on exactly; the failure is kept and logged
                self.ann_error = f"{type(e).__name__}: {e}"
                log.warning("vector index build failed for %s: %s", self.db_path, e)
            finally:
                self._building = False

        threading.Thread(target=run, name="archivist-vector-index", daemon=True).start()


def _append_file(path: Path, offset: int, data: np.ndarray) -> None:
    """Write ``data`` at byte ``offset`` (the state's end: bytes after it were never
    committed to ``state.json`` and are overwritten)."""
    with open(path, "r+b" if path.exists() else "w+b") as fh:
        fh.seek(offset)
        fh.write(data.tobytes())
        fh.truncate()
