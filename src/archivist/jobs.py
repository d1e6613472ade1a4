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
MAX_ATTEMPTS), never lost in a thread. Handlers live in write/ and are named
here by import path, so this module imports none of them; the extract handler
queues its follow-ups with the functions below.
"""

from __future__ import annotations

import importlib
import logging
import threading
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
}
ROUND = tuple(k for k in HANDLERS if k != "extract")  # the kinds of a consolidation round
PER_CONVERSATION = ("reconcile", "scenes", "summaries", "dossiers")
MAX_ATTEMPTS = 3
LEASE_SECONDS = 600.0
RETRY_BACKOFF = 30.0  # seconds before a failed job's first retry; doubles each attempt


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
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
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
        done: list[Job] = []
        with self._run_lock:  # one runner at a time per process keeps rounds in order
            while limit is None or len(done) < limit:
                now = self.core.clock().timestamp()
                job = self.core.store.take_job(now, self.lease_s, MAX_ATTEMPTS)
                if job is None:
                    break
                done.append(self._run(job))
        return done

    def _run(self, job: Job) -> Job:
        store = self.core.store
        try:
            run = self.handlers.get(job.kind) or handler(job.kind)
            result = run(self.core, dict(job.payload)) or {}
        except Exception as e:  # noqa: BLE001 - captured into the job row, retried, surfaced
            error = f"{type(e).__name__}: {e}"
            last = job.attempts >= MAX_ATTEMPTS
            backoff = RETRY_BACKOFF * 2 ** (job.attempts - 1)
            retry_at = None if last else self.core.clock().timestamp() + backoff
            store.finish_job(job.id, "failed" if last else "queued", {}, error, retry_at)  # type: ignore[arg-type]
            log.warning("job %s %s failed (attempt %d): %s", job.kind, job.key, job.attempts, error)
            log.debug("%s", traceback.format_exc())
            return Job(**{**job.__dict__, "status": "failed" if last else "queued", "error": error})
        status = "skipped" if "skipped" in result else "done"
        store.finish_job(job.id, status, result)  # type: ignore[arg-type]
        return Job(**{**job.__dict__, "status": status, "result": result})

    # -- background mode -------------------------------------------------------------

    def start(self) -> None:
        """Run jobs on a daemon thread as they are enqueued (servers: never block a chat)."""
        if self._thread is not None and self._thread.is_alive():
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="archivist-jobs", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(timeout=5.0)
            self._wake.clear()
            if self._stop.is_set():
                break
            try:
                self.run_pending()
            except Exception:  # noqa: BLE001 - the store failed; keep the worker alive
                log.exception("job worker: store error; retrying in 5 s")

    def stop(self, timeout: float = 30.0) -> None:
        """Stop the worker after its current job (unfinished jobs stay queued)."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None
