"""Issue 12: appends to one conversation, concurrent or late, get unique positions in time order."""

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
    times = [m.timestamp for m in stored]
    assert times == sorted(times)  # whichever writer committed first
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


def _one(mem: MemoryService, mid: str, minute: int, seq: int = 0) -> None:
    m = Message(mid, "c", 1, "Ann", f"message {mid}", T0 + timedelta(minutes=minute), seq=seq)
    mem.add(Conversation("c", ("Ann",), (m,), (Session("c", 1, T0),)), extract=False)


def _order(mem: MemoryService) -> list[tuple[str, int]]:
    return [(m.id, m.seq) for _, m in mem.store.conversation_messages("c")]


def test_a_late_message_takes_its_place_in_time(tmp_path: Path) -> None:
    with _memory(("sqlite", str(tmp_path / "m.db"))) as mem:
        for mid, minute in [("a", 0), ("c", 2), ("d", 3)]:
            _one(mem, mid, minute)
        _one(mem, "b", 1)  # arrives last, said second
        assert _order(mem) == [("a", 0), ("b", 1), ("c", 2), ("d", 3)]
        _one(mem, "z", -5)  # before everything
        assert [mid for mid, _ in _order(mem)] == ["z", "a", "b", "c", "d"]
        assert [seq for _, seq in _order(mem)] == [0, 1, 2, 3, 4]
        _one(mem, "e", 9)  # after everything: an append moves nothing
        assert _order(mem)[-1] == ("e", 5)
        rowid = next(r for r, m in mem.store.conversation_messages("c") if m.id == "b")
        near = mem.store.neighbours(rowid, before=1, after=1)  # they follow the new order
        assert [m.id for _, m in near] == ["a", "b", "c"]


def test_a_batch_keeps_its_own_order_among_stored_messages(tmp_path: Path) -> None:
    """Equal times keep the stored message first; a batch's order wins over its own clock."""
    with _memory(("sqlite", str(tmp_path / "m.db"))) as mem:
        _one(mem, "a", 0)
        _one(mem, "c", 5)
        batch = (
            Message("b1", "c", 1, "Ann", "first of batch", T0 + timedelta(minutes=5), seq=0),
            Message("b2", "c", 1, "Ann", "second of batch", T0 + timedelta(minutes=1), seq=1),
        )
        mem.add(Conversation("c", ("Ann",), batch, (Session("c", 1, T0),)), extract=False)
        assert [mid for mid, _ in _order(mem)] == ["a", "c", "b1", "b2"]
