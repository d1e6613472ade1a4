"""SQLite persistence of the durable job queue (jobs.py drives it).

A mixin of SQLiteStore, kept apart so no module grows past ~500 lines. Jobs
are rows: enqueueing is idempotent on (kind, key); taking a job sets a lease,
so a job whose worker died (crash, kill) is taken again once the lease ends.
"""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime

from ..model import Job

_JOB_COLS = "id, kind, key, payload, status, attempts, error, result"


def _row_to_job(r: tuple) -> Job:
    i, kind, key, payload, status, attempts, error, result = r
    return Job(
        id=i,
        kind=kind,
        key=key,
        payload=json.loads(payload),
        status=status,
        attempts=attempts,
        error=error,
        result=json.loads(result),
    )


class JobsMixin:
    """Part of SQLiteStore (see the module docstring)."""

    _db: sqlite3.Connection

    def enqueue_job(
        self, kind: str, key: str, payload: dict, not_before: float | None = None
    ) -> int | None:
        """Queue a job unless (kind, key) was queued before; its id, or None if it was.

        ``not_before`` (epoch seconds): no worker takes it earlier (its lease until then).
        """
        now = datetime.now(UTC).isoformat()
        with self._write() as db:  # type: ignore[attr-defined]
            cur = db.execute(
                "INSERT OR IGNORE INTO jobs(kind, key, payload, created_at, updated_at, "
                "lease_until) VALUES (?, ?, ?, ?, ?, ?)",
                (kind, key, json.dumps(payload, sort_keys=True), now, now, not_before),
            )
            return int(cur.lastrowid) if cur.rowcount else None

    def take_job(self, now: float, lease_s: float, max_attempts: int) -> Job | None:
        """The oldest runnable job (queued, or running with an expired lease), now leased."""
        with self._write() as db:  # type: ignore[attr-defined]
            db.execute(  # leases that ran out on the last allowed attempt: give up
                "UPDATE jobs SET status = 'failed', error = 'lease expired (worker died?) "
                "on the last attempt', lease_until = NULL WHERE status = 'running' "
                "AND lease_until < ? AND attempts >= ?",
                (now, max_attempts),
            )
            row = db.execute(
                f"SELECT {_JOB_COLS} FROM jobs WHERE (status IN ('queued', 'running') AND ("
                "lease_until IS NULL OR lease_until < ?)) AND attempts < ? ORDER BY id LIMIT 1",
                (now, max_attempts),
            ).fetchone()
            if row is None:
                return None
            db.execute(
                "UPDATE jobs SET status = 'running', attempts = attempts + 1, lease_until = ?, "
                "updated_at = ? WHERE id = ?",
                (now + lease_s, datetime.now(UTC).isoformat(), row[0]),
            )
        job = _row_to_job(row)
        return Job(**{**job.__dict__, "status": "running", "attempts": job.attempts + 1})

    def finish_job(
        self,
        job_id: int,
        status: str,
        result: dict,
        error: str = "",
        retry_at: float | None = None,
    ) -> None:
        """Record a job's end: done, skipped, failed, or queued again (not before ``retry_at``)."""
        with self._write() as db:  # type: ignore[attr-defined]
            db.execute(
                "UPDATE jobs SET status = ?, result = ?, error = ?, lease_until = ?, "
                "updated_at = ? WHERE id = ?",
                (
                    status,
                    json.dumps(result, default=str),
                    error,
                    retry_at,
                    datetime.now(UTC).isoformat(),
                    job_id,
                ),
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
        return dict(self._db.execute("SELECT status, count(*) FROM jobs GROUP BY status"))

    def set_meta(self, key: str, value: str) -> None:
        with self._write() as db:  # type: ignore[attr-defined]
            db.execute(
                "INSERT INTO meta(key, value) VALUES (?, ?) "
                "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                (key, value),
            )
