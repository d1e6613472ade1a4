"""One store shared by threads: readers and a writer at once, no cursor corruption."""

from __future__ import annotations

import threading
from pathlib import Path

from archivist.config import Settings
from archivist.service import MemoryService
from archivist.testing import FakeEmbedder
from archivist.write.archivist import HeuristicArchivist
from conftest import make_conversation


def test_readers_and_a_writer_share_one_store(tmp_path: Path) -> None:
    settings = Settings(consolidate_mode="manual")
    mem = MemoryService(
        tmp_path / "m.db",
        settings=settings,
        embedder=FakeEmbedder(),
        archivist=HeuristicArchivist(),
    )
    sessions = [
        [("Ana", f"I planted tomato {i}, Lisbon {j}.") for j in range(20)] for i in range(15)
    ]
    mem.add(make_conversation("c0", sessions))
    errors: list[BaseException] = []
    stop = threading.Event()

    def read() -> None:
        try:
            while not stop.is_set():
                mem.search("tomato", k=5)
                mem.claims(limit=1000)
                mem.store.conversation_messages("c0")
                mem.conversations()
                mem.store.list_entities(limit=10)
        except BaseException as e:  # noqa: BLE001 - collected and asserted below
            errors.append(e)

    readers = [threading.Thread(target=read) for _ in range(6)]
    for t in readers:
        t.start()
    try:
        for n in range(1, 8):
            turns = [[("Lee", f"Session {n}: I fixed bike number {i}.") for i in range(6)]]
            mem.add(make_conversation(f"c{n}", turns, people=("Lee", "Mia")))
            mem.consolidate(f"c{n}")
    finally:
        stop.set()
        for t in readers:
            t.join()
        mem.close()
    assert errors == []


def test_a_read_does_not_wait_for_another_threads_open_write(tmp_path: Path) -> None:
    """Reads use the calling thread's own connection: a search during another thread's
    write transaction (say, one waiting for a worker process to commit) is not queued
    behind it, and it sees the last committed state."""
    mem = MemoryService(
        tmp_path / "m.db", settings=Settings(consolidate_mode="manual"), embedder=FakeEmbedder()
    )
    mem.add(make_conversation("c0", [[("Ana", "I planted tomatoes in Lisbon.")]]))
    inside, read_done = threading.Event(), threading.Event()
    waited: list[bool] = []

    def write() -> None:
        with mem.store._write() as db:  # a transaction left open until the read is done
            db.execute("INSERT INTO meta(key, value) VALUES ('uncommitted', 'x')")
            inside.set()
            waited.append(read_done.wait(10))

    writer = threading.Thread(target=write)
    writer.start()
    try:
        assert inside.wait(10)
        hits = mem.search("tomatoes", k=3)
        assert mem.store.meta("uncommitted") is None  # not committed yet: not seen
        read_done.set()
    finally:
        read_done.set()
        writer.join(20)
    assert hits and waited == [True]  # the read finished while the write was open
    assert mem.store.meta("uncommitted") == "x"
    mem.close()
