"""Issue 34: processes appending to one conversation at once all finish, and nothing doubles.

Each writer ingests its own session of one conversation and reconciles what it
extracted. Before, a writer whose reconciliation had been decided from claims
another writer replaced died with a foreign-key error, and two writers that read
the same entities both created them anew (duplicates until ``rebuild``).
"""

from __future__ import annotations

import multiprocessing
import subprocess
import sys
import uuid
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from archivist.config import Settings
from archivist.errors import StaleExtraction, StaleReconciliation
from archivist.model import Conversation, Entity, Message, Session
from archivist.service import MemoryService
from archivist.store.records import ReconcileBasis, ReconcileBatch
from archivist.testing import FakeEmbedder
from archivist.write.archivist import HeuristicArchivist
from archivist.write.reconcile import ReconcileConfig
from archivist.write.reconcile_job import reconcile_conversation
from conftest import table_counts, write_jsonl

T0 = datetime(2024, 3, 1, 9, tzinfo=UTC)
PER_WRITER = 3  # messages in each writer's session
CLI = "import sys; from archivist.cli.main import main; main(sys.argv[1:])"


def _records(writer: int) -> list[dict]:
    """Writer ``writer``'s session of conversation "shared": people, places, a move."""
    speakers = ("Ana", "Ben")
    return [
        {
            "conversation": "shared",
            "id": f"w{writer}-{j}",
            "session": writer + 1,
            "speaker": speakers[j % 2],
            "text": f"Ana moved to Lisbon in week {writer}. Ben works at Acme, desk {j}. "
            "I met Carla in Porto.",
            "timestamp": (T0 + timedelta(days=writer, minutes=j)).isoformat(),
        }
        for j in range(PER_WRITER)
    ]


def _ingest_at_once(db: Path, files: list[Path]) -> list[subprocess.CompletedProcess]:
    """Start one ``archivist ingest`` per file, all before any is waited for."""
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", CLI, "--db", str(db), "--embedder", "fake", "ingest", str(f)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for f in files
    ]
    out = []
    for p in procs:
        stdout, stderr = p.communicate(timeout=120)
        out.append(subprocess.CompletedProcess(p.args, p.returncode, stdout, stderr))
    return out


def _check_store(mem: MemoryService, writers: int) -> None:
    """Every message once, every session extracted once, every claim reconciled, and one
    entity per (owner, name): what one writer adding all the files in turn would leave."""
    ids = [m.id for _, m in mem.store.conversation_messages("shared")]
    assert sorted(ids) == sorted(f"w{w}-{j}" for w in range(writers) for j in range(PER_WRITER))
    assert mem.store.extraction_state("shared") == {w + 1: PER_WRITER for w in range(writers)}
    assert mem.store.reconcile_stats()["claims_unreconciled"] == 0
    entities = mem.store.list_entities(conversation="shared")
    doubled = Counter((e.owner, e.name) for e in entities)
    assert entities and max(doubled.values()) == 1, doubled.most_common(3)
    # mentions add up exactly: no writer's reconciliation was written twice or lost
    carla = {e.owner: e.mentions for e in entities if e.name == "Carla"}
    ana_says = (PER_WRITER + 1) // 2
    assert carla == {"Ana": ana_says * writers, "Ben": (PER_WRITER - ana_says) * writers}


def test_twelve_cli_ingests_into_one_conversation_all_finish(tmp_path: Path) -> None:
    """12-16 s on two busy cores: each process imports the CLI and opens the store."""
    files = [write_jsonl(tmp_path / f"w{w}.jsonl", _records(w)) for w in range(12)]
    db = tmp_path / "m.db"
    done = _ingest_at_once(db, files)
    failed = [(r.returncode, r.stderr.strip().splitlines()[-1:]) for r in done if r.returncode]
    assert failed == []
    assert all("Traceback" not in r.stderr for r in done)
    with MemoryService(db, embedder=FakeEmbedder()) as mem:
        _check_store(mem, 12)


# -- the checks each writer makes, one step at a time -----------------------------------


def test_a_reconciliation_decided_before_another_was_written_is_refused(tmp_path: Path) -> None:
    """Read, another writer reconciles, write: the write is refused whole, so nothing is
    filed twice; deciding again then finds nothing left to judge."""
    settings = Settings(consolidate_mode="manual", reconcile_on_write=False)
    with MemoryService(tmp_path / "m.db", settings=settings, embedder=FakeEmbedder()) as mem:
        mem.add(_conversation(0))
        store = mem.store
        done, todo = store.claims_to_reconcile("shared")
        existing = store.list_entities(conversation="shared")
        assert todo and not done and not existing
        basis = ReconcileBasis(tuple(c.id for c in todo), len(done), 0, 0)
        found = reconcile_conversation(mem.core, "shared", ReconcileConfig())  # the other one
        assert found["claims"] == len(todo)
        before = table_counts(tmp_path / "m.db")
        late = ReconcileBatch(
            conversation="shared",
            updates={},
            events=[],
            conflicts=[],
            entities=[(Entity("shared", "Ana", "Carla"), (todo[0].id,), "Carla", "h")],
            reconciled=[c.id for c in todo],
            model=mem.core.embedder.name,
            basis=basis,
        )
        with pytest.raises(StaleReconciliation):
            store.save_reconciliation(late)
        assert table_counts(tmp_path / "m.db") == before
        assert reconcile_conversation(mem.core, "shared", ReconcileConfig()) == {}


def test_a_session_another_writer_extracted_first_is_not_extracted_again(tmp_path: Path) -> None:
    """Two writers planned a never-read session; the second one's save is refused, so the
    first one's claims keep their ids and the conversation's reconciliation stands."""
    settings = Settings(consolidate_mode="manual")
    with MemoryService(tmp_path / "m.db", settings=settings, embedder=FakeEmbedder()) as mem:
        mem.add(_conversation(0))
        claims = [c.id for c in mem.claims(conversation="shared")]
        with pytest.raises(StaleExtraction):
            mem.store.save_extraction(
                "shared", 1, [], [], "fake", {}, n_messages=PER_WRITER, method="x", if_mark="none"
            )
        assert [c.id for c in mem.claims(conversation="shared")] == claims
        assert mem.store.reconcile_stats()["claims_unreconciled"] == 0


# -- PostgreSQL: the same race through MemoryService in spawned processes ----------------


def _conversation(writer: int) -> Conversation:
    recs = _records(writer)
    msgs = tuple(
        Message(
            r["id"],
            "shared",
            r["session"],
            r["speaker"],
            r["text"],
            datetime.fromisoformat(r["timestamp"]),
        )
        for r in recs
    )
    return Conversation("shared", ("Ana", "Ben"), msgs, (Session("shared", writer + 1, T0),))


def _pg_memory(dsn: str, schema: str) -> MemoryService:
    from archivist.store.postgres import PostgresStore

    return MemoryService(
        settings=Settings(consolidate_mode="manual"),
        store=PostgresStore(dsn, schema=schema),
        embedder=FakeEmbedder(),
        archivist=HeuristicArchivist(),
    )


def _pg_add(dsn: str, schema: str, writer: int) -> None:
    with _pg_memory(dsn, schema) as mem:
        mem.add(_conversation(writer))


def test_concurrent_adds_to_one_conversation_on_postgres(pg_dsn: str) -> None:
    import psycopg

    schema = f"cc_{uuid.uuid4().hex[:12]}"
    writers = 4
    try:
        with _pg_memory(pg_dsn, schema):  # the schema once, before the writers race
            pass
        ctx = multiprocessing.get_context("spawn")
        procs = [ctx.Process(target=_pg_add, args=(pg_dsn, schema, w)) for w in range(writers)]
        for p in procs:
            p.start()
        for p in procs:
            p.join(120)
        assert [p.exitcode for p in procs] == [0] * writers
        with _pg_memory(pg_dsn, schema) as mem:
            _check_store(mem, writers)
    finally:
        with psycopg.connect(pg_dsn, autocommit=True) as con:
            con.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
