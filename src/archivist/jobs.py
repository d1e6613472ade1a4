"""The durable background queue: extraction and consolidation as jobs stored in the Store.

A server queues an ``extract`` job per conversation that grew (keyed by its
size, so a re-sent turn queues nothing); the job reads the new messages and
queues consolidation. Every ``consolidate_every`` new messages of a
conversation (and on demand) a *round* is enqueued: reconcile (layers 1-2),
people (layer 3), scenes, summaries, dossiers, key info and usefulness. Jobs
are rows, so a crash loses none: a job taken by a worker that died is taken
again when its lease ends. Enqueueing is idempotent on (kind, key) and every
handler is idempotent on its own, so running a round twice changes nothing.

Handlers are ``fn(core, payload) -> dict`` (archivist.core.Core); a result
with ``"skipped"`` (nothing to do, or no heuristic form without an LLM) is
recorded as skipped. An exception is captured into the job row (retried up to
MAX_ATTEMPTS), never lost in a thread. Closing stops the worker thread after
its current job (or at that job's next ``checkpoint()``, queueing it again)
and closes the store only once the thread has ended: the rest wait in the
store for its next opening. Handlers live in write/ and are named
here by import path, so this module imports none of them; the extract handler
queues its follow-ups with the functions below.
"""

from __future__ import annotations

import importlib
import logging
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from .model import Job, content_hash

if TYPE_CHECKING:
    from .core import Core
    from .store.base import Store

log = logging.getLogger("archivist.jobs")

Handler = Callable[["Core", dict], dict]

# kind -> "module:function", imported when first run (keeps optional parts lazy).
# Order matters within a round: claims are reconciled before people are compared,
# entities exist before dossiers, persons before key info.
HANDLERS: dict[str, str] = {
    "extract": "archivist.write.extract_job:run_extract",
    "reconcile": "archivist.write.reconcile_job:run_reconcile",
    "people": "archivist.write.people:run_people",
    "scenes": "archivist.write.consolidate:run_scenes",
    "summaries": "archivist.write.consolidate:run_summaries",
    "dossiers": "archivist.write.consolidate:run_dossiers",
    "key_info": "archivist.write.consolidate:run_key_info",
    "usefulness": "archivist.write.consolidate:run_usefulness",
    "vector_index": "archivist.write.consolidate:run_vector_index",
    "term_counts": "archivist.write.consolidate:run_term_counts",
}
ROUND = tuple(k for k in HANDLERS if k != "extract")  # the kinds of a consolidation round
PER_CONVERSATION = ("reconcile", "scenes", "summaries", "dossiers")
MAX_ATTEMPTS = 3
LEASE_SECONDS = 600.0
RETRY_BACKOFF = 30.0  # seconds before a failed job's first retry; doubles each attempt


class JobInterrupted(BaseException):
    """Raised by ``checkpoint()`` in a job whose runner is stopping; the runner puts the
    job back on the queue unrun. A BaseException (like asyncio's CancelledError), so a
    handler's ``except Exception`` around one step does not swallow it."""


_current = threading.local()  # .stop: the stop event of the job this thread runs, if any


def checkpoint() -> None:
    """A point in a long job where it may stop (between transactions: every handler is
    idempotent, so the next run redoes or skips what this one did); raises
    JobInterrupted once the background runner is stopping, else does nothing."""
    stop = getattr(_current, "stop", None)
    if stop is not None and stop.is_set():
        raise JobInterrupted


def handler(kind: str) -> Handler:
    """The function that runs jobs of ``kind``."""
    module, _, name = HANDLERS[kind].partition(":")
    return getattr(importlib.import_module(module), name)


def enqueue_round(store: Store, conversations: Sequence[str], tag: str) -> list[int]:
    """Queue one round of every job kind; ``tag`` names the round (idempotency key)."""
    ids: list[int | None] = []
    for kind in ROUND:
        if kind in PER_CONVERSATION:
            for cid in conversations:
                ids.append(store.enqueue_job(kind, f"{cid}@{tag}", {"conversation": cid}))
        else:
            ids.append(store.enqueue_job(kind, f"*@{tag}", {}))
    return [i for i in ids if i is not None]


# What shows current facts as a digest, refreshed when reconciliation on write closed one.
REFRESH = ("dossiers", "key_info")


def enqueue_refresh(store: Store, conversations: Sequence[str], tag: str) -> list[int]:
    """Queue rewriting the digests of ``conversations`` (dossiers, key info) now that a
    fact they may show no longer holds; each rewrites only what changed (its hash)."""
    ids = [
        store.enqueue_job(kind, f"{cid}@{tag}", {"conversation": cid})
        for cid in conversations
        for kind in REFRESH
    ]
    return [i for i in ids if i is not None]


def enqueue_extract(
    store: Store, conversation: str, size: int, not_before: float | None = None
) -> int | None:
    """Queue reading ``conversation`` as it stands at ``size`` messages (idempotent);
    with ``not_before`` (epoch seconds), the check that reads a held tail once the chat
    went idle."""
    if not_before is None:
        key, payload = f"{conversation}@{size}", {"conversation": conversation}
    else:
        key, payload = f"{conversation}@{size}@idle", {"conversation": conversation, "idle": 1}
    return store.enqueue_job("extract", key, payload, not_before)


def queue_consolidation(core: Core, conversations: Sequence[str]) -> bool:
    """Queue a round for those of ``conversations`` with ``consolidate_every`` new
    messages since their last round; whether one was queued."""
    store = core.store
    due: dict[str, int] = {}
    for cid in dict.fromkeys(conversations):
        n = len(store.existing_hashes(cid))  # this conversation only, not the store
        mark = int(store.meta(f"consolidated:{cid}") or 0)
        if n - mark >= core.settings.consolidate_every:
            due[cid] = n
            store.set_meta(f"consolidated:{cid}", str(n))
        elif n and not mark:
            # a chat too short for a round yet (a user's many short chats through the
            # proxy) still gives its people key info, which their next chat's context
            # carries; the job rewrites nothing when the facts it shows did not change,
            # and the first round writes the model's digest over it
            payload = {"conversation": cid, "plain": 1}  # no model call per short chat
            store.enqueue_job("key_info", f"{cid}@{n}@young", payload)
    if due:
        # The round's name covers which conversations at which size: a later round of
        # other conversations must not collide with it (its global jobs would be lost).
        tag = content_hash(*(f"{c}:{n}" for c, n in sorted(due.items())))[:16]
        enqueue_round(store, list(due), f"m{tag}")
    return bool(due)


class JobRunner:
    """Enqueues consolidation rounds and runs queued jobs, inline or on a worker thread."""

    def __init__(
        self,
        core: Core,
        lease_s: float = LEASE_SECONDS,
        handlers: dict[str, Handler] | None = None,
    ) -> None:
        self.core = core
        self.lease_s = lease_s
        self.handlers = dict(handlers or {})  # kind -> function, overriding HANDLERS
        self._wake = threading.Event()
        self._stop = threading.Event()  # the current loop thread's: set, it ends after its job
        self._thread: threading.Thread | None = None
        self._live: set[threading.Thread] = set()  # loop threads not ended (a stopped one
        # may still be finishing its job while a newer one runs)
        self._guard = threading.Lock()
        self._closing = False  # close() was called: no new thread; the last one closes the store
        self._store_closed = False
        self._run_lock = threading.Lock()

    def enqueue_round(self, conversations: Sequence[str], tag: str) -> list[int]:
        """Queue one round of every job kind (see ``enqueue_round``) and wake the worker."""
        ids = enqueue_round(self.core.store, conversations, tag)
        self._wake.set()
        return ids

    def enqueue_extract(
        self, conversation: str, size: int, not_before: float | None = None
    ) -> int | None:
        """Queue reading ``conversation`` (see ``enqueue_extract``) and wake the worker."""
        job = enqueue_extract(self.core.store, conversation, size, not_before)
        self._wake.set()
        return job

    def queue_consolidation(self, conversations: Sequence[str]) -> bool:
        """Queue a round for the conversations that are due (``queue_consolidation``)."""
        queued = queue_consolidation(self.core, conversations)
        if queued:
            self._wake.set()
        return queued

    def run_pending(self, limit: int | None = None) -> list[Job]:
        """Run queued jobs in order until none is left (or ``limit`` ran); returns them."""
        return self._run_jobs(limit, None)

    def _run_jobs(self, limit: int | None, stop: threading.Event | None) -> list[Job]:
        """``run_pending``, ending early once ``stop`` is set: the check comes before a job
        is taken, so a job is never left half run; the rest stay queued (durable)."""
        done: list[Job] = []
        with self._run_lock:  # one runner at a time per process keeps rounds in order
            while limit is None or len(done) < limit:
                if stop is not None and stop.is_set():
                    break
                now = self.core.clock().timestamp()
                job = self.core.store.take_job(now, self.lease_s, MAX_ATTEMPTS)
                if job is None:
                    break
                done.append(self._run(job, stop))
        return done

    def _run(self, job: Job, stop: threading.Event | None = None) -> Job:
        store = self.core.store
        _current.stop = stop  # what checkpoint() in the handler looks at
        try:
            run = self.handlers.get(job.kind) or handler(job.kind)
            result = run(self.core, dict(job.payload)) or {}
        except JobInterrupted:
            store.release_job(job.id)
            log.info("job %s %s stopped at a checkpoint; queued again", job.kind, job.key)
            return Job(**{**job.__dict__, "status": "queued", "attempts": job.attempts - 1})
        except Exception as e:  # noqa: BLE001 - captured into the job row, retried, surfaced
            error = f"{type(e).__name__}: {e}"
            last = job.attempts >= MAX_ATTEMPTS
            backoff = RETRY_BACKOFF * 2 ** (job.attempts - 1)
            retry_at = None if last else self.core.clock().timestamp() + backoff
            store.finish_job(job.id, "failed" if last else "queued", {}, error, retry_at)  # type: ignore[arg-type]
            log.warning("job %s %s failed (attempt %d): %s", job.kind, job.key, job.attempts, error)
            log.debug("%s", traceback.format_exc())
            return Job(**{**job.__dict__, "status": "failed" if last else "queued", "error": error})
        finally:
            _current.stop = None
        status = "skipped" if "skipped" in result else "done"
        store.finish_job(job.id, status, result)  # type: ignore[arg-type]
        return Job(**{**job.__dict__, "status": status, "result": result})

    # -- background mode -------------------------------------------------------------

    def start(self) -> None:
        """Run jobs on a daemon thread as they are enqueued (servers: never block a chat)."""
        with self._guard:
            if self._closing:  # closed (or closing): jobs wait in the store for its next opening
                return
            if self._thread is not None and self._thread.is_alive() and not self._stop.is_set():
                return
            stop = self._stop = threading.Event()  # a stopped thread keeps its own, set
            self._thread = threading.Thread(
                target=self._loop, args=(stop,), name="archivist-jobs", daemon=True
            )
            self._live.add(self._thread)
            self._wake.set()  # first run what is already queued (left by an earlier process)
            self._thread.start()  # under the guard: stop() never joins an unstarted thread

    def _loop(self, stop: threading.Event) -> None:
        try:
            while not stop.is_set():
                self._wake.wait(timeout=5.0)
                self._wake.clear()
                if stop.is_set():
                    break
                try:
                    self._run_jobs(None, stop)
                except Exception:  # noqa: BLE001 - the store failed; keep the worker alive
                    log.exception("job worker: store error; retrying in 5 s")
        finally:
            with self._guard:
                self._live.discard(threading.current_thread())
                last = self._closing and not self._live
            if last:  # close() timed out waiting for this thread: the store closes now
                self._close_store()

    def stop(self, timeout: float = 30.0) -> bool:
        """Stop the worker after its current job, or at that job's next ``checkpoint()``
        (then it is queued again, like the jobs not yet taken); whether every loop thread
        has ended within ``timeout`` seconds."""
        with self._guard:
            self._stop.set()
            threads = [t for t in self._live if t is not threading.current_thread()]
        self._wake.set()
        deadline = time.monotonic() + timeout
        for t in threads:
            t.join(max(0.0, deadline - time.monotonic()))
        return not any(t.is_alive() for t in threads)

    def close(self, timeout: float = 30.0) -> bool:
        """Stop the worker, then close the store; whether it was closed now.

        A job still running after ``timeout`` keeps the store open (closing SQLite
        connections under a running query crashes the process): its thread closes
        the store when that job ends, and no further job is taken.
        """
        with self._guard:
            self._closing = True
        if self.stop(timeout):
            self._close_store()
            return True
        log.warning(
            "a background job is still running after %.1f s; the store closes when it ends",
            timeout,
        )
        return False

    def _close_store(self) -> None:
        """Close the store once, whichever of close() and the last loop thread comes first."""
        with self._guard:
            if self._store_closed:
                return
            self._store_closed = True
        self.core.store.close()
