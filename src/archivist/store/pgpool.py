"""A PostgreSQL store's connections: a small pool its threads share (``PgPool``), with
the body's connection API (``?`` SQL), and what a write that failed may do again."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager

import psycopg
from psycopg import sql as pgsql

from ..errors import ConfigError, StoreError
from .common import BIND_ERRORS, bind_error, one_line
from .dialect import Rows, to_format_style

# Connections a store opens at most, as its threads need them (a server's request
# threads and its background worker run their statements side by side)
POOL_SIZE = 4


def _sql(sql: str | pgsql.Composable, params: Sequence) -> str | pgsql.Composable:
    """psycopg's placeholder style; a statement without parameters is sent as written."""
    return to_format_style(sql) if params and isinstance(sql, str) else sql


class LostConnection(StoreError):
    """The connection to the server broke before a write committed: nothing of it was
    stored, and the next call opens a new connection."""


# What the server rolls a whole transaction back for, so that running it again is safe:
# a deadlock broken, a serialization conflict (SQLSTATE 40P01, 40001)
TRANSIENT = (psycopg.errors.DeadlockDetected, psycopg.errors.SerializationFailure)


def _begin(conn: psycopg.Connection) -> None:
    """Open a transaction on an autocommit connection (``commit()`` and ``rollback()``
    end it, as they see it open)."""
    conn.execute("BEGIN")


class PgPool:
    """Up to ``size`` psycopg connections shared by a store's threads, with the body's
    connection API (``?`` SQL).

    A thread takes a connection for one statement, or for the whole of a
    ``transaction()`` (nested blocks join it), and gives it back after: threads run
    their statements side by side, up to ``size`` at once, and wait for a connection
    beyond that. Connections are opened as threads need them, the first at once.
    Connections run in autocommit: outside a transaction each statement is its own
    (one round trip, where BEGIN, the statement and COMMIT took three), so no snapshot
    or lock is held between calls; ``transaction()`` and a batch of rows send their own
    BEGIN. A connection the server or the network broke is opened again when a thread
    next takes it.
    """

    def __init__(self, connect: Callable[[], psycopg.Connection], size: int) -> None:
        if size < 1:
            raise ConfigError(f"a PostgreSQL store needs at least one connection; got {size}")
        self._connect = connect
        self.size = size
        self._idle = [connect()]  # the last given back is taken first
        self._opened = 1  # idle or taken
        self._free = threading.Condition()
        self._mine = threading.local()  # the thread's transaction: .conn, .depth
        self._closed = False

    def in_transaction(self) -> bool:
        """Whether this thread has a transaction open."""
        return getattr(self._mine, "depth", 0) > 0

    def _take(self) -> psycopg.Connection:
        with self._free:
            while not self._idle and self._opened >= self.size and not self._closed:
                self._free.wait()
            if self._closed:
                raise StoreError("the PostgreSQL store is closed")
            conn = self._idle.pop() if self._idle else None
            if conn is None:
                self._opened += 1
        if conn is not None and not conn.closed:
            return conn
        return self._open_counted()

    def _open_counted(self) -> psycopg.Connection:
        """A new connection, already counted in ``_opened``; uncounted if it fails."""
        try:
            return self._connect()
        except BaseException:
            with self._free:
                self._opened -= 1
                self._free.notify()
            raise

    def _give(self, conn: psycopg.Connection) -> None:
        with self._free:
            if self._closed:
                self._opened -= 1
                conn.close()
            else:
                self._idle.append(conn)
            self._free.notify()

    @contextmanager
    def transaction(self) -> Iterator[PgPool]:
        """One transaction: commit on success, roll back on error; nested blocks join it."""
        mine = self._mine
        if getattr(mine, "depth", 0):
            mine.depth += 1
            try:
                yield self
            finally:
                mine.depth -= 1
            return
        conn = self._take()
        try:
            conn.rollback()  # nothing is open between calls; be sure
            mine.conn, mine.depth = conn, 1
            try:
                _begin(conn)
                yield self
            except BaseException as e:
                self._rollback(conn, e)
                raise
            else:
                self._commit(conn)
            finally:
                mine.conn, mine.depth = None, 0
        finally:
            self._give(conn)

    def _commit(self, conn: psycopg.Connection) -> None:
        try:
            conn.commit()
        except TRANSIENT:
            raise  # rolled back whole by the server: may run again
        except psycopg.OperationalError as e:
            if not conn.closed:
                raise
            raise StoreError(
                "lost the connection to PostgreSQL while committing: the last write may "
                f"or may not be stored ({one_line(e)})"
            ) from e

    def _rollback(self, conn: psycopg.Connection, cause: BaseException) -> None:
        """Roll back after ``cause``; a connection already lost is a LostConnection."""
        try:
            conn.rollback()
        except psycopg.Error as e:
            raise LostConnection(f"lost the connection to PostgreSQL: {one_line(e)}") from cause
        if conn.closed:
            raise LostConnection(f"lost the connection to PostgreSQL: {one_line(cause)}") from cause

    def _run(self, call, batch: bool = False):
        """``call(cursor)`` in this thread's transaction, else on a connection of its own:
        a single statement in autocommit, a ``batch`` (rows of one statement: all or
        none) in a transaction of its own."""
        if self.in_transaction():
            try:
                return call(self._mine.conn.cursor())
            except BIND_ERRORS as e:
                raise bind_error(e) from e
        conn = self._take()
        try:
            try:
                if batch:
                    _begin(conn)
                out = call(conn.cursor())
            except BaseException as e:
                self._rollback(conn, e)
                if isinstance(e, BIND_ERRORS):
                    raise bind_error(e) from e
                raise
            self._commit(conn)
            return out
        finally:
            self._give(conn)

    def execute(self, sql, params: Sequence = ()) -> Rows:
        def run(cur: psycopg.Cursor) -> Rows:
            cur.execute(_sql(sql, params), tuple(params) or None)
            return Rows(cur.fetchall() if cur.description else [], cur.rowcount)

        return self._run(run)

    def executemany(self, sql: str, seq: Iterable[Sequence]) -> Rows:
        rows = [tuple(p) for p in seq]

        def run(cur: psycopg.Cursor) -> Rows:
            if rows:
                cur.executemany(_sql(sql, rows[0]), rows)
            return Rows([], max(cur.rowcount, 0) if rows else 0)

        return self._run(run, batch=len(rows) > 1)

    def insert_ids(self, sql: str, seq: Iterable[Sequence]) -> list[int]:
        rows = [tuple(p) for p in seq]

        def run(cur: psycopg.Cursor) -> list[int]:
            if not rows:
                return []
            cur.executemany(_sql(sql, rows[0]), rows, returning=True)
            out = []
            while True:
                out.append(int(cur.fetchone()[0]))  # type: ignore[index]
                if not cur.nextset():
                    return out

        return self._run(run, batch=len(rows) > 1)

    def fill(self, prime: str) -> int:
        """Open the connections not opened yet, up to ``size``, and run ``prime`` on each
        (a server start: the first requests then pay no connection, and no backend reads
        its catalog for the tables they touch); how many it opened."""
        opened = []
        try:
            while True:
                with self._free:
                    if self._closed or self._opened >= self.size:
                        break
                    self._opened += 1
                conn = self._open_counted()
                opened.append(conn)
                conn.execute(prime).fetchall()
        finally:
            for conn in opened:
                self._give(conn)
        return len(opened)

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def raw(self) -> psycopg.Connection:
        """The connection this thread's transaction holds, else the one it would take
        next (tests end its server backend)."""
        if self.in_transaction():
            return self._mine.conn
        with self._free:
            if not self._idle:
                raise StoreError("no idle PostgreSQL connection")
            return self._idle[-1]

    def close(self) -> None:
        """Close the idle connections now and the taken ones as they are given back;
        a thread waiting for one gets a StoreError."""
        with self._free:
            self._closed = True
            idle, self._idle = self._idle, []
            self._opened -= len(idle)
            self._free.notify_all()
        for conn in idle:
            if not conn.closed:
                conn.rollback()
                conn.close()
