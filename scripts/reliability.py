"""Reliability report (issue 12): fuzzing, kill -9 trials and concurrent appends, re-runnable.

    python scripts/reliability.py [--trials 40] [--seed 0] [--quick] [--out report.json]

Three checks, each against the real CLI or server in subprocesses and real SQLite files:

- fuzz: the seeded hypothesis suite (tests/test_fuzz.py) with ARCHIVIST_FUZZ_EXAMPLES per
  target (loaders, REST, proxy): no traceback, no 500, every turn with words kept.
- kill: ``archivist ingest`` (storing; storing and extraction), ``archivist consolidate`` and
  ``archivist serve`` under proxied chats, each killed with SIGKILL after a seeded random
  delay, then run again to the end; the store must pass ``PRAGMA integrity_check``, hold
  every input message exactly once, no two messages of a conversation at one position, and
  the same derived memory as an uninterrupted run (once jobs the killed run held are due).
- appends: 4 processes appending to one conversation; positions unique, gapless, each
  writer's order kept and in timestamp order across writers.

Prints a short report, writes JSON with ``--out``, exits 1 if any check fails.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import random
import re
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

try:
    import httpx2 as httpx
except ImportError:  # the classic package where httpx2 is absent
    import httpx  # type: ignore[no-redef]

ROOT = Path(__file__).resolve().parent.parent
CLI = [str(Path(sys.executable).with_name("archivist")), "--embedder", "fake"]  # the venv's
WORDS = (
    "garden lisbon violin marathon nurse pottery sister kayak recipe tomato cargo "
    "pilot novel chess museum hiking puppy bakery concert python harbor winter"
).split()
# Derived memory that an interrupted run, finished, must share with an uninterrupted one.
DERIVED = (
    "messages",
    "sessions",
    "episodes",
    "claims",
    "claims_by_status",
    "sessions_extracted",
    "entities",
    "persons",
    "scenes",
    "summaries",
    "conflicts",
    "claims_unreconciled",
    "vectors",
)


# -- fuzz ----------------------------------------------------------------------------------


# Runs pytest on the fuzz suite and counts every generated input Hypothesis ran, by outcome.
_FUZZ_RUNNER = """
import collections, json, os, sys
import pytest
seen = collections.Counter()
def count(obs, *_):
    if obs.type == "test_case":
        test = os.environ.get("PYTEST_CURRENT_TEST", "?").split("::")[-1].split(" ")[0]
        seen[test + " " + obs.status] += 1
class Count:
    def pytest_sessionstart(self, session):
        from hypothesis.internal.observability import add_observability_callback
        add_observability_callback(count, all_threads=True)
code = pytest.main(["-q", "-p", "no:cacheprovider", "tests/test_fuzz.py"], plugins=[Count()])
print("FUZZ-COUNTS " + json.dumps(seen))
sys.exit(code)
"""


def fuzz(examples: int) -> dict:
    """The hypothesis suite at ``examples`` per target, in a pytest subprocess."""
    env = {**os.environ, "ARCHIVIST_FUZZ_EXAMPLES": str(examples)}
    started = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", _FUZZ_RUNNER], cwd=ROOT, env=env, capture_output=True, text=True
    )
    out = proc.stdout + proc.stderr
    found = re.search(r"^FUZZ-COUNTS (.*)$", out, re.M)
    counts = json.loads(found.group(1)) if found else {}
    status = Counter()
    for key, n in counts.items():
        status[key.rsplit(" ", 1)[1]] += n
    result = re.search(r"(\d+) passed", out)
    failure = re.search(r"^E\s+AssertionError: (.*)$", out, re.M)
    return {
        "ok": proc.returncode == 0 and status["passed"] > 0,
        "examples_per_target": examples,
        "tests_passed": int(result.group(1)) if result else 0,
        "inputs_passed": status["passed"],
        "inputs_failed": status["failed"],
        "inputs_invalid": status["gave_up"],
        "by_target": counts,
        "tracebacks": out.count("Traceback"),
        "first_failure": failure.group(1)[:300] if failure else "",
        "seconds": round(time.perf_counter() - started, 1),
        "tail": "" if proc.returncode == 0 else out[-3000:],
    }


# -- kill -9 -------------------------------------------------------------------------------


def write_input(path: Path, conversations: int, messages: int, seed: int) -> list[tuple]:
    """A JSONL input file; returns its (conversation, id) pairs in file order."""
    rng = random.Random(seed)
    keys = []
    with path.open("w") as f:
        for c in range(conversations):
            for i in range(messages):
                who = ("Ana", "Ben")[i % 2]
                text = (
                    f"{who} here: I went to the {rng.choice(WORDS)} with my "
                    f"{rng.choice(WORDS)} and we loved the {rng.choice(WORDS)}."
                )
                at = datetime(2024, 3, 1, 9, tzinfo=UTC) + timedelta(hours=i // 20, minutes=i)
                record = {
                    "conversation": f"c{c}",
                    "id": f"m{i}",
                    "speaker": who,
                    "text": text,
                    "timestamp": at.isoformat(),
                    "session": 1 + i // 20,
                }
                f.write(json.dumps(record) + "\n")
                keys.append((f"c{c}", f"m{i}"))
    return keys


def cli(db: Path, *args: str) -> list[str]:
    return [*CLI, "--db", str(db), *args]


def run_ok(cmd: list[str]) -> float:
    """Run to the end; its seconds. A failure is the script's own error, not a finding."""
    started = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    if proc.returncode:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{proc.stdout}{proc.stderr}")
    return time.perf_counter() - started


def kill_after(cmd: list[str], delay: float) -> bool:
    """Start ``cmd``, SIGKILL its whole process group after ``delay`` s; True if it was killed
    (False: it had already finished)."""
    proc = subprocess.Popen(
        cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    try:
        proc.wait(delay)
        return False
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        return True


def derived(db: Path) -> dict:
    out = subprocess.run(cli(db, "stats", "--json"), cwd=ROOT, capture_output=True, text=True)
    stats = json.loads(out.stdout)
    return {k: stats.get(k) for k in DERIVED}


def check_store(db: Path, expected: list[tuple] | Counter, ordered: bool) -> dict:
    """Integrity of the SQLite file and of its message log against what was sent.

    ``expected``: (conversation, msg_id) in input order, or a Counter of
    (conversation, role, text) for proxied chats, whose ids the proxy makes.
    """
    con = sqlite3.connect(db)
    try:
        integrity = con.execute("PRAGMA integrity_check").fetchall()
        foreign = con.execute("PRAGMA foreign_key_check").fetchall()
        dup_ids = con.execute(
            "SELECT COUNT(*) FROM (SELECT 1 FROM messages GROUP BY conversation, msg_id"
            " HAVING COUNT(*) > 1)"
        ).fetchone()[0]
        dup_seq = con.execute(
            "SELECT COUNT(*) FROM (SELECT 1 FROM messages GROUP BY conversation, seq"
            " HAVING COUNT(*) > 1)"
        ).fetchone()[0]
        if isinstance(expected, Counter):
            rows = con.execute("SELECT conversation, role, text FROM messages").fetchall()
            have, want = Counter(rows), expected
            order_ok = True
        else:
            rows = con.execute(
                "SELECT conversation, msg_id FROM messages ORDER BY conversation, seq"
            ).fetchall()
            have, want = Counter(rows), Counter(expected)
            order_ok = not ordered or rows == sorted(expected, key=lambda k: k[0])
    finally:
        con.close()
    result = {
        "integrity": integrity[0][0] if len(integrity) == 1 else str(integrity[:3]),
        "foreign_key_errors": len(foreign),
        "stored": sum(have.values()),
        "lost": sum((want - have).values()),
        "extra": sum((have - want).values()),
        "duplicate_ids": dup_ids,
        "duplicate_positions": dup_seq,
        "input_order": order_ok,
    }
    result["ok"] = (
        result["integrity"] == "ok"
        and not foreign
        and not result["lost"]
        and not result["extra"]
        and not dup_ids
        and not dup_seq
        and order_ok
    )
    return result


def cli_trial(kind: str, work: Path, data: Path, keys: list, ref: dict, rng: random.Random) -> dict:
    """One kill -9 trial of an ingest, extraction or consolidation run, then a clean re-run."""
    db = work / f"{kind}-{rng.randrange(10**9)}.db"
    plain = cli(db, "ingest", "--no-extract", str(data))
    full = cli(db, "ingest", str(data))
    if kind == "ingest":  # storing only: the kill lands in validation or the transactions
        target, finish = plain, [plain, full]
    elif kind == "extract":  # storing, then extraction and the consolidation ingest runs
        run_ok(plain)
        target, finish = full, [full]
    else:  # consolidate: messages stored and read, then a consolidation round killed
        run_ok(cli(db, "ingest", "--no-extract", str(data)))
        run_ok(cli(db, "rebuild"))
        target, finish = cli(db, "consolidate"), [cli(db, "consolidate")]
    # after the interpreter's start-up (the CLI's imports), before the end of the run
    # (the uninterrupted run's time, less a margin: runs vary by a tenth or more)
    start, end = ref["startup"], ref["seconds"][kind]
    delay = rng.uniform(start, start + 0.85 * (end - start))
    killed = kill_after(target, delay)
    store_after_kill = check_store(db, keys, ordered=False) if killed and db.exists() else None
    for cmd in finish:
        run_ok(cmd)
    if kind == "consolidate":
        run_ok(full)  # the reference ran ingest (extract + consolidate) last as well
    # A job the killed run had taken is taken again by the re-run at once (its holder is
    # gone): the store must equal the uninterrupted run's now, with no job left running.
    want = ref["derived"][kind]
    state = derived(db)
    result = check_store(db, keys, ordered=True)
    result.update(
        kind=kind,
        delay_s=round(delay, 3),
        killed=killed,
        integrity_after_kill=store_after_kill and store_after_kill["integrity"],
        jobs_left_running=left_running(db),
        derived_same=state == want,
    )
    if state != want:
        result["derived_diff"] = {k: (state[k], want[k]) for k in DERIVED if state[k] != want[k]}
    result["ok"] = result["ok"] and result["derived_same"] and not result["jobs_left_running"]
    return result


def left_running(db: Path) -> int:
    """Jobs still 'running' after the re-run: a lease no process holds."""
    con = sqlite3.connect(db)
    try:
        return con.execute("SELECT count(*) FROM jobs WHERE status = 'running'").fetchone()[0]
    finally:
        con.close()


def cli_reference(work: Path, data: Path) -> dict:
    """Uninterrupted runs: how long each step takes (the kill window) and the end state."""
    db = work / "reference.db"
    seconds = {"ingest": run_ok(cli(db, "ingest", "--no-extract", str(data)))}
    seconds["extract"] = run_ok(cli(db, "ingest", str(data)))
    state = derived(db)
    db2 = work / "reference-consolidate.db"
    run_ok(cli(db2, "ingest", "--no-extract", str(data)))
    run_ok(cli(db2, "rebuild"))
    seconds["consolidate"] = run_ok(cli(db2, "consolidate"))
    run_ok(cli(db2, "ingest", str(data)))
    startup = min(run_ok([*CLI, "--version"]) for _ in range(3))
    return {
        "seconds": seconds,
        "startup": startup,
        "derived": {"ingest": state, "extract": state, "consolidate": derived(db2)},
    }


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Server:
    """``archivist serve --open`` in its own process group (it spawns its worker process)."""

    def __init__(self, data_dir: Path, upstream: str) -> None:
        self.port = free_port()
        self.cmd = [*CLI, "serve", "--open", "--port", str(self.port)]
        self.cmd += ["--data-dir", str(data_dir), "--upstream", upstream, "--log-level", "error"]
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> None:
        self.proc = subprocess.Popen(
            self.cmd,
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if httpx.get(self.url + "/memory/status", timeout=2).is_success:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
        raise RuntimeError("archivist serve did not start")

    def kill(self) -> None:
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()

    def stop(self) -> None:
        """Graceful (SIGTERM), so queued replies are stored; then the group is cleared."""
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(60)
        finally:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def send(client: httpx.Client, url: str, body: dict, conv: str) -> dict:
    """POST a chat until it succeeds (the server may be down or restarting)."""
    headers = {"X-Archivist-Conversation": conv}
    for _ in range(600):
        try:
            r = client.post(url + "/chat/completions", json=body, headers=headers)
            if r.is_success:
                return r.json()["choices"][0]["message"]
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise RuntimeError("the proxy never answered")


def proxy_trial(work: Path, upstream: str, chats: int, turns: int, rng: random.Random) -> dict:
    """Chats through ``archivist serve``, killed -9 once at a random turn, restarted; every
    chat then re-sends its history, and every message sent must be stored once."""
    data_dir = work / f"proxy-{rng.randrange(10**9)}"
    data_dir.mkdir()
    server = Server(data_dir, upstream)
    server.start()
    total = chats * turns
    kill_at, delay = rng.randrange(1, total), rng.uniform(0.0, 0.05)
    histories = {
        f"chat-{c}": [{"role": "system", "content": "You are a helpful assistant."}]
        for c in range(chats)
    }
    done, killer, after_kill = 0, None, None
    db = data_dir / "default.db"
    try:
        with httpx.Client(timeout=30) as client:
            for t in range(turns):
                for cid, history in histories.items():
                    text = (
                        f"{cid} turn {t}: I saw a {rng.choice(WORDS)} near the {rng.choice(WORDS)}."
                    )
                    history.append({"role": "user", "content": text})
                    if done == kill_at:  # the kill lands while this turn is in flight
                        killer = threading.Timer(delay, server.kill)
                        killer.start()
                    body = {"model": "fake", "messages": history, "user": "ana"}
                    try:
                        reply = client.post(
                            server.url + "/chat/completions",
                            json=body,
                            headers={"X-Archivist-Conversation": cid},
                        )
                        reply.raise_for_status()
                        message = reply.json()["choices"][0]["message"]
                    except httpx.HTTPError:
                        message = None
                    if killer:
                        killer.join()
                        killer = None
                        after_kill = check_store(db, Counter(), ordered=False)["integrity"]
                        server.start()
                        message = message or send(client, server.url, body, cid)
                    history.append({"role": "assistant", "content": message["content"]})
                    done += 1
    finally:
        server.stop()
    sent = Counter((cid, m["role"], m["content"]) for cid, h in histories.items() for m in h)
    result = check_store(db, sent, ordered=False)
    result.update(
        kind="proxy",
        kill_at_turn=kill_at,
        delay_s=round(delay, 3),
        killed=True,
        integrity_after_kill=after_kill,
    )
    return result


def kill_trials(trials: int, conversations: int, messages: int, turns: int, seed: int) -> dict:
    from archivist.bench.load import FakeUpstream, LoopbackServer

    rng = random.Random(seed)
    kinds = ["ingest", "extract", "consolidate", "proxy"]
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="archivist-reliability-") as tmp:
        work = Path(tmp)
        data = work / "input.jsonl"
        keys = write_input(data, conversations, messages, seed)
        ref = cli_reference(work, data)
        upstream = LoopbackServer(FakeUpstream().app).start()
        results = []
        try:
            for i in range(trials):
                kind = kinds[i % len(kinds)]
                if kind == "proxy":
                    results.append(proxy_trial(work, upstream.url, 3, turns, rng))
                else:
                    results.append(cli_trial(kind, work, data, keys, ref, rng))
                for db in work.glob("*-*.db*"):  # keep the temp dir small
                    if "reference" not in db.name:
                        db.unlink()
        finally:
            upstream.stop()
    by_kind = {
        k: {
            "trials": sum(r["kind"] == k for r in results),
            "killed": sum(r["kind"] == k and r["killed"] for r in results),
            "ok": sum(r["kind"] == k and r["ok"] for r in results),
        }
        for k in kinds
    }
    return {
        "ok": all(r["ok"] for r in results),
        "trials": len(results),
        "killed": sum(r["killed"] for r in results),
        "input_messages": len(keys),
        "lost": sum(r["lost"] for r in results),
        "extra": sum(r["extra"] for r in results),
        "duplicate_ids": sum(r["duplicate_ids"] for r in results),
        "duplicate_positions": sum(r["duplicate_positions"] for r in results),
        "integrity_ok": sum(r["integrity"] == "ok" for r in results),
        "integrity_ok_right_after_kill": sum(
            r.get("integrity_after_kill") == "ok" for r in results
        ),
        "killed_before_the_file_existed": sum(
            r["killed"] and r.get("integrity_after_kill") is None for r in results
        ),
        "derived_same": sum(bool(r.get("derived_same")) for r in results if r["kind"] != "proxy"),
        "jobs_left_running": sum(r.get("jobs_left_running", 0) for r in results),
        "by_kind": by_kind,
        "reference_seconds": {k: round(v, 2) for k, v in ref["seconds"].items()},
        "startup_seconds": round(ref["startup"], 2),
        "seconds": round(time.perf_counter() - started, 1),
        "results": results,
    }


# -- concurrent appends --------------------------------------------------------------------


def _append(db: str, worker: int, appends: int) -> None:
    """One writer: single-message batches to conversation "c", each through its own add()."""
    from archivist.config import Settings
    from archivist.model import Conversation, Message, Session
    from archivist.service import MemoryService
    from archivist.testing import FakeEmbedder

    t0 = datetime(2024, 3, 1, 9, tzinfo=UTC)
    settings = Settings(consolidate_mode="manual")
    with MemoryService(Path(db), settings=settings, embedder=FakeEmbedder()) as mem:
        for i in range(appends):
            at = t0 + timedelta(minutes=i, seconds=worker)
            m = Message(f"w{worker}-{i}", "c", 1, f"P{worker}", f"turn {i} of {worker}", at)
            conv = Conversation("c", (f"P{worker}",), (m,), (Session("c", 1, t0),))
            mem.add(conv, extract=False)


def appends(processes: int, per_process: int) -> dict:
    from archivist.config import Settings
    from archivist.service import MemoryService
    from archivist.testing import FakeEmbedder

    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="archivist-appends-") as tmp:
        db = str(Path(tmp) / "m.db")
        settings = Settings(consolidate_mode="manual")
        with MemoryService(Path(db), settings=settings, embedder=FakeEmbedder()):
            pass  # the schema, once, before the writers race
        ctx = multiprocessing.get_context("spawn")
        procs = [ctx.Process(target=_append, args=(db, w, per_process)) for w in range(processes)]
        for p in procs:
            p.start()
        for p in procs:
            p.join(600)
        with MemoryService(Path(db), settings=settings, embedder=FakeEmbedder()) as mem:
            stored = [m for _, m in mem.store.conversation_messages("c")]
        integrity = sqlite3.connect(db).execute("PRAGMA integrity_check").fetchone()[0]
    seqs = [m.seq for m in stored]
    own_order = all(
        [m.id for m in stored if m.id.startswith(f"w{w}-")]
        == [f"w{w}-{i}" for i in range(per_process)]
        for w in range(processes)
    )
    inversions = sum(a.timestamp > b.timestamp for a, b in zip(stored, stored[1:], strict=False))
    result = {
        "processes": processes,
        "appends": processes * per_process,
        "exit_codes": [p.exitcode for p in procs],
        "stored": len(stored),
        "unique_positions": len(set(seqs)),
        "gapless": sorted(seqs) == list(range(len(seqs))),
        "each_writer_in_order": own_order,
        "integrity": integrity,
        "adjacent_out_of_time_order": inversions,
        "seconds": round(time.perf_counter() - started, 1),
    }
    result["ok"] = (
        result["exit_codes"] == [0] * processes
        and result["stored"] == result["appends"] == result["unique_positions"]
        and result["gapless"]
        and own_order
        and inversions == 0
        and integrity == "ok"
    )
    return result


# -- report --------------------------------------------------------------------------------


def report(r: dict) -> str:
    f, k, a = r["fuzz"], r["kill"], r["appends"]
    mark = {True: "ok", False: "FAIL"}
    kinds = ", ".join(f"{n} {v['ok']}/{v['trials']}" for n, v in k["by_kind"].items())
    cli_trials = k["trials"] - k["by_kind"]["proxy"]["trials"]
    lines = [
        f"fuzz     {mark[f['ok']]}: {f['inputs_passed']} inputs passed, "
        f"{f['inputs_failed']} failed, {f['tracebacks']} tracebacks "
        f"({f['examples_per_target']} per target x 3 targets, {f['seconds']} s)",
    ]
    if f["first_failure"]:
        lines.append(f"         first failure: {f['first_failure']}")
    lines += [
        f"kill -9  {mark[k['ok']]}: {k['trials']} trials ({kinds} ok), {k['killed']} killed "
        f"mid-run ({k['seconds']} s)",
        f"         messages: lost {k['lost']}, extra {k['extra']}, duplicate ids "
        f"{k['duplicate_ids']}, duplicate positions {k['duplicate_positions']}",
        f"         integrity_check ok {k['integrity_ok']}/{k['trials']} after the re-run, "
        f"{k['integrity_ok_right_after_kill']}/"
        f"{k['killed'] - k['killed_before_the_file_existed']} right after the kill",
        f"         derived memory as an uninterrupted run on an immediate re-run: "
        f"{k['derived_same']}/{cli_trials}; jobs left running: {k['jobs_left_running']}",
        f"appends  {mark[a['ok']]}: {a['processes']} processes x "
        f"{a['appends'] // a['processes']}: {a['stored']} stored, {a['unique_positions']} "
        f"unique positions, gapless {a['gapless']}, each writer in order "
        f"{a['each_writer_in_order']}; {a['adjacent_out_of_time_order']} of "
        f"{a['stored'] - 1} adjacent pairs out of time order ({a['seconds']} s)",
        f"overall  {mark[r['ok']]} ({r['seconds']} s)",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=40, help="kill -9 trials (default 40)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="small sizes, to try it")
    parser.add_argument("--out", type=Path, help="write the full result as a result file here")
    args = parser.parse_args(argv)
    if args.quick:
        examples, trials, convs, msgs, turns, per = 20, min(args.trials, 4), 2, 40, 3, 20
    else:
        examples, trials, convs, msgs, turns, per = 700, args.trials, 5, 200, 6, 250
    started = time.perf_counter()
    result: dict[str, Any] = {"seed": args.seed, "quick": args.quick}
    result["fuzz"] = fuzz(examples)
    result["kill"] = kill_trials(trials, convs, msgs, turns, args.seed)
    result["appends"] = appends(4, per)
    result["ok"] = all(result[k]["ok"] for k in ("fuzz", "kill", "appends"))
    result["seconds"] = round(time.perf_counter() - started, 1)
    print(report(result))
    if args.out:  # a result file the benchmark page renders (archivist.bench.record)
        from archivist.bench.record import save

        given = " ".join(argv if argv is not None else sys.argv[1:])
        save(result, args.out, f"python scripts/reliability.py {given}".strip())
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
