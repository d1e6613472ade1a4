"""What every group of the store body stands on: the connection it is handed,
the dialect, and the few helpers all groups share (id lists, vectors, time).

A backend (store/sqlite.py, store/postgres.py) provides ``_db`` (a
``Connection``), ``_d`` (its Dialect) and ``_write()`` (one transaction, yielding
the connection), plus keyword ranking and vector search, which differ in kind.
"""

from __future__ import annotations

import functools
import json
import random
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any, Protocol, TypeVar

import numpy as np

from ..clock import Clock, system_clock
from ..errors import InputError, StoreError
from .dialect import Dialect, Rows
from .sql import Filters

T = TypeVar("T")
_INT64 = range(-(2**63), 2**63).__contains__
FILLS_KEPT = 10_000  # vector_fills rows kept; a cache further behind reloads in full
# A write the server aborted as a whole (to break a deadlock, a serialization conflict,
# a connection lost before its commit) is run again, up to this many tries in all, after
# pauses growing from BACKOFF_S (jittered, so two writers that collided part)
TRIES = 5
BACKOFF_S = 0.02


class Connection(Protocol):
    """A backend's connection as the body uses it; SQL has ``?`` placeholders."""

    def execute(self, sql: str, params: Sequence = ()) -> Rows: ...

    def executemany(self, sql: str, seq: Iterable[Sequence]) -> Rows: ...

    def insert_ids(self, sql: str, seq: Iterable[Sequence]) -> list[int]:
        """Run an ``INSERT ... RETURNING <key>`` once per parameter row; the keys."""
        ...


BIND_ERRORS = (UnicodeEncodeError, OverflowError)  # what the drivers raise for such values


def bind_error(e: Exception) -> InputError:
    """A value the engine cannot hold (a lone surrogate, an integer past 64 bits) is the
    caller's input: one line, never a driver traceback. The service checks its inputs
    first; this catches whatever path a value took around those checks."""
    if isinstance(e, UnicodeEncodeError):
        return InputError(f"a value holds a lone surrogate at character {e.start}")
    return InputError("an integer is out of the 64-bit range the store holds")


def one_line(error: BaseException) -> str:
    """A driver's message on one line (libpq's span several)."""
    return " ".join(str(error).split())


def retried(method: Callable[..., T]) -> Callable[..., T]:
    """A store write run again when its failure was transient (the backend's
    ``_transient``): the server rolled its whole transaction back, so running the method
    again is running it once. Never from inside an outer transaction, which the failure
    aborted too: the outer write's own method runs again. After ``TRIES`` a one-line
    StoreError says what kept failing."""

    @functools.wraps(method)
    def run(self, *args, **kwargs):
        for attempt in range(1, TRIES + 1):
            try:
                return method(self, *args, **kwargs)
            except Exception as e:
                if not self._transient(e) or self._in_transaction():
                    raise
                if attempt == TRIES:
                    why = one_line(e) or type(e).__name__
                    raise StoreError(f"{method.__name__} failed {TRIES} times: {why}") from e
            time.sleep(BACKOFF_S * 2 ** (attempt - 1) * random.uniform(0.5, 1.5))
        raise AssertionError("unreachable")

    return run


def all_of(*conds: tuple[str, Sequence] | None) -> tuple[str, list]:
    """The AND of the (fragment, parameters) pairs given, None ones skipped."""
    given = [c for c in conds if c is not None]
    return " AND ".join(c for c, _ in given) or "1 = 1", [p for _, ps in given for p in ps]


def iso(d: datetime | None) -> str | None:
    return d.isoformat() if d else None


def dt(s: str | None) -> datetime | None:
    return datetime.fromisoformat(s) if s else None


def record(cls: type[T], fields: str, row: Sequence, **convert: Callable[[Any], Any]) -> T:
    """A ``cls`` made from ``row``, whose columns are the comma-separated ``fields``, each
    value first passed through its converter in ``convert`` (JSON text, ISO time)."""
    names = [f.strip() for f in fields.split(",")]
    return cls(**{n: convert[n](v) if n in convert else v for n, v in zip(names, row, strict=True)})


def json_tuple(text: str) -> tuple:
    return tuple(json.loads(text))


class Body:
    """The base of every store group: typed access to the backend, shared helpers."""

    _db: Connection
    _d: Dialect
    clock: Clock = system_clock  # what stamps rows (created_at, updated_at); see registry

    def _now_iso(self) -> str:
        return self.clock().isoformat()

    def _write(self) -> AbstractContextManager[Connection]:
        raise NotImplementedError

    def _write_one(self, sql: str, params: Sequence = ()) -> list[tuple]:
        """One statement as a write transaction of its own; the rows it returned."""
        with self._write() as db:
            return list(db.execute(sql, params).fetchall())

    def _transient(self, error: BaseException) -> bool:
        """Whether a write that raised ``error`` was rolled back whole and may simply run
        again (see ``retried``). SQLite waits for its lock instead (busy_timeout)."""
        return False

    def _in_transaction(self) -> bool:
        """Whether a write transaction is open on this thread's connection."""
        return False

    # What differs in kind between the engines (store/sqlite.py, store/postgres.py):

    def _keyword(
        self, table: str, text: str, filters: Filters, limit: int
    ) -> list[tuple[int, float]]:
        """BM25 over ``table``'s search text within the filters; higher is better."""
        raise NotImplementedError

    def _nearest(
        self, table: str, model: str, query: np.ndarray, filters: Filters, limit: int
    ) -> list[tuple[int, float]]:
        """Cosine search over ``table``'s filtered rows (vectors are normalised); best first."""
        raise NotImplementedError

    def _by_ids(
        self, sql: str, column: str, ids: Iterable, before: Sequence = (), after: Sequence = ()
    ) -> Iterator[tuple]:
        """Rows of ``sql`` with ``{ids}`` standing for "``column`` is one of ``ids``"
        (deduplicated, as many statements as the dialect needs)."""
        # an integer no row can have (beyond 64 bits) matches nothing; SQLite cannot bind it
        unique = [i for i in dict.fromkeys(ids) if not isinstance(i, int) or _INT64(i)]
        for chunk in self._d.chunks(unique):
            cond, params = self._d.in_ids(column, chunk)
            yield from self._db.execute(sql.replace("{ids}", cond), (*before, *params, *after))

    def _in_conversations(self, filters: Filters, column: str) -> tuple[str, list] | None:
        """``column`` is one of the filters' conversations (None: any conversation)."""
        convs = filters.conversations()
        return None if convs is None else self._d.in_ids(column, convs)

    def _counts(self, queries: dict[str, str]) -> dict[str, int | dict[str, int]]:
        """name -> the integer its query counts, or key -> count for a ``GROUP BY`` query."""
        out: dict[str, int | dict[str, int]] = {}
        for name, sql in queries.items():
            rows = self._db.execute(sql).fetchall()
            grouped = "GROUP BY" in sql
            out[name] = {k: int(n) for k, n in rows} if grouped else int(rows[0][0])
        return out

    def _identities(self) -> dict[str, list[tuple[str, str]]]:
        """person id -> its (conversation, name) identities, by conversation then name."""
        c = self._d.order_text
        out: dict[str, list[tuple[str, str]]] = {}
        for pid, conv, name in self._db.execute(
            "SELECT person_id, conversation, name FROM person_identities "
            f"ORDER BY conversation{c}, name_key{c}"
        ):
            out.setdefault(pid, []).append((conv, name))
        return out

    def _put_vectors(self, db: Connection, model: str, vectors: dict[str, np.ndarray]) -> int:
        """Cache vectors under (model, hash), keeping those already there; rows added."""
        if not vectors:
            return 0
        cur = db.executemany(
            "INSERT INTO vectors(model, hash, dim, vec) VALUES "
            f"(?, ?, ?, {self._d.vector_param}) ON CONFLICT (model, hash) DO NOTHING",
            [(model, h, int(v.shape[0]), self._d.encode_vector(v)) for h, v in vectors.items()],
        )
        return max(cur.rowcount, 0)

    def _vector_id(self, db: Connection, model: str, embed_hash: str) -> int | None:
        row = db.execute(
            "SELECT id FROM vectors WHERE model = ? AND hash = ?", (model, embed_hash)
        ).fetchone()
        return row[0] if row else None

    def _vectors_of(self, table: str, model: str, ids: Iterable[int]) -> dict[int, np.ndarray]:
        """Row id -> its stored ``model`` vector, for a table that embeds (rows without one
        left out); claims and episodes both read theirs here."""
        rows = self._by_ids(
            f"SELECT t.id, {self._d.vector_read} FROM {table} t JOIN vectors v "
            "ON v.id = t.vec_id AND v.model = ? WHERE {ids}",
            "t.id",
            (int(i) for i in ids),
            before=(model,),
        )
        return {int(i): self._d.decode_vector(raw) for i, raw in rows}

    def _bump_vector_epoch(self, db: Connection) -> None:
        """Cached vector indexes of other processes reload (rows went away).

        Every delete path comes here, so this also prunes ``vector_fills``, which
        SQLite's delete trigger fills with each deleted message (a reader further
        behind than the rows kept rebuilds its side file; store/vecfile.py)."""
        db.execute(
            "INSERT INTO meta(key, value) VALUES ('vector_epoch', '1') ON CONFLICT(key) "
            "DO UPDATE SET value = CAST(CAST(meta.value AS INTEGER) + 1 AS TEXT)"
        )
        db.execute(
            "DELETE FROM vector_fills WHERE seq <= (SELECT max(seq) FROM vector_fills) - ?",
            (FILLS_KEPT,),
        )
