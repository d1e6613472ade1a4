"""The HTTP server: a REST API over MemoryService plus the OpenAI-compatible proxy.

``create_app(settings)`` builds a FastAPI app (OpenAPI at /openapi.json, docs
at /docs). Every route needs an API key (``Authorization: Bearer KEY`` or
``X-API-Key: KEY``) that maps to a tenant; each tenant has its own store, so
one tenant never reads or changes another's memory. MemoryService is
synchronous (SQLite): REST routes are plain ``def`` functions, which FastAPI
runs in its threadpool, so the event loop never blocks.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections import Counter, defaultdict
from contextlib import asynccontextmanager
from dataclasses import asdict
from datetime import datetime
from http import HTTPStatus
from pathlib import Path
from typing import Annotated, Any

from fastapi import Depends, FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BaseModel, Field
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException

from ..config import Settings
from ..errors import (
    ArchivistError,
    InputError,
    NotFound,
)
from ..lang.text import person_key
from ..model import parse_at
from .auth import actor, as_user, caller, own_conversation, own_messages, tenant_id
from .docs import add_offline_docs
from .guard import RequestGuard
from .limits import AuthFailures, BodyLimit
from .settings import ServerSettings, default_data_dir
from .statuses import status_for
from .tenants import Caller, MemoryFactory, Tenant, TenantRegistry, default_memory_factory
from .ui import add_ui

__all__ = ["ServerSettings", "create_app", "default_data_dir", "status_for", "tenant_id"]

log = logging.getLogger("archivist.server")


# -- errors and authentication ------------------------------------------------------------


async def _archivist_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ArchivistError)
    body = {"error": {"type": type(exc).__name__, "message": str(exc)}}
    return JSONResponse(body, status_code=status_for(exc))


async def _invalid_request(request: Request, exc: Exception) -> JSONResponse:
    """A body FastAPI could not validate: 422 with the common error body, one line naming
    the first field that failed (the values are not echoed: NaN is not JSON)."""
    assert isinstance(exc, RequestValidationError)
    first = exc.errors()[0] if exc.errors() else {}
    where = ".".join(str(p) for p in first.get("loc", ()) if p != "body") or "body"
    message = f"{where}: {first.get('msg', 'invalid request')}"
    return JSONResponse({"error": {"type": "InputError", "message": message}}, status_code=422)


async def _http_error(request: Request, exc: Exception) -> JSONResponse:
    """FastAPI's own refusals (no key, no route, a body it cannot parse) in the common
    error body, with their headers (``WWW-Authenticate``, ``Retry-After``)."""
    assert isinstance(exc, StarletteHTTPException)
    status = exc.status_code
    kind = "InputError" if status == 400 else HTTPStatus(status).phrase.title().replace(" ", "")
    message = str(exc.detail)
    if isinstance(exc.__cause__, RecursionError) or isinstance(exc.__context__, RecursionError):
        message = "request JSON is nested too deeply"
    body = {"error": {"type": kind, "message": message}}
    return JSONResponse(body, status_code=status, headers=getattr(exc, "headers", None))


async def _too_deep(request: Request, exc: Exception) -> JSONResponse:
    """JSON nested deeper than Python's parser recurses: a bad request, not a crash."""
    message = "request JSON is nested too deeply"
    return JSONResponse({"error": {"type": "InputError", "message": message}}, status_code=400)


def current_tenant(request: Request, tid: Annotated[str, Depends(tenant_id)]) -> Tenant:
    """The caller's own Tenant (its store opened at start or on first use)."""
    return request.app.state.registry.tenant(tid)


TenantDep = Annotated[Tenant, Depends(current_tenant)]


def caller_tenant(
    request: Request, who: Annotated[Caller, Depends(caller)]
) -> tuple[Tenant, Caller]:
    """The caller's Tenant and who it is: for the routes a user-bound key may use."""
    return request.app.state.registry.tenant(who.tenant), who


CallerDep = Annotated[tuple[Tenant, Caller], Depends(caller_tenant)]


# -- request bodies (they document the API in /docs) ---------------------------------------


class AttachmentIn(BaseModel):
    kind: str
    caption: str = ""
    url: str = ""


class MessageIn(BaseModel):
    """One message in the JSONL input format (README "Input formats")."""

    conversation: str
    id: str
    speaker: str
    text: str
    timestamp: str = Field(description="ISO 8601; no offset means UTC")
    session: int = 1
    role: str = "user"
    addressees: list[str] = []
    attachments: list[AttachmentIn] = []


class AddIn(BaseModel):
    messages: list[MessageIn]


AT_HELP = (
    "Memory as it stood at this time: ISO 8601 with a timezone, e.g. 2023-06-01T12:00Z, "
    "or a date, 2023-06-01, read as that day ended in UTC (default: now). Nothing said "
    "later counts; claims that stopped holding are history."
)
AtQuery = Annotated[str | None, Query(description=AT_HELP)]


class AskIn(BaseModel):
    question: str
    person: str | None = None
    conversation: str | None = None
    k: int = 10
    at: str | None = Field(None, description=AT_HELP)


class ContextIn(BaseModel):
    turn: str
    person: str | None = None
    conversation: str | None = None
    budget_tokens: int = 1500
    at: str | None = Field(None, description=AT_HELP)


# -- helpers ---------------------------------------------------------------------------------


def add_jsonl(tenant: Tenant, text: str, source: str, who: Caller | None = None) -> dict:
    """Parse JSONL (all or nothing) and store it; extraction follows in the background.

    ``who``: a caller whose key is bound to one user adds only that user's turns.
    """
    from ..load import parse

    convs = parse(text, "jsonl", source=source)
    if who is not None:
        own_messages(tenant.memory.store, who, convs)
    results = tenant.add(convs)
    return {"results": [asdict(r) for r in results]}


def _conversations_of(tenant: Tenant, user: str) -> list[str]:
    """The conversations ``user`` took part in: all a key bound to them may read."""
    me = person_key(user)
    return [
        c["id"]
        for c in tenant.call(tenant.memory.conversations)
        if me in {person_key(p) for p in c["participants"]}
    ]


def _jsonable(value: Any) -> Any:
    """Dataclasses, tuples and datetimes as JSON values."""
    from fastapi.encoders import jsonable_encoder

    return jsonable_encoder(value, custom_encoder={datetime: datetime.isoformat})


# -- the app -------------------------------------------------------------------------------


def _warm(settings: Settings) -> None:
    """Load before the first chat what its turn would load then: the embedding model
    (shared by tenants), and the module that declares a chat's user on its first turn
    (35 ms of imports, paid by every process's first chat while the others queued)."""
    from ..write import people  # noqa: F401

    if settings.embedder != "local":
        return
    try:
        from ..embed import get_embedder

        get_embedder(settings).embed_batch(["warm up"])
    except Exception:  # noqa: BLE001 - chats still forward; the error shows again on use
        log.exception("could not load the embedding model at startup")


def create_app(
    settings: ServerSettings | None = None,
    *,
    memory_factory: MemoryFactory | None = None,
    upstream_transport: Any = None,
) -> FastAPI:
    """The server: REST under /v1/memory, the proxy at /v1/chat/completions and /v1/models.

    ``memory_factory(tenant, path)`` builds each tenant's MemoryService (tests
    inject fakes); ``upstream_transport`` is an httpx transport for the upstream
    (tests use MockTransport or an ASGITransport to a fake).
    """
    from . import proxy

    settings = settings or ServerSettings()
    own_stores = memory_factory is None  # built from settings.memory (not a test's fakes)
    # A custom factory's stores cannot be rebuilt in another process: threads then.
    worker = None
    if settings.background == "process" and own_stores:
        from .worker import WorkerProcess

        memory_factory = default_memory_factory(settings.memory, "manual")
        worker = WorkerProcess(settings.memory, settings.resolved_data_dir())
    memory_factory = memory_factory or default_memory_factory(settings.memory)
    registry = TenantRegistry(
        settings.keys,
        settings.resolved_data_dir(),
        memory_factory,
        open_access=settings.open_access,
        extract_delay=settings.extract_delay,
        wake=worker.wake if worker else None,
    )
    if worker is not None:
        worker.tenants = registry.tenant_ids()
    if not settings.keys and not settings.open_access:
        log.warning("no API keys configured: every request will be refused (401)")

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        if worker is not None:
            worker.start()
        if own_stores:
            await run_in_threadpool(_warm, settings.memory)
            await run_in_threadpool(registry.warm)
        yield
        await app.state.upstream.aclose()
        registry.close()
        if worker is not None:
            worker.stop()

    app = FastAPI(
        title="archivist",
        summary="Long-term, speaker-attributed memory: REST API and OpenAI-compatible proxy.",
        version="0.1.0",
        lifespan=lifespan,
        docs_url=None,  # served from packaged assets below: no CDN
        redoc_url=None,
        openapi_url="/openapi.json" if settings.serve_api else None,
    )
    app.state.settings = settings
    app.state.registry = registry
    app.state.worker = worker  # None: background work on the tenants' threads
    app.state.upstream = proxy.upstream_client(settings, upstream_transport)
    # per tenant id: chats forwarded unstored because its memory failed before a turn
    # existed (its store would not open), and upstream errors; shown in its status
    app.state.proxy_counters = defaultdict(Counter)
    # per tenant id: chats answered upstream and their tokens (``llm.chat`` in its status)
    app.state.chat_usage = defaultdict(Counter)
    app.state.auth_failures = AuthFailures(settings.auth_failures_per_minute)
    _guard(app, settings)
    if settings.serve_api:
        app.include_router(memory_router())
        from .memories_routes import memories_router  # mem0-shaped routes and exact deletes

        app.include_router(memories_router())
        app.include_router(proxy.router)
        add_offline_docs(app)
    add_ui(app)
    return app


def _guard(app: FastAPI, settings: ServerSettings) -> None:
    """What stands before every handler (request size, foreign Hosts, cross-site writes)
    and how refusals and errors become the common error body."""
    app.add_middleware(BodyLimit, limit=settings.max_request_bytes)
    app.add_middleware(  # outermost: nothing runs for a foreign Host or a cross-site write
        RequestGuard,
        check_host=settings.open_access or bool(settings.allowed_hosts),
        allowed_hosts=settings.allowed_hosts,
        allowed_origins=settings.allowed_origins,
    )
    app.add_exception_handler(ArchivistError, _archivist_error)
    app.add_exception_handler(RequestValidationError, _invalid_request)
    app.add_exception_handler(RecursionError, _too_deep)
    app.add_exception_handler(StarletteHTTPException, _http_error)


def memory_router():
    """The REST routes; each one calls the caller's own MemoryService and nothing else."""
    from fastapi import APIRouter

    r = APIRouter(prefix="/v1/memory", tags=["memory"])

    @r.post("/messages")
    def add_messages(scoped: CallerDep, body: AddIn) -> dict:
        """Store messages (idempotent by conversation, id and content hash)."""
        tenant, who = scoped
        lines = "\n".join(json.dumps(m.model_dump()) for m in body.messages)
        if not lines:
            raise InputError("no messages")
        return add_jsonl(tenant, lines, "request", who)

    @r.get("/search")
    def search(
        scoped: CallerDep,
        q: str,
        person: str | None = None,
        conversation: str | None = None,
        speaker: str | None = None,
        k: Annotated[int, Query(ge=1, le=1000)] = 10,
        at: AtQuery = None,
    ) -> list[dict]:
        """Hybrid search over messages and claims, with provenance."""
        tenant, who = scoped
        when = parse_at(at)
        person = as_user(who, "person", person)
        own_conversation(tenant.memory.store, who, conversation)
        hits = tenant.call(
            tenant.memory.search,
            q,
            person=person,
            conversation=conversation,
            speaker=speaker,
            k=k,
            at=when,
        )
        return [h.to_dict() for h in hits]

    _answer_routes(r)
    _read_routes(r)
    _admin_routes(r)
    return r


def _answer_routes(r) -> None:
    """What reaches an assistant: answers, context for a turn, a person's profile."""

    @r.post("/ask")
    def ask(scoped: CallerDep, body: AskIn) -> dict:
        """An answer with evidence ids, speaker and confidence, or an abstention."""
        tenant, who = scoped
        when = parse_at(body.at)
        own_conversation(tenant.memory.store, who, body.conversation)
        found = tenant.call(
            tenant.memory.ask,
            body.question,
            person=as_user(who, "person", body.person),
            conversation=body.conversation,
            k=body.k,
            at=when,
        )
        return found.to_dict()

    @r.post("/context")
    def context(scoped: CallerDep, body: ContextIn) -> dict:
        """Memory context for an assistant turn, within a token budget."""
        tenant, who = scoped
        when = parse_at(body.at)
        own_conversation(tenant.memory.store, who, body.conversation)
        ctx = tenant.context(
            body.turn,
            person=as_user(who, "person", body.person),
            conversation=body.conversation,
            budget_tokens=body.budget_tokens,
            at=when,
        )
        return ctx.to_dict()

    @r.get("/profile")
    def profile(scoped: CallerDep, person: str, at: AtQuery = None) -> dict:
        """What holds for a person at a time (default now), grouped: home, work,
        relationships, family, health and diet, pets, possessions and hobbies, plans,
        other; each with since when, who said it, evidence and the values it replaced.
        A user-bound key reads only its own user's profile, from their conversations."""
        tenant, who = scoped
        when = parse_at(at)
        person = as_user(who, "person", person) or person
        convs = None if who.user is None else _conversations_of(tenant, who.user)
        found = tenant.call(tenant.memory.profile, person, at=when, conversations=convs)
        return found.to_dict()


def _read_routes(r) -> None:
    """Listings of derived memory: claims, entities, people, timeline, conflicts, decisions."""

    @r.get("/claims")
    def claims(
        tenant: TenantDep,
        person: str | None = None,
        conversation: str | None = None,
        limit: Annotated[int, Query(ge=1, le=10000)] = 100,
    ) -> list[dict]:
        found = tenant.call(
            tenant.memory.claims, person=person, conversation=conversation, limit=limit
        )
        return _jsonable(found)

    @r.get("/entities")
    def entities(
        tenant: TenantDep,
        conversation: str | None = None,
        person: str | None = None,
        name: str | None = None,
        limit: Annotated[int, Query(ge=1, le=10000)] = 1000,
    ) -> list[dict]:
        found = tenant.call(
            tenant.memory.entities, conversation=conversation, person=person, name=name, limit=limit
        )
        return _jsonable(found)

    @r.get("/people")
    def people(tenant: TenantDep) -> list[dict]:
        return _jsonable(tenant.call(tenant.memory.persons))

    @r.get("/timeline")
    def timeline(
        tenant: TenantDep, entity: str, conversation: str | None = None, at: AtQuery = None
    ) -> list[dict]:
        when = parse_at(at)
        found = tenant.call(tenant.memory.timeline, entity, conversation=conversation, at=when)
        return [{"claim": _jsonable(c), "history": _jsonable(h)} for c, h in found]

    @r.get("/conflicts")
    def conflicts(
        tenant: TenantDep, conversation: str | None = None, subject: str | None = None
    ) -> list[dict]:
        found = tenant.call(tenant.memory.conflicts, conversation=conversation, subject=subject)
        return _jsonable(found)

    @r.get("/decisions")
    def decisions(tenant: TenantDep, kind: str | None = None) -> list[dict]:
        return _jsonable(tenant.call(tenant.memory.decisions, kind))

    @r.get("/conversations")
    def conversations(tenant: TenantDep) -> list[dict]:
        return _jsonable(tenant.call(tenant.memory.conversations))

    @r.get("/audit")
    def audit(tenant: TenantDep, limit: Annotated[int, Query(ge=1, le=10000)] = 100) -> list[dict]:
        """Deletions, newest first: who (rest (address), browser, mcp, cli, ...), when, what
        kind and how many; never the deleted text."""
        return [e.to_dict() for e in tenant.call(tenant.memory.audit_log, limit)]


_NDJSON_BODY = {
    "requestBody": {
        "required": True,
        "content": {"application/x-ndjson": {"schema": {"type": "string"}}},
    }
}


def _admin_routes(r) -> None:
    """Deletion, export/import, consolidation and status."""

    @r.delete("/conversations/{conversation:path}")
    def delete_conversation(request: Request, tenant: TenantDep, conversation: str) -> dict:
        """Remove a conversation from every index (its id may hold "/": team/general)."""
        return {"deleted": tenant.delete(conversation=conversation, actor=actor(request))}

    @r.delete("/people/{person:path}")
    def delete_person(
        request: Request, tenant: TenantDep, person: str, received: bool = False
    ) -> dict:
        """Remove what a person said and every claim about them; ``received``: also the
        messages others sent them."""
        return {"deleted": tenant.delete(person=person, received=received, actor=actor(request))}

    @r.get("/export", response_class=StreamingResponse)
    def export(tenant: TenantDep, conversation: str | None = None) -> StreamingResponse:
        """Messages (and declared identities) as JSON Lines in the documented input format."""
        known = {c["id"] for c in tenant.call(tenant.memory.conversations)}
        if conversation and conversation not in known:
            raise NotFound(f"no conversation {conversation!r}")
        lines = tenant.call(lambda: list(tenant.memory.export_jsonl(conversation)))
        return StreamingResponse(iter(lines), media_type="application/x-ndjson")

    @r.post("/import", openapi_extra=_NDJSON_BODY)
    async def import_(request: Request, tenant: TenantDep) -> dict:
        """Store an export (JSON Lines); nothing is stored if any line is bad."""
        from ..load._common import decode

        text = decode(await request.body(), "import")
        return await run_in_threadpool(tenant.call, tenant.memory.import_jsonl, text, "import")

    @r.post("/consolidate", status_code=202)
    def consolidate(tenant: TenantDep, conversation: str | None = None) -> dict:
        """Queue extraction and a consolidation round; they run off the request path."""
        convs = [c["id"] for c in tenant.call(tenant.memory.conversations)]
        if conversation is not None:
            if conversation not in convs:
                raise NotFound(f"no conversation {conversation!r}")
            convs = [conversation]
        tenant.consolidate(convs)
        return {"scheduled": convs}

    @r.get("/status")
    def status(tenant: TenantDep, request: Request) -> dict:
        """Counts, the job queue and recent background errors of the caller's memory, and
        where background work runs (the worker process: alive, restarts); ``process``
        is the server process that answered (``serve --workers N`` runs N)."""
        worker = request.app.state.worker
        where = (
            {"mode": "process", "alive": worker.alive(), "restarts": worker.restarts}
            if worker is not None
            else {"mode": "thread"}
        )
        from .proxy import failures

        proxy = {**failures(tenant), **request.app.state.proxy_counters[tenant.id]}
        chat = request.app.state.chat_usage[tenant.id]
        llm = {
            "archivist": _archivist_usage(tenant),
            "chat": {k: chat[k] for k in ("calls", "input_tokens", "output_tokens")},
        }
        body = {
            **tenant.status(),
            "process": os.getpid(),
            "background": where,
            "proxy": proxy,
            "llm": llm,
        }
        return _without_paths(_jsonable(body), request.app.state.settings.resolved_data_dir())


def _archivist_usage(tenant: Tenant) -> dict:
    """The background archivists' LLM use over the store's life (the worker process's
    calls included), summed over its tasks; the chat's own is counted apart."""
    memory = tenant.memory
    totals = {"calls": 0, "input_tokens": 0, "output_tokens": 0, "failures": 0}
    for tasks in memory.store.llm_usage().values():
        for counts in tasks.values():
            for k in totals:
                totals[k] += counts.get(k, 0)
    return {"model": memory.llm.name if memory.llm else None, **totals}


ABSOLUTE_PATH = re.compile(r"(?<![\w:/.])/(?:[^\s/'\":,;()]+/)+([^\s/'\":,;()]*)")


def _without_paths(value: Any, data_dir: Path) -> Any:
    """A status as a tenant may see it: stores and files by name, never a server path
    (a SQLite store's path becomes ``<tenant>.db``, a PostgreSQL one its schema)."""
    if isinstance(value, dict):
        return {k: _without_paths(v, data_dir) for k, v in value.items()}
    if isinstance(value, list):
        return [_without_paths(v, data_dir) for v in value]
    if not isinstance(value, str):
        return value
    if " schema=" in value and "dbname=" in value:  # a PostgreSQL store (no password in it)
        return "schema=" + value.rsplit("schema=", 1)[1]
    for root in dict.fromkeys((str(data_dir.resolve()), str(data_dir))):
        value = value.replace(root + "/", "")
    return ABSOLUTE_PATH.sub(r"\1", value)
