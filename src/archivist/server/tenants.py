"""Tenants: API keys map to tenant ids; each tenant has its own store and MemoryService.

Isolation is by construction: tenant ``t`` reads and writes only
``<data_dir>/t.db`` (or its own PostgreSQL schema), and the only way to reach
it is a key that maps to ``t``. Keys are compared in constant time. Writes
that need not block a request run after it: assistant replies on the
tenant's writer thread; extraction and consolidation as durable jobs in the
worker process (``server/worker.py``), or on the tenant's threads when there
is none. Their errors are logged and counted, never dropped silently.

Key sources: ``ARCHIVIST_SERVER_KEYS="tenant:key,other:key2"`` or a JSON file
``{"tenant": "key"}`` / ``{"tenant": ["key1", "key2"]}``. A key may be bound to
one user of its tenant (``tenant/user:key``, or ``{"key": ..., "user": ...}`` in
the file): requests with it speak as that user only and read only what that
user sent or received (``Caller``; server/auth.py enforces it).
"""

from __future__ import annotations

import hmac
import json
import logging
import re
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any, NamedTuple

from ..config import Settings
from ..errors import ConfigError
from ..model import Conversation, Message, text_problem
from ..read.context import Context
from ..service import MemoryService
from ..store.base import AddResult
from ..write.sessions import next_session

log = logging.getLogger("archivist.server")

TENANT_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")  # safe as a file name
OPEN_TENANT = "default"  # the one tenant of a server started without keys (--open)

MemoryFactory = Callable[[str, Path], MemoryService]
WARM_TENANTS = 8  # tenants a server start opens ahead of their first chat (TenantRegistry.warm)
MIN_KEY_LENGTH = 16  # characters; a short key is a guessable one


class Key(NamedTuple):
    """An API key, the tenant it opens, and the one user it is bound to (None: any)."""

    key: str
    tenant: str
    user: str | None = None


class Caller(NamedTuple):
    """Who a request comes from: its tenant, and the user its key is bound to (None: any)."""

    tenant: str
    user: str | None = None


KeyPairs = tuple[Key, ...]


def parse_keys(spec: str) -> KeyPairs:
    """``"tenant:key,tenant2/user:key2"`` (the env form) into Keys."""
    pairs = []
    for item in (s.strip() for s in spec.split(",")):
        if not item:
            continue
        who, sep, key = item.partition(":")
        if not sep:
            raise ConfigError(f"server key {item!r} is not 'tenant:key' or 'tenant/user:key'")
        tenant, bound, user = who.partition("/")
        pairs.append(Key(key.strip(), tenant.strip(), user.strip() if bound else None))
    return check_keys(pairs)


def load_keys_file(path: str | Path) -> KeyPairs:
    """Read a JSON tenants file: ``{"tenant": "key"}`` or ``{"tenant": ["key", ...]}``."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as e:
        raise ConfigError(f"cannot read tenants file {path}: {e}") from e
    if not isinstance(data, dict):
        raise ConfigError(f"tenants file {path}: expected an object of tenant -> key(s)")
    pairs = []
    for tenant, keys in data.items():
        for key in [keys] if isinstance(keys, str | dict) else keys:
            if isinstance(key, dict) and set(key) <= {"key", "user"} and "key" in key:
                pairs.append(Key(key["key"], tenant, key.get("user")))
            elif isinstance(key, str):
                pairs.append(Key(key, tenant))
            else:
                raise ConfigError(
                    f"tenants file {path}: keys of {tenant!r} must be strings or "
                    '{"key": ..., "user": ...}'
                )
    return check_keys(pairs)


def check_keys(pairs: Sequence[Key]) -> KeyPairs:
    """Refuse unsafe tenant ids, short keys, empty users and a key given twice."""
    seen: set[str] = set()
    for key, tenant, user in pairs:
        if not TENANT_ID.match(tenant):
            raise ConfigError(f"tenant id {tenant!r}: use letters, digits, '-' and '_' (<= 64)")
        if not isinstance(key, str) or len(key) < MIN_KEY_LENGTH:
            raise ConfigError(
                f"the key of tenant {tenant!r} is shorter than {MIN_KEY_LENGTH} characters"
            )
        if user is not None and (
            not isinstance(user, str) or not user.strip() or text_problem(user)
        ):
            raise ConfigError(f"a key of tenant {tenant!r} is bound to an unusable user {user!r}")
        if key in seen:
            raise ConfigError(f"a key of tenant {tenant!r} is given twice")
        seen.add(key)
    return tuple(Key(k, t, u.strip() if u else None) for k, t, u in pairs)


def tenant_settings(settings: Settings, tenant: str, path: Path, consolidate_mode: str) -> Settings:
    """A tenant's own store: ``<data_dir>/<tenant>.db``, or its own PostgreSQL schema
    (``archivist_<tenant>``, or ``<schema>_<tenant>`` when a schema is configured)."""
    kw: dict[str, Any] = {"db_path": path, "consolidate_mode": consolidate_mode}
    if settings.store == "postgres":
        base = settings.pg_schema
        kw["pg_schema"] = f"archivist_{tenant}" if base == "public" else f"{base}_{tenant}"
    return settings.with_(**kw)


def default_memory_factory(
    settings: Settings, consolidate_mode: str = "background"
) -> MemoryFactory:
    """Each tenant's MemoryService: the base settings, its own store; consolidation on a
    thread (``"background"``) or nowhere in this process (``"manual"``: the worker's)."""

    def make(tenant: str, path: Path) -> MemoryService:
        return MemoryService(settings=tenant_settings(settings, tenant, path, consolidate_mode))

    return make


class Tenant:
    """One tenant's memory plus the worker threads that keep slow writes off requests.

    Extraction and consolidation run either in the worker process (``wake`` given:
    they are queued as durable jobs and the process is woken) or on this
    tenant's own threads (tests, custom memory factories).
    """

    def __init__(
        self,
        tenant_id: str,
        memory: MemoryService,
        extract_delay: float = 0.0,
        wake: Callable[[str], None] | None = None,
    ) -> None:
        self.id = tenant_id
        self.memory = memory
        self.extract_delay = extract_delay  # wait this long to batch turns into one extraction
        self.wake = wake  # the worker process's doorbell, or None: threads here
        self.counters: Counter[str] = Counter()
        self.errors: deque[str] = deque(maxlen=20)  # the latest background failures
        self.turn_ms: deque[float] = deque(maxlen=5000)  # context for proxied requests
        self.store_ms: deque[float] = deque(maxlen=5000)  # their log writes (beside upstream)
        self._guard = threading.Lock()
        self._locks: dict[str, threading.Lock] = {}
        self._writes = ThreadPoolExecutor(1, thread_name_prefix=f"archivist-{tenant_id}-writes")
        self._extract = ThreadPoolExecutor(1, thread_name_prefix=f"archivist-{tenant_id}-extract")
        self._pending: set[str] = set()
        self._busy = False
        self._idle = threading.Condition(self._guard)
        self._in_flight = 0

    def lock(self, conversation: str) -> threading.Lock:
        """One lock per conversation: its 'which ids are new' check and its write are atomic."""
        with self._guard:
            return self._locks.setdefault(conversation, threading.Lock())

    def call(self, fn: Callable[..., Any], *args: Any, **kw: Any) -> Any:
        """Run a MemoryService call (the store serialises its own statements across threads)."""
        return fn(*args, **kw)

    def add(
        self, convs: Sequence[Conversation], *, only_new: bool = False, identities: bool = True
    ) -> list[AddResult]:
        """Store messages now (the log is durable before we answer); extract later.

        ``only_new``: skip ids already stored whatever their content (the proxy's
        ids carry a content hash, so a stored id is the same message).
        ``identities=False``: new speakers get their identities from the caller, later
        (``MemoryService.ensure_speakers``).
        """
        results = []
        sizes: dict[str, int] = {}
        for conv in convs:
            with self.lock(conv.id):
                if only_new:
                    stored = self.memory.store.existing_hashes(conv.id)
                    fresh = tuple(m for m in conv.messages if m.id not in stored)
                    if not fresh:
                        results.append(AddResult(conv.id, unchanged=len(conv.messages)))
                        continue
                    conv = replace(conv, messages=self._sessioned(conv.id, fresh, bool(stored)))
                    sizes[conv.id] = len(stored) + len(fresh)
                # Vectors come with extraction, in the worker: no model time on requests.
                results.extend(
                    self.memory.add(conv, extract=False, embed=False, identities=identities)
                )
        self.counters["messages_added"] += sum(r.added for r in results)
        self.schedule([r.conversation for r in results if r.added], sizes)
        return results

    def declare_once(self, conversation: str, name: str, user_id: str) -> None:
        """Declare (conversation, name) the person ``user_id`` (once: MemoryService.
        ensure_declared): the same user in many chats is one person."""
        with self.lock(conversation):
            self.memory.ensure_declared(user_id, conversation, name)

    def _sessioned(
        self, conversation: str, fresh: tuple[Message, ...], has_log: bool
    ) -> tuple[Message, ...]:
        """New turns join the chat's last session, or open one after a long pause, so the
        archivist re-reads one sitting as a chat grows, not the whole chat."""
        # the last message is all next_session reads (the whole log was read each turn)
        log = [m for _, m in self.memory.store.last_messages(conversation, 1)] if has_log else []
        session, start = next_session(log, min(m.timestamp for m in fresh))
        return tuple(replace(m, session=session, session_start=start) for m in fresh)

    def context(self, turn: str, **kw: Any) -> Context:
        """MemoryService.context for a proxied turn."""
        return self.call(self.memory.context, turn, **kw)

    def delete(
        self,
        *,
        conversation: str | None = None,
        person: str | None = None,
        received: bool = False,
        actor: str = "server",
    ) -> int:
        """Delete after queued background work, under the conversation's lock.

        Extraction racing a delete would fail on the messages it lost; deletes
        are rare, so they wait for the queue instead.
        """
        self.drain(30.0)
        if conversation is None:
            return self.call(self.memory.delete, person=person, received=received, actor=actor)
        with self.lock(conversation):
            return self.call(self.memory.delete, conversation=conversation, actor=actor)

    # -- background work --------------------------------------------------------------

    def submit(self, name: str, fn: Callable[[], object]) -> None:
        """Run a quick write (a reply, a context record) after the response, in order."""
        with self._guard:
            self._in_flight += 1
        self._writes.submit(self._guarded, name, fn)

    def schedule(self, conversations: Sequence[str], sizes: dict[str, int] | None = None) -> None:
        """Extract and consolidate these conversations soon.

        Worker process: a durable ``extract`` job per conversation, keyed by its size
        (``sizes``, counted when missing), so a re-sent turn queues nothing. Threads:
        requests coalesce into one run.
        """
        if self.wake is not None:
            for cid in dict.fromkeys(conversations):
                size = (sizes or {}).get(cid)
                if size is None:
                    size = len(self.memory.store.existing_hashes(cid))
                self.memory.jobs.enqueue_extract(cid, size)
            if conversations:
                self.wake(self.id)
            return
        with self._guard:
            self._pending.update(conversations)
            if self._busy or not self._pending:
                return
            self._busy = True
            self._in_flight += 1
        self._extract.submit(self._guarded, "extract", self._extract_pending)

    def _extract_pending(self) -> None:
        while True:
            time.sleep(self.extract_delay)  # busy chats: one run covers many turns
            with self._guard:
                if not self._pending:
                    self._busy = False
                    return
                todo = sorted(self._pending)
                self._pending.clear()
            self.memory.extract(todo)  # beside requests: the store serialises statements
            self.call(self.memory.schedule_consolidation, todo)  # the job worker runs it
            self.counters["extractions"] += 1

    def _guarded(self, name: str, fn: Callable[[], object]) -> None:
        try:
            fn()
        except Exception as e:  # noqa: BLE001 - logged and counted, surfaced by /status
            if name == "extract":
                with self._guard:
                    self._busy = False
            self.counters[f"{name}_failed"] += 1
            self.errors.append(f"{name}: {type(e).__name__}: {e}")
            log.exception("tenant %s: background %s failed", self.id, name)
        finally:
            with self._guard:
                self._in_flight -= 1
                self._idle.notify_all()

    def consolidate(self, conversations: Sequence[str]) -> None:
        """Read new messages, then run a consolidation round now (off the request path)."""
        self.schedule(conversations)
        self.memory.jobs.enqueue_round(list(conversations), f"manual-{time.time_ns()}")
        if self.wake is not None:
            self.wake(self.id)
        else:
            self.memory.jobs.start()

    def drain(self, timeout: float = 60.0) -> bool:
        """Wait until queued background writes, extraction and jobs are done (tests, shutdown).

        With the worker process this includes the tenant's durable queue (a job
        waiting out a retry backoff keeps it from draining until ``timeout``).
        """
        deadline = time.monotonic() + timeout
        with self._guard:
            if not self._idle.wait_for(lambda: self._in_flight == 0, timeout):
                return False
        if self.wake is None:
            return True
        while time.monotonic() < deadline:
            counts = self.memory.job_counts()
            if not counts.get("queued") and not counts.get("running"):
                return True
            time.sleep(0.05)
        return False

    def status(self) -> dict:
        """Counters, the job queue and the latest background errors, for GET /status."""
        return {
            "tenant": self.id,
            "counters": dict(self.counters),
            # proxied requests: context assembly (before forwarding) and the log write
            # (while the upstream answers)
            "turn_memory_ms": _quantiles(self.turn_ms),
            "turn_store_ms": _quantiles(self.store_ms),
            "background_errors": list(self.errors),
            "jobs": self.memory.job_counts(),
            "stats": self.memory.stats(),
        }

    def close(self) -> None:
        """Finish pending writes (replies are never dropped), then close the store."""
        self._writes.shutdown(wait=True)
        self._extract.shutdown(wait=True, cancel_futures=True)  # the log is already durable
        self.memory.close()


def _quantiles(values: Sequence[float]) -> dict:
    ms = sorted(values)
    return {
        "n": len(ms),
        "p50": round(ms[len(ms) // 2], 2) if ms else None,
        "p95": round(ms[min(len(ms) - 1, int(len(ms) * 0.95))], 2) if ms else None,
    }


class TenantRegistry:
    """API key -> tenant id, and each tenant's Tenant, opened at a server's start (``warm``)
    or on first use."""

    def __init__(
        self,
        keys: KeyPairs,
        data_dir: Path,
        memory_factory: MemoryFactory,
        *,
        open_access: bool = False,
        extract_delay: float = 0.0,
        wake: Callable[[str], None] | None = None,
    ) -> None:
        self.extract_delay = extract_delay
        self.wake = wake  # the worker process's doorbell (None: each tenant's threads)
        self._keys = [(k.encode("utf-8"), Caller(t, u)) for k, t, u in (Key(*p) for p in keys)]
        self.data_dir = Path(data_dir)
        self.memory_factory = memory_factory
        self.open_access = open_access and not keys
        self._tenants: dict[str, Tenant] = {}
        self._guard = threading.Lock()

    def authenticate(self, key: str | None) -> Caller | None:
        """Who a key belongs to, or None; every key is compared (constant time)."""
        if self.open_access:
            return Caller(OPEN_TENANT)
        if not key:
            return None
        given = key.encode("utf-8")
        found = None
        for k, caller in self._keys:
            if hmac.compare_digest(k, given):
                found = caller
        return found

    def tenant(self, tenant_id: str) -> Tenant:
        """The tenant's memory, opened once; a failure to open is raised, not cached."""
        if not TENANT_ID.match(tenant_id):
            raise ConfigError(f"bad tenant id {tenant_id!r}")
        with self._guard:
            found = self._tenants.get(tenant_id)
            if found is None:
                self.data_dir.mkdir(parents=True, exist_ok=True)
                memory = self.memory_factory(tenant_id, self.data_dir / f"{tenant_id}.db")
                found = self._tenants[tenant_id] = Tenant(
                    tenant_id, memory, self.extract_delay, self.wake
                )
            return found

    def tenant_ids(self) -> tuple[str, ...]:
        """Every tenant a key (or open access) can reach."""
        ids = {c.tenant for _, c in self._keys} | ({OPEN_TENANT} if self.open_access else set())
        return tuple(sorted(ids))

    def warm(self, most: int = WARM_TENANTS) -> list[str]:
        """Open the first ``most`` tenants the keys reach, with their stores' connections
        (a server start): their first chats then pay neither, which all at once, on a
        small machine, set the slowest turns of a busy start. A tenant that will not
        open is logged and left for its first request, which reports the error. The ids
        opened."""
        opened = []
        for tid in self.tenant_ids()[:most]:
            try:
                self.tenant(tid).memory.store.warm()
            except Exception:  # noqa: BLE001 - the server still starts; requests say why
                log.exception("tenant %s: could not open its memory at startup", tid)
                continue
            opened.append(tid)
        return opened

    def opened(self) -> list[Tenant]:
        with self._guard:
            return list(self._tenants.values())

    def close(self) -> None:
        """Close every opened tenant (pending reply writes finish first)."""
        with self._guard:
            tenants, self._tenants = list(self._tenants.values()), {}
        for t in tenants:
            try:
                t.close()
            except Exception:  # noqa: BLE001 - one tenant's failure must not skip the others
                log.exception("closing tenant %s failed", t.id)
