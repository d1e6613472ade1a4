"""The domain-level Store every caller types against: one body, written once.

Callers speak in messages, filters and rowids; SQL stays inside the store.
``Store`` is the whole body (store/log.py, derived.py, reconcile.py,
people.py, consolidate.py, queue.py, edits.py, audit.py) over a connection and a dialect; a
backend (store/sqlite.py, store/postgres.py) subclasses it and supplies:

- ``_db`` (a ``common.Connection``), ``_d`` (its ``Dialect``) and ``_write()``
  (one transaction yielding the connection);
- ``_keyword(table, text, filters, limit)`` and ``entity_search``: keyword
  ranking (FTS5 / BM25 over ``tsvector``);
- ``_nearest(table, model, query, filters, limit)``: vector search (an exact
  in-process matrix / pgvector);
- ``migrate()``, ``close()`` and ``_size_bytes()``.

See docs/store.md for why the body is one and what the dialect holds.
"""

from __future__ import annotations

from contextlib import AbstractContextManager

from .audit import Audit
from .common import Connection
from .consolidate import Consolidation
from .derived import DerivedMemory
from .edits import ClaimEdits
from .log import MessageLog
from .migrations import LEDGER_DDL, Rekey, migrations_for
from .people import People
from .queue import JobQueue
from .reconcile import Reconciliation
from .records import (
    AddResult,
    ExtractionMark,
    IndexedClaim,
    IndexedEpisode,
    IndexedMessage,
    ReconcileBatch,
)

__all__ = [
    "AddResult",
    "ExtractionMark",
    "IndexedClaim",
    "IndexedEpisode",
    "IndexedMessage",
    "ReconcileBatch",
    "Store",
]


class Store(
    MessageLog, DerivedMemory, Reconciliation, People, Consolidation, JobQueue, ClaimEdits, Audit
):
    """Durable message log with keyword and vector indexes, and the memory derived from it."""

    def migrate(self) -> list[str]:
        """Apply pending migrations, each with its ledger row in one transaction.

        The ledger is read again inside each migration's transaction (after the
        backend's migration lock), so processes opening one new store at once
        apply each migration once; a store already up to date takes no lock.
        """
        self._db.execute(LEDGER_DDL)
        done = {r[0] for r in self._db.execute("SELECT name FROM _migrations")}
        applied: list[str] = []
        for name, statements in migrations_for(self._d):
            if name in done:
                continue
            rebuilds = any(isinstance(s, Rekey) for s in statements)
            with self._migration(rebuilds) as db:
                self._lock_migrations(db)
                if db.execute("SELECT 1 FROM _migrations WHERE name = ?", (name,)).fetchone():
                    continue
                for stmt in statements:
                    if isinstance(stmt, Rekey):
                        self._rekey(db, stmt)
                    else:
                        db.execute(stmt)
                db.execute(
                    "INSERT INTO _migrations(name, applied_at) VALUES (?, ?)",
                    (name, self._now_iso()),
                )
            applied.append(name)
        return applied

    def _migration(self, rebuilds: bool) -> AbstractContextManager[Connection]:
        """One migration's transaction; ``rebuilds``: it rebuilds tables (SQLite turns
        foreign keys off around it, see Rekey)."""
        return self._write()

    def _rekey(self, db: Connection, rekey: Rekey) -> None:
        """Rebuild one table with an AUTOINCREMENT key (SQLite alone renders a Rekey)."""
        raise NotImplementedError

    def _lock_migrations(self, db: Connection) -> None:
        """Serialise migrating processes (SQLite's write transaction already does)."""

    def warm(self) -> None:
        """Open now what the first requests would open (a server start): a PostgreSQL
        store's connections; nothing for SQLite, whose connection is open."""

    def close(self) -> None:
        raise NotImplementedError
