"""The durable job queue: idempotent enqueue, retries with backoff, leases, background mode."""

from __future__ import annotations

import json
import logging
import logging.handlers
import multiprocessing
import os
import signal
import time
from pathlib import Path

from archivist.config import Settings
from archivist.core import Core
from archivist.jobs import ROUND, JobRunner, checkpoint
from archivist.service import MemoryService
from archivist.store.queue import this_process
from archivist.testing import FakeEmbedder
from archivist.write.archivist import HeuristicArchivist
from conftest import make_conversation


def memory(path: Path, **settings: object) -> MemoryService:
    s = Settings(**{"consolidate_mode": "manual", **settings})
    return MemoryService(path, settings=s, embedder=FakeEmbedder(), archivist=HeuristicArchivist())


def test_enqueue_is_idempotent_per_kind_and_key(tmp_path: Path) -> None:
    with memory(tmp_path / "m.db") as mem:
        assert mem.store.enqueue_job("reconcile", "c@1", {"conversation": "c"}) is not None
        assert mem.store.enqueue_job("reconcile", "c@1", {"conversation": "c"}) is None
        assert mem.job_counts() == {"queued": 1}


def test_a_failing_job_is_retried_later_then_fails_with_its_error(tmp_path: Path) -> None:
    calls: list[dict] = []

    def boom(core: Core, payload: dict) -> dict:
        calls.append(payload)
        raise RuntimeError("disk on fire")

    with memory(tmp_path / "m.db") as mem:
        runner = JobRunner(mem.core, handlers={"reconcile": boom})
        mem.store.enqueue_job("reconcile", "c@1", {"conversation": "c"})
        (job,) = runner.run_pending()
        assert job.status == "queued" and "disk on fire" in job.error
        assert runner.run_pending() == []  # backing off: not retried at once
        mem.store._db.execute("UPDATE jobs SET lease_until = 0")  # the backoff has passed
        runner.run_pending()
        mem.store._db.execute("UPDATE jobs SET lease_until = 0")
        (last,) = runner.run_pending()
        assert last.status == "failed" and len(calls) == 3
        (stored,) = mem.store.list_jobs("failed")
        assert stored.error == "RuntimeError: disk on fire" and stored.attempts == 3


def test_a_job_whose_worker_died_is_taken_again_after_its_lease(tmp_path: Path) -> None:
    with memory(tmp_path / "m.db") as mem:
        mem.store.enqueue_job("reconcile", "c@1", {})
        taken = mem.store.take_job(time.time(), lease_s=60, max_attempts=3)
        assert taken is not None and taken.status == "running"  # ... and the process dies
        assert mem.store.take_job(time.time(), 60, 3) is None  # leased to the dead worker
        again = mem.store.take_job(time.time() + 61, 60, 3)
        assert again is not None and again.id == taken.id and again.attempts == 2


def _take_and_die(path: str) -> None:
    """A worker that takes a job and is killed before finishing it."""
    with memory(Path(path)) as mem:
        assert mem.store.take_job(time.time(), lease_s=600, max_attempts=3) is not None
        os.kill(os.getpid(), signal.SIGKILL)


def test_a_job_whose_worker_was_killed_on_this_host_is_taken_again_at_once(
    tmp_path: Path,
) -> None:
    db = tmp_path / "m.db"
    with memory(db) as mem:
        mem.store.enqueue_job("reconcile", "c@1", {})
    worker = multiprocessing.get_context("spawn").Process(target=_take_and_die, args=(str(db),))
    worker.start()
    worker.join(60)
    assert worker.exitcode == -signal.SIGKILL
    with memory(db) as mem:
        (held,) = mem.store.list_jobs("running")
        again = mem.store.take_job(time.time(), 600, 3)  # not 600 s later
        assert again is not None and again.id == held.id and again.attempts == 2


def test_only_a_holder_known_to_be_gone_loses_its_lease(store_factory) -> None:
    store = store_factory()
    store.enqueue_job("reconcile", "c@1", {})
    taken = store.take_job(time.time(), 600, 3)
    assert taken is not None
    assert store.take_job(time.time(), 600, 3) is None  # this process holds it, alive
    for owner, free in [
        ("elsewhere/pid:[1] 4242 1", False),  # another host: its lease runs out as before
        (None, False),  # a lease from before holders were named
        (this_process().replace(f" {os.getpid()} ", " 4194305 "), True),  # no such pid here
        (this_process().rsplit(" ", 1)[0] + " 1", True),  # this pid, but an older process
    ]:
        store._db.execute("UPDATE jobs SET lease_owner = ?", (owner,))
        again = store.take_job(time.time(), 600, 3)
        assert (again is not None) is free, owner
        store._db.execute("UPDATE jobs SET status = 'running', attempts = 1")


def test_the_queue_survives_reopening_the_store(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    with memory(path) as mem:
        mem.add(make_conversation("c", [[("Ana", f"I read book number {i}.")] for i in range(12)]))
        assert mem.job_counts().get("queued", 0) == len(ROUND)  # a round, not run
    with memory(path) as mem:
        jobs = mem.jobs.run_pending()
        assert {j.kind for j in jobs} == set(ROUND)
        assert all(j.status in ("done", "skipped") for j in jobs), [j.error for j in jobs]
        assert mem.job_counts().get("queued", 0) == 0


def _spawn(target, *args: str) -> int | None:
    """Run ``target`` in a fresh process: a crash there (a segfault) fails the test, not pytest."""
    child = multiprocessing.get_context("spawn").Process(target=target, args=args)
    child.start()
    child.join(60)
    if child.is_alive():
        child.kill()
    return child.exitcode


def _close_with_jobs_queued(path: str, out: str) -> None:
    """Queue a long backlog of rounds, let the background thread start on it, close."""
    convs = [f"c{i}" for i in range(4)]
    with memory(Path(path)) as mem:  # manual: rounds are queued, not run
        for cid in convs:
            said = [
                [("Ana", f"I moved to {cid}-{j}."), ("Lee", f"Eva is at Acme {j}.")]
                for j in range(3)
            ]
            mem.add(make_conversation(cid, said))
        for tag in range(20):
            mem.jobs.enqueue_round(convs, f"t{tag}")
    mem = memory(Path(path), consolidate_mode="background")
    mem.jobs.start()
    deadline = time.monotonic() + 30
    while not {"done", "skipped"} & set(mem.job_counts()):  # the thread is into the backlog
        assert time.monotonic() < deadline, mem.job_counts()
        time.sleep(0.005)
    began = time.monotonic()
    mem.close()
    Path(out).write_text(json.dumps({"close_s": time.monotonic() - began}))


def test_closing_during_background_jobs_stops_at_once_and_keeps_the_rest_queued(
    tmp_path: Path,
) -> None:
    db, out = tmp_path / "m.db", tmp_path / "out.json"
    assert _spawn(_close_with_jobs_queued, str(db), str(out)) == 0  # a segfault is -11
    assert json.loads(out.read_text())["close_s"] < 5  # the current job, not the backlog
    with memory(db) as mem:
        left = mem.job_counts()
        assert left.get("queued", 0) > 100 and not left.get("running"), left
        jobs = mem.jobs.run_pending()  # picked up at the next opening
        assert len(jobs) == left["queued"]
        assert all(j.status in ("done", "skipped") for j in jobs), [j.error for j in jobs]
        assert set(mem.job_counts()) <= {"done", "skipped"}


def _reads_for(seconds: float, checkpoints: bool = False):
    """A job handler that keeps reading the store for ``seconds`` (a slow LLM round),
    stopping at a ``checkpoint()`` after each read if ``checkpoints``."""

    def run(core: Core, payload: dict) -> dict:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            core.store.job_counts()
            core.store.conversations()
            if checkpoints:
                checkpoint()
        return {"read": "for a while"}

    return run


def _wait_until_a_job_runs(mem) -> None:
    deadline = time.monotonic() + 30
    while not mem.store.list_jobs("running"):
        assert time.monotonic() < deadline
        time.sleep(0.005)


def _close_during_a_long_job(path: str, out: str) -> None:
    """Close with a timeout shorter than the running job: the store stays open under it."""
    warned = logging.handlers.BufferingHandler(100)
    logging.getLogger("archivist.jobs").addHandler(warned)
    mem = memory(Path(path))
    for key in ("c@1", "c@2"):
        mem.store.enqueue_job("reconcile", key, {"conversation": "c"})
    runner = JobRunner(mem.core, handlers={"reconcile": _reads_for(1.0)})
    runner.start()
    _wait_until_a_job_runs(mem)
    began = time.monotonic()
    closed_now = runner.close(timeout=0.2)
    close_s = time.monotonic() - began
    ended = runner.stop(30)  # the job ends, then its thread closes the store
    messages = [r.getMessage() for r in warned.buffer]
    result = {"closed_now": closed_now, "close_s": close_s, "ended": ended, "log": messages}
    Path(out).write_text(json.dumps(result))


def test_a_job_outlasting_the_close_timeout_finishes_then_closes_the_store(
    tmp_path: Path,
) -> None:
    db, out = tmp_path / "m.db", tmp_path / "out.json"
    assert _spawn(_close_during_a_long_job, str(db), str(out)) == 0
    result = json.loads(out.read_text())
    assert not result["closed_now"] and result["close_s"] < 2 and result["ended"], result
    assert any("still running" in m for m in result["log"]), result
    with memory(db) as mem:
        assert mem.job_counts() == {"done": 1, "queued": 1}  # finished; the next one kept
        (job,) = mem.jobs.run_pending()
        assert job.key == "c@2" and job.status in ("done", "skipped"), job.error


def test_a_long_job_stops_at_its_checkpoint_and_is_queued_again(tmp_path: Path) -> None:
    mem = memory(tmp_path / "m.db")
    first = mem.store.enqueue_job("reconcile", "c@1", {"conversation": "c"})
    runner = JobRunner(mem.core, handlers={"reconcile": _reads_for(30, checkpoints=True)})
    runner.start()
    _wait_until_a_job_runs(mem)
    began = time.monotonic()
    assert runner.close(timeout=10)  # closed now: the thread had ended
    assert time.monotonic() - began < 2
    with memory(tmp_path / "m.db") as mem:
        (job,) = mem.store.list_jobs()
        assert (job.id, job.status, job.attempts) == (first, "queued", 0)  # not an attempt
        assert [j.status for j in mem.jobs.run_pending()] == ["skipped"]  # the real handler


def test_checkpoint_outside_a_stopping_runner_does_nothing() -> None:
    checkpoint()  # inline and manual runs, and code that is not a job, go on


def test_a_released_job_is_queued_at_once_its_attempt_not_counted(store_factory) -> None:
    store = store_factory()
    store.enqueue_job("reconcile", "c@1", {})
    taken = store.take_job(time.time(), 600, 3)
    assert taken is not None and taken.attempts == 1
    store.release_job(taken.id)
    again = store.take_job(time.time(), 600, 3)  # no lease to wait out
    assert again is not None and again.id == taken.id and again.attempts == 1
    store.finish_job(again.id, "done", {})
    store.release_job(again.id)  # only a running job goes back
    assert store.job_counts() == {"done": 1}


def test_a_closed_runner_starts_no_thread(tmp_path: Path) -> None:
    mem = memory(tmp_path / "m.db", consolidate_mode="background")
    mem.close()
    mem.jobs.start()  # e.g. a late request scheduling consolidation during shutdown
    assert not mem.jobs._live
    mem.close()  # twice is harmless


def test_a_round_is_due_every_n_messages(tmp_path: Path) -> None:
    with memory(tmp_path / "m.db", consolidate_every=10) as mem:
        mem.add(make_conversation("c", [[("Ana", f"Note {i}.") for i in range(6)]]))
        # too short for a round: only its people's key info, for their next chat
        assert mem.job_counts() == {"queued": 1}
        more = make_conversation("c", [[("Ana", f"Later {i}.") for i in range(5)]], first_session=2)
        mem.add(more)
        assert sum(mem.job_counts().values()) == len(ROUND) + 1


def test_a_chat_too_short_for_a_round_still_gives_its_people_key_info(tmp_path: Path) -> None:
    with memory(tmp_path / "m.db", consolidate_mode="inline") as mem:
        mem.add(make_conversation("c", [[("Ana", "I work as a nurse at St Mary's.")]]))
        (ana,) = [p for p in mem.store.persons() if p.name == "Ana"]
        assert "nurse" in (mem.store.person_key_info(ana.id) or "")


def test_background_mode_runs_jobs_off_the_calling_thread(tmp_path: Path) -> None:
    with memory(tmp_path / "m.db", consolidate_mode="background") as mem:
        mem.add(
            make_conversation("c", [[("Ana", f"I live in Lisbon, note {i}.")] for i in range(11)])
        )
        deadline = time.time() + 20
        while mem.job_counts().get("queued", 0) + mem.job_counts().get("running", 0):
            assert time.time() < deadline, mem.job_counts()
            time.sleep(0.05)
        assert mem.store.reconcile_stats()["claims_unreconciled"] == 0


DERIVED = (
    "claims",
    "claim_events",
    "conflicts",
    "entities",
    "claim_entities",
    "persons",
    "person_identities",
    "decisions",
    "scenes",
    "scene_episodes",
    "summaries",
    "usefulness",
    "context_log",
)


def dump(mem: MemoryService) -> dict[str, list]:
    db = mem.store._db
    return {t: db.execute(f"SELECT * FROM {t} ORDER BY 1, 2").fetchall() for t in DERIVED}


def test_a_second_consolidation_round_changes_nothing(tmp_path: Path) -> None:
    work = make_conversation(
        "work",
        [
            [("Ana", "I work as a barista at Bean There."), ("Lee", "I am a nurse.")],
            [("Ana", "I started working as a teacher at Oak School."), ("Lee", "Nice!")],
            [("Ana", "I was promoted to head teacher yesterday!"), ("Lee", "Congrats, Ana!")],
        ],
    )
    other = make_conversation(
        "other", [[("Ana", "I teach at Oak School."), ("Mia", "Cool.")]], people=("Ana", "Mia")
    )
    with memory(tmp_path / "m.db") as mem:
        mem.add([work, other])
        first = mem.consolidate()
        assert all(j.status in ("done", "skipped") for j in first), [j.error for j in first]
        mem.record_context([("claim", "1", "Ana works as a barista")], "You work as a barista.")
        mem.consolidate()
        before = dump(mem)
        again = mem.consolidate()
        assert {j.status for j in again} == {"skipped"} or all(
            j.status in ("done", "skipped") for j in again
        )
        assert dump(mem) == before
        # Job changes (DESIGN.md): three jobs, the latest current, a promotion as evolution
        jobs = [c for c in mem.conflicts(conversation="work") if c.attribute == "job"]
        assert [(c.old_value, c.new_value, c.kind) for c in jobs] == [
            ("barista", "teacher", "evolution"),  # "I started working as": a change
            ("teacher", "head teacher", "evolution"),
        ]
        assert [e for e in mem.persons() if e.name == "Ana"] and len(mem.persons()) == 4


def test_rounds_of_different_conversations_each_get_the_global_jobs(tmp_path: Path) -> None:
    with memory(tmp_path / "m.db", consolidate_every=10) as mem:
        mem.add(make_conversation("a", [[("Ana", f"Note {i}.") for i in range(10)]]))
        mem.add(make_conversation("b", [[("Lee", f"Memo {i}.") for i in range(10)]]))
        people = [j for j in mem.store.list_jobs(limit=100) if j.kind == "people"]
        assert len(people) == 2  # one per round, though both conversations have 10 messages
