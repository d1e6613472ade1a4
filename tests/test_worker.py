"""The background worker process: extraction and consolidation away from requests.

A real server app (lifespan started, so the worker is a real spawned process)
with the registered fake embedder; the tenant stores are real SQLite files the
two processes share.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from archivist.config import Settings
from archivist.jobs import JobRunner
from archivist.server.app import ServerSettings, create_app
from archivist.server.tenants import tenant_settings
from archivist.server.worker import raise_priority
from archivist.service import MemoryService
from archivist.testing import FakeEmbedder
from conftest import make_conversation

KEY = "alpha-key-000001"
HEADERS = {"Authorization": f"Bearer {KEY}"}
MEMORY = Settings(embedder="fake", consolidate_every=4)


def records(conversation: str, n: int) -> list[dict]:
    return [
        {
            "conversation": conversation,
            "id": f"m{i}",
            "speaker": "Ana" if i % 2 == 0 else "Ben",
            "text": f"I adopted a puppy called Rex number {i} last week.",
            "timestamp": f"2026-03-01T10:{i:02d}:00Z",
        }
        for i in range(n)
    ]


def server(tmp_path: Path) -> TestClient:
    settings = ServerSettings(data_dir=tmp_path, keys=((KEY, "alpha"),), memory=MEMORY)
    return TestClient(create_app(settings))


def test_the_worker_process_reads_new_messages_and_consolidates(tmp_path: Path) -> None:
    with server(tmp_path) as client:
        worker = client.app.state.worker
        assert worker is not None and worker.alive()
        r = client.post("/v1/memory/messages", json={"messages": records("c1", 6)}, headers=HEADERS)
        assert r.status_code == 200, r.text
        tenant = client.app.state.registry.tenant("alpha")
        assert tenant.drain(60)
        claims = client.get("/v1/memory/claims", params={"conversation": "c1"}, headers=HEADERS)
        assert claims.status_code == 200 and claims.json(), claims.text
        counts = tenant.memory.job_counts()
        assert counts.get("done", 0) + counts.get("skipped", 0) >= 1 + 7  # extract + a round
        assert not counts.get("failed")
        # nothing ran on the server's own threads
        assert tenant.counters.get("extractions", 0) == 0
    assert not worker.alive()  # stopped with the server


def test_a_resent_history_queues_no_second_job(tmp_path: Path) -> None:
    with server(tmp_path) as client:
        body = {"messages": records("c1", 3)}
        client.post("/v1/memory/messages", json=body, headers=HEADERS)
        tenant = client.app.state.registry.tenant("alpha")
        assert tenant.drain(60)
        before = sum(tenant.memory.job_counts().values())
        client.post("/v1/memory/messages", json=body, headers=HEADERS)
        assert sum(tenant.memory.job_counts().values()) == before


def test_jobs_queued_before_a_restart_run_when_the_server_starts(tmp_path: Path) -> None:
    path = tmp_path / "alpha.db"
    settings = tenant_settings(MEMORY, "alpha", path, "manual")
    with MemoryService(settings=settings) as mem:
        mem.add(make_conversation("c1", [[("Ana", "I moved to Porto in May.")]]), extract=False)
        mem.jobs.enqueue_extract("c1", 1)
    with server(tmp_path) as client:
        tenant = client.app.state.registry.tenant("alpha")
        deadline = time.monotonic() + 60
        while tenant.memory.job_counts().get("done", 0) < 1 and time.monotonic() < deadline:
            time.sleep(0.1)  # no request: the worker found the store on disk
        assert tenant.memory.job_counts().get("done", 0) >= 1
        assert tenant.memory.store.extraction_state("c1")


def test_an_extract_job_for_a_deleted_conversation_is_skipped(tmp_path: Path) -> None:
    settings = Settings(consolidate_mode="manual")
    with MemoryService(tmp_path / "m.db", embedder=FakeEmbedder(), settings=settings) as mem:
        mem.add(make_conversation("c1", [[("Ana", "I moved to Porto in May.")]]), extract=False)
        mem.jobs.enqueue_extract("c1", 1)
        mem.delete(conversation="c1")
        (job,) = JobRunner(mem.core).run_pending()
        assert job.status == "skipped" and "gone" in job.result["skipped"]
        assert mem.claims(conversation="c1") == []


def test_background_must_be_process_or_thread() -> None:
    from archivist.errors import ConfigError

    with pytest.raises(ConfigError, match="background"):
        ServerSettings(background="fork")


def test_tenants_get_their_own_postgres_schema() -> None:
    base = Settings(store="postgres", pg_dsn="postgresql://x/db")
    assert tenant_settings(base, "alpha", Path("a.db"), "manual").pg_schema == "archivist_alpha"
    named = base.with_(pg_schema="mem")
    assert tenant_settings(named, "beta", Path("b.db"), "manual").pg_schema == "mem_beta"


def test_turns_stored_without_vectors_get_them_when_extracted(tmp_path: Path) -> None:
    settings = Settings(consolidate_mode="manual")
    with MemoryService(tmp_path / "m.db", embedder=FakeEmbedder(), settings=settings) as mem:
        conv = make_conversation("c1", [[("Ana", "I moved to Porto in May."), ("Ben", "Nice!")]])
        mem.add(conv, extract=False, embed=False)
        assert len(mem.store.messages_without_vectors("c1")) == 2
        assert mem.search("Porto", conversation="c1", k=3)  # keyword search finds it at once
        mem.extract(["c1"])
        assert mem.store.messages_without_vectors("c1") == {}
        hits = mem.search("moved to Porto", conversation="c1", k=3, preset="dense")
        assert hits and hits[0].message.text == "I moved to Porto in May."


def test_a_worker_that_died_is_replaced_and_its_work_done(tmp_path: Path) -> None:
    with server(tmp_path) as client:
        worker = client.app.state.worker
        worker.process.kill()
        worker.process.join(10)
        r = client.post("/v1/memory/messages", json={"messages": records("c1", 4)}, headers=HEADERS)
        assert r.status_code == 200, r.text
        assert worker.restarts == 1 and worker.alive()
        status = client.get("/v1/memory/status", headers=HEADERS).json()
        assert status["background"] == {"mode": "process", "alive": True, "restarts": 1}
        tenant = client.app.state.registry.tenant("alpha")
        assert tenant.drain(60)
        assert tenant.memory.store.extraction_state("c1")


@pytest.mark.skipif(not hasattr(os, "SCHED_IDLE"), reason="no idle scheduling class here")
def test_the_worker_runs_in_the_idle_class_so_a_waking_request_preempts_it(
    tmp_path: Path,
) -> None:
    with server(tmp_path) as client:
        worker = client.app.state.worker
        deadline = time.monotonic() + 60
        while os.sched_getscheduler(worker.process.pid) != os.SCHED_IDLE:
            assert time.monotonic() < deadline, "the worker never lowered its priority"
            time.sleep(0.05)
        assert os.getpriority(os.PRIO_PROCESS, worker.process.pid) >= 10
        assert os.sched_getscheduler(0) != os.SCHED_IDLE  # the server's own stays


@pytest.mark.skipif(not hasattr(os, "SCHED_IDLE"), reason="no idle scheduling class here")
def test_a_stopping_worker_gets_the_normal_class_back_to_finish_its_job(tmp_path: Path) -> None:
    """On a busy machine an idle-class worker barely runs: stop() raises it first (where
    permitted), else terminates it after its timeout."""
    with server(tmp_path) as client:
        pid = client.app.state.worker.process.pid
        deadline = time.monotonic() + 60
        while os.sched_getscheduler(pid) != os.SCHED_IDLE:
            assert time.monotonic() < deadline, "the worker never lowered its priority"
            time.sleep(0.05)
        if not raise_priority(pid):
            pytest.skip("this user may not take a thread out of the idle class")
        threads = os.listdir(f"/proc/{pid}/task")
        assert {os.sched_getscheduler(int(t)) for t in threads} == {os.SCHED_OTHER}
        assert os.getpriority(os.PRIO_PROCESS, pid) >= 10  # still below the server
    assert raise_priority(pid) is False  # gone: nothing to raise


def test_a_server_start_opens_the_tenants_its_keys_reach(tmp_path: Path) -> None:
    with server(tmp_path) as client:
        assert [t.id for t in client.app.state.registry.opened()] == ["alpha"]
        assert (tmp_path / "alpha.db").exists()  # before any request


def test_a_tenant_that_will_not_open_at_start_leaves_the_server_running(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "alpha.db").write_bytes(b"not a database, " * 256)
    with server(tmp_path) as client:
        assert client.app.state.registry.opened() == []
        assert "tenant alpha: could not open its memory at startup" in caplog.text
        r = client.get("/v1/memory/status", headers=HEADERS)
        assert r.status_code == 503 and "not a usable archivist store" in r.text, r.text
