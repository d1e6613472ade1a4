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
