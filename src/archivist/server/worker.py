"""The background worker: the tenants' durable jobs, in a process of their own.

Reading new messages (extraction: embedding claims, and LLM calls when one
is configured) and consolidation are CPU work. Run on threads of the server
process, they share its interpreter lock and store connection with requests
and each proxied turn waits behind them (measured: the proxy's memory work
went from 5 ms to 20-50 ms a turn beside a busy extraction thread). So the
server only stores the log, queues an ``extract`` job in the tenant's store
and wakes this process, which runs at a lower CPU priority (``nice``, and on Linux
the idle scheduling class: ``lower_priority``).

The queue is the store's ``jobs`` table, so nothing is lost when either
process stops: at start the worker looks at every tenant store it can find,
and a job whose worker died is taken again when its lease ends.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import queue
import time
from pathlib import Path
from typing import Any

from ..config import Settings
from .tenants import TENANT_ID, tenant_settings

log = logging.getLogger("archivist.server.worker")

JOBS_PER_TURN = 8  # jobs of one tenant before the next tenant's turn (fair across tenants)
POLL_S = 2.0  # look at every known tenant this often (retries with backoff come due)


class WorkerProcess:
    """Starts, wakes and stops the worker process (the server side of it)."""

    def __init__(
        self, settings: Settings, data_dir: Path, tenants: tuple[str, ...] = (), nice: int = 10
    ) -> None:
        self.settings, self.data_dir, self.tenants, self.nice = settings, data_dir, tenants, nice
        self._ctx = multiprocessing.get_context("spawn")  # no fork of a threaded server
        self._wake: Any = self._ctx.Queue()
        self.process: Any = None
        self.restarts = 0
        self._stopping = False

    def start(self) -> WorkerProcess:
        args = (self.settings, Path(self.data_dir), tuple(self.tenants), self._wake, self.nice)
        self.process = self._ctx.Process(
            target=work, args=args, name="archivist-worker", daemon=True
        )
        self.process.start()
        return self

    def wake(self, tenant: str) -> None:
        """Tell the worker a tenant queued jobs (a hint: it also polls); start a new
        worker if the last one died (its jobs are in the stores, leased or queued)."""
        if self.process is not None and not self._stopping and not self.process.is_alive():
            log.warning("the worker process exited (%s); starting another", self.process.exitcode)
            self.restarts += 1
            self.start()
        try:
            self._wake.put_nowait(tenant)
        except (ValueError, OSError):  # closed at shutdown: the job waits in the store
            pass

    def alive(self) -> bool:
        return self.process is not None and self.process.is_alive()

    def stop(self, timeout: float = 10.0) -> None:
        """Let the current job finish, then stop; queued jobs stay in the stores. The
        worker gets the normal scheduling class back first where this process may give
        it (an idle-class worker on a busy machine barely runs: it would not finish);
        past ``timeout`` it is terminated, and its job's lease brings the job back."""
        self._stopping = True
        if self.process is None:
            return
        if self.process.is_alive():
            raise_priority(self.process.pid)
            self.wake("")  # the stop signal
            self.process.join(timeout)
        if self.process.is_alive():  # a long LLM call: its lease brings the job back later
            self.process.terminate()
            self.process.join(5)
        self._wake.close()


def known_tenants(settings: Settings, data_dir: Path, configured: tuple[str, ...]) -> set[str]:
    """Tenants whose stores may hold jobs: configured ones, and SQLite files on disk."""
    found = set(configured)
    if settings.store == "sqlite" and data_dir.is_dir():
        found |= {p.stem for p in data_dir.glob("*.db") if TENANT_ID.match(p.stem)}
    return found


def _woken(wake: Any, timeout: float | None) -> list[str]:
    """Tenant ids sent since the last look, waiting up to ``timeout`` for one (None: no wait)."""
    out: list[str] = []
    try:
        out.append(wake.get(timeout=timeout) if timeout else wake.get_nowait())
        while True:
            out.append(wake.get_nowait())
    except queue.Empty:
        pass
    return out


def lower_priority(nice: int) -> None:
    """Run this process (and the threads it starts later) below the server: ``nice``,
    and on Linux the idle class, whose threads a waking request thread preempts at
    once. With ``nice`` alone a waking request waited out the worker's time slice at
    each of a turn's round trips (measured in docs/postgres.md)."""
    try:
        os.nice(nice)
    except OSError:  # not allowed here: run at the server's priority
        log.warning("could not lower the worker's CPU priority")
    if hasattr(os, "SCHED_IDLE"):
        try:
            os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
        except OSError:  # e.g. a container's seccomp policy
            log.warning("could not put the worker in the idle scheduling class")


def raise_priority(pid: int) -> bool:
    """Put every thread of process ``pid`` back in the normal scheduling class (its nice
    value stays); whether all of them are. Leaving the idle class needs CAP_SYS_NICE or
    a RLIMIT_NICE that allows the thread's nice value: otherwise it stays idle."""
    if not hasattr(os, "SCHED_IDLE"):
        return True
    try:
        threads = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return False
    done = True
    for tid in threads:
        try:
            os.sched_setscheduler(int(tid), os.SCHED_OTHER, os.sched_param(0))
        except OSError:  # not permitted, or the thread ended
            done = False
    return done


def work(
    settings: Settings, data_dir: Path, configured: tuple[str, ...], wake: Any, nice: int
) -> None:
    """The worker process: run every tenant's queued jobs until told to stop."""
    import signal

    from ..service import MemoryService

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the server, which stops us
    logging.basicConfig(level=logging.INFO, format="%(asctime)s worker %(levelname)s %(message)s")
    if nice:
        lower_priority(nice)
    if settings.embed_threads == 0:  # one core for the worker's model: the other serves chats
        settings = settings.with_(embed_threads=1)
    memories: dict[str, MemoryService] = {}
    due = known_tenants(settings, data_dir, configured)
    last_poll = time.monotonic()
    try:
        while True:
            woken = _woken(wake, None if due else POLL_S)
            if "" in woken:
                return
            due.update(t for t in woken if t)
            if time.monotonic() - last_poll >= POLL_S:
                due |= set(memories) | known_tenants(settings, data_dir, configured)
                last_poll = time.monotonic()
            for tenant in sorted(due):
                path = data_dir / f"{tenant}.db"
                if tenant not in memories and settings.store == "sqlite" and not path.exists():
                    due.discard(tenant)
                    continue
                try:
                    memory = memories.get(tenant)
                    if memory is None:
                        memory = memories[tenant] = MemoryService(
                            settings=tenant_settings(settings, tenant, path, "manual")
                        )
                    ran = memory.jobs.run_pending(limit=JOBS_PER_TURN)
                except Exception:  # noqa: BLE001 - the store failed; try again at the next poll
                    log.exception("tenant %s: running jobs failed", tenant)
                    ran = []
                if len(ran) < JOBS_PER_TURN:
                    due.discard(tenant)
    finally:
        for memory in memories.values():
            memory.close()
