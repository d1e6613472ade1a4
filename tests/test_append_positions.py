"""Issue 12: concurrent appends to one conversation get unique positions (seq)."""

from __future__ import annotations

import multiprocessing
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

from archivist.config import Settings
from archivist.model import Conversation, Message, Session
from archivist.service import MemoryService
from archivist.testing import FakeEmbedder

PROCESSES, APPENDS = 4, 50
T0 = datetime(2024, 3, 1, 9, tzinfo=UTC)


def _turn(worker: int, i: int) -> Conversation:
    """One new turn of conversation "c" from ``worker``, numbered from 0 as a loader would."""
    at = T0 + timedelta(minutes=i, seconds=worker)
    m = Message(f"w{worker}-{i}", "c", 1, f"P{worker}", f"turn {i} of worker {worker}", at)
    return Conversation("c", (f"P{worker}",), (m,), (Session("c", 1, T0),))


def _memory(target: tuple[str, str]) -> MemoryService:
    """A memory on ("sqlite", path) or ("postgres", "dsn schema")."""
    settings = Settings(consolidate_mode="manual")
    backend, where = target
    if backend == "sqlite":
        return MemoryService(Path(where), settings=settings, embedder=FakeEmbedder())
    from archivist.store.postgres import PostgresStore

    dsn, schema = where.rsplit(" ", 1)
    store = PostgresStore(dsn, schema=schema)
    return MemoryService(settings=settings, store=store, embedder=FakeEmbedder())


def _append(target: tuple[str, str], worker: int) -> None:
    """Append APPENDS single-message batches, each through its own add()."""
    with _memory(target) as mem:
        for i in range(APPENDS):
            mem.add(_turn(worker, i), extract=False)


def _run(target: tuple[str, str]) -> list[Message]:
    with _memory(target):  # create the schema once, before the writers race
        pass
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_append, args=(target, w)) for w in range(PROCESSES)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(240)
    assert [p.exitcode for p in procs] == [0] * PROCESSES
    with _memory(target) as mem:
        return [m for _, m in mem.store.conversation_messages("c")]


def _check(stored: list[Message]) -> None:
    seqs = [m.seq for m in stored]
    assert len(stored) == PROCESSES * APPENDS
    assert sorted(seqs) == list(range(PROCESSES * APPENDS))  # unique and gapless
    for w in range(PROCESSES):  # each writer's turns keep their order and their times' order
        own = [m for m in stored if m.id.startswith(f"w{w}-")]
        assert [m.id for m in own] == [f"w{w}-{i}" for i in range(APPENDS)]
        assert [m.timestamp for m in own] == sorted(m.timestamp for m in own)


def test_concurrent_appends_on_sqlite_get_unique_positions(tmp_path: Path) -> None:
    _check(_run(("sqlite", str(tmp_path / "m.db"))))


def test_concurrent_appends_on_postgres_get_unique_positions(pg_dsn: str) -> None:
    import psycopg

    schema = f"seq_{uuid.uuid4().hex[:12]}"
    try:
        _check(_run(("postgres", f"{pg_dsn} {schema}")))
    finally:
        with psycopg.connect(pg_dsn, autocommit=True) as con:
            con.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
