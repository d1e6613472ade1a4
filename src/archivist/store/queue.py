"""The durable job queue (archivist/jobs.py drives it), written once for both backends.

Jobs are rows: enqueueing is idempotent on (kind, key); taking a job sets a
lease and names the process holding it, so a job whose worker died (crash,
kill) is taken again at once when that worker ran on this host and is gone,
and otherwise once the lease ends. On PostgreSQL rows another worker holds
are skipped (``SKIP LOCKED``), never waited on; SQLite's write transaction
already admits one writer.
"""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

from ..model import Job
from .common import Body, record, retried

_JOB_COLS = "id, kind, key, payload, status, attempts, error, result"


def _started(pid: int) -> str | None:
    """When process ``pid`` started (clock ticks since boot), or None if there is none.

    With the pid, it names one process: a pid the system gave to a new process
    after the old one died has another start time.
    """
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii")
    except (OSError, ValueError):
        return None
    return stat.rsplit(")", 1)[1].split()[19]  # field 22; the name may hold spaces


def _host() -> str:
    """This host and process namespace: pids are only comparable within one.

    Two containers may share a hostname but not a pid namespace; a process of
    one must not call the other's worker gone because its pid is not visible.
    """
    try:
        ns = os.readlink("/proc/self/ns/pid")
    except OSError:
        ns = "?"
    return f"{socket.gethostname()}/{ns}".replace(" ", "_")


def this_process() -> str:
    """``host pid start`` of the calling process (``start`` is "-" without /proc)."""
    pid = os.getpid()
    return f"{_host()} {pid} {_started(pid) or '-'}"


def gone(owner: str | None) -> bool:
    """True if ``owner`` ran on this host and that process no longer exists.

    Unknown owners (another host, no /proc, an old row) are never called gone:
    their leases run out as before.
    """
    host, _, rest = (owner or "").partition(" ")
    pid, _, start = rest.partition(" ")
    if host != _host() or host.endswith("/?") or not pid.isdigit() or start in ("", "-"):
        return False
    return _started(int(pid)) != start


def _row_to_job(r: tuple) -> Job:
    return record(Job, _JOB_COLS, r, payload=json.loads, result=json.loads)


class JobQueue(Body):
    """The queue's part of the Store protocol (JobStore), plus the meta table."""

    @retried
    def enqueue_job(
        self, kind: str, key: str, payload: dict, not_before: float | None = None
    ) -> int | None:
        """Queue a job unless (kind, key) was queued before; its id, or None if it was.

        ``not_before`` (epoch seconds): no worker takes it earlier (its lease until then).
        """
        now = self._now_iso()
        rows = self._write_one(
            "INSERT INTO jobs(kind, key, payload, created_at, updated_at, lease_until) "
            "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (kind, key) DO NOTHING RETURNING id",
            (kind, key, json.dumps(payload, sort_keys=True), now, now, not_before),
        )
        return int(rows[0][0]) if rows else None

    @retried
    def take_job(self, now: float, lease_s: float, max_attempts: int) -> Job | None:
        """The oldest runnable job (queued, or running with an expired lease), now leased."""
        lock = self._d.skip_locked
        with self._write() as db:
            held = db.execute(
                "SELECT id, lease_owner FROM jobs WHERE status = 'running' AND lease_until >= ? "
                f"AND lease_owner IS NOT NULL{lock}",
                (now,),
            ).fetchall()
            orphans = [job_id for job_id, owner in held if gone(owner)]
            db.executemany(  # their worker was killed: the lease ends now
                "UPDATE jobs SET lease_until = ? WHERE id = ?", [(now - 1, i) for i in orphans]
            )
            db.execute(  # leases that ran out on the last allowed attempt: give up
                "UPDATE jobs SET status = 'failed', error = 'lease expired (worker died?) "
                "on the last attempt', lease_until = NULL WHERE id IN (SELECT id FROM jobs "
                f"WHERE status = 'running' AND lease_until < ? AND attempts >= ?{lock})",
                (now, max_attempts),
            )
            row = db.execute(
                f"SELECT {_JOB_COLS} FROM jobs WHERE status IN ('queued', 'running') "
                "AND (lease_until IS NULL OR lease_until < ?) AND attempts < ? "
                f"ORDER BY id LIMIT 1{lock}",
                (now, max_attempts),
            ).fetchone()
            if row is None:
                return None
            db.execute(
                "UPDATE jobs SET status = 'running', attempts = attempts + 1, lease_until = ?, "
                "lease_owner = ?, updated_at = ? WHERE id = ?",
                (now + lease_s, this_process(), self._now_iso(), row[0]),
            )
        job = _row_to_job(row)
        return Job(**{**job.__dict__, "status": "running", "attempts": job.attempts + 1})

    @retried
    def finish_job(
        self,
        job_id: int,
        status: str,
        result: dict,
        error: str = "",
        retry_at: float | None = None,
    ) -> None:
        """Record a job's end: done, skipped, failed, or queued again (not before ``retry_at``)."""
        with self._write() as db:
            db.execute(
                "UPDATE jobs SET status = ?, result = ?, error = ?, lease_until = ?, "
                "updated_at = ? WHERE id = ?",
                (status, json.dumps(result, default=str), error, retry_at, self._now_iso(), job_id),
            )

    @retried
    def release_job(self, job_id: int) -> None:
        """Put back a running job its runner stopped at a checkpoint (the store is
        closing): queued at once, to run again in full, the attempt not counted."""
        with self._write() as db:
            db.execute(
                "UPDATE jobs SET status = 'queued', lease_until = NULL, lease_owner = NULL, "
                "attempts = CASE WHEN attempts > 0 THEN attempts - 1 ELSE 0 END, updated_at = ? "
                "WHERE id = ? AND status = 'running'",
                (self._now_iso(), job_id),
            )

    def list_jobs(self, status: str | None = None, limit: int = 100) -> list[Job]:
        """Jobs, newest first."""
        where, params = ("WHERE status = ?", (status,)) if status else ("", ())
        rows = self._db.execute(
            f"SELECT {_JOB_COLS} FROM jobs {where} ORDER BY id DESC LIMIT ?",
            (*params, int(limit)),
        )
        return [_row_to_job(r) for r in rows]

    def job_counts(self) -> dict[str, int]:
        """status -> number of jobs."""
        return self._counts({"jobs": "SELECT status, count(*) FROM jobs GROUP BY status"})["jobs"]  # type: ignore[return-value]

    def meta(self, key: str) -> str | None:
        row = self._db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return row[0] if row else None

    @retried
    def set_meta(self, key: str, value: str) -> None:
        self._write_one(
            "INSERT INTO meta(key, value) VALUES (?, ?) "
            "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            (key, value),
        )
