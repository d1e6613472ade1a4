"""REST routes for memories the way mem0 users know them, and for deletion that means
what it says: ``/v1/memories`` (a memory is a claim) and the ``/v1/memory`` deletes of
one message and of everything (``reset``, with ``confirm``); deleting a person
(``received``) stays beside the conversation delete in app.py.

Thin: each route calls the tenant's MemoryService (or the mem0 facade over it, for
the mem0-shaped bodies) and nothing else. Tenant keys only: a key bound to one user
is refused (403), as for the other routes over the whole tenant. Deletes wait for
queued background work first, as ``Tenant.delete`` does.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from pydantic import BaseModel, Field

from ..errors import InputError, NotFound
from ..mem0 import Memory as Mem0
from ..write.turns import default_conversation
from .auth import actor, tenant_id
from .tenants import Tenant

DRAIN_S = 30.0


def _tenant(request: Request, tid: Annotated[str, Depends(tenant_id)]) -> Tenant:
    """The caller's own Tenant, for a tenant key (as app.current_tenant; no import cycle)."""
    return request.app.state.registry.tenant(tid)


TenantDep = Annotated[Tenant, Depends(_tenant)]


class TurnIn(BaseModel):
    role: str = "user"
    content: str


class MemoriesIn(BaseModel):
    """mem0's add body: messages (or one string) for a user, an agent or a run."""

    messages: list[TurnIn] | str
    user_id: str | None = None
    agent_id: str | None = None
    run_id: str | None = Field(None, description="The conversation (default: user:<user_id>).")
    metadata: dict[str, Any] | None = None
    timestamp: str | float | None = None


class SearchIn(BaseModel):
    """mem0's search body."""

    query: str
    user_id: str | None = None
    agent_id: str | None = None
    run_id: str | None = None
    filters: dict[str, Any] | None = None
    limit: int = Field(100, ge=1, le=10000)
    threshold: float | None = None


class UpdateIn(BaseModel):
    text: str | None = Field(
        None, description="The corrected memory; the old wording stays as history."
    )
    kind: str | None = Field(None, description="The corrected kind (fact, event, plan, ...).")
    subject: str | None = Field(None, description="Who or what the memory is about.")
    valid_from: str | None = Field(None, description='ISO date it holds from; "" clears.')
    valid_to: str | None = Field(None, description='ISO date it holds until; "" clears.')


def _facade(tenant: Tenant) -> Mem0:
    return Mem0(tenant.memory)


def memories_router() -> APIRouter:
    """``/v1/memories`` and the deletes of ``/v1/memory`` (see the module docstring)."""
    r = APIRouter(tags=["memories"])

    @r.post("/v1/memories")
    def add_memories(tenant: TenantDep, body: MemoriesIn) -> dict:
        """Store the messages and extract memories now; mem0's ``{"results": [...]}``."""
        msgs = body.messages
        data = msgs if isinstance(msgs, str) else [m.model_dump() for m in msgs]
        conv = body.run_id or default_conversation(body.user_id, body.agent_id)
        with tenant.lock(conv):
            return _facade(tenant).add(
                data,
                user_id=body.user_id,
                agent_id=body.agent_id,
                run_id=conv,
                metadata=body.metadata,
                timestamp=body.timestamp,
            )

    @r.get("/v1/memories")
    def list_memories(
        tenant: TenantDep,
        user_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
        q: str | None = Query(None, description="Search the memories instead of listing them."),
        filters: str | None = Query(None, description='mem0 filters as JSON: {"category": "x"}'),
        limit: Annotated[int, Query(ge=1, le=10000)] = 100,
    ) -> dict:
        """A user's current memories (history stays out), or those best matching ``q``
        (highest score first); ``filters`` match the metadata given to add."""
        where = _filters(filters)
        ids = {"user_id": user_id, "agent_id": agent_id, "run_id": run_id}
        if q is not None:
            return _facade(tenant).search(q, **ids, filters=where, limit=limit)
        return _facade(tenant).get_all(**ids, filters=where, limit=limit)

    @r.post("/v1/memories/search")
    def search_memories(tenant: TenantDep, body: SearchIn) -> dict:
        """mem0's search body: ``query`` with ``user_id``/``agent_id``/``run_id``,
        ``filters``, ``limit`` and ``threshold``; highest score first."""
        return _facade(tenant).search(
            body.query,
            user_id=body.user_id,
            agent_id=body.agent_id,
            run_id=body.run_id,
            filters=body.filters,
            limit=body.limit,
            threshold=body.threshold,
        )

    _one_memory_routes(r)
    _delete_routes(r)
    return r


def _one_memory_routes(r: APIRouter) -> None:
    """``/v1/memories/{memory_id}``: get, correct, forget, and its history."""

    @r.get("/v1/memories/{memory_id}")
    def get_memory(tenant: TenantDep, memory_id: str) -> dict:
        """One memory, as get_all lists it (its latest wording under its first id)."""
        found = _facade(tenant).get(str(_id(memory_id)))
        if found is None:
            raise NotFound(f"no memory {memory_id}")
        return found

    @r.put("/v1/memories/{memory_id}")
    def update_memory(tenant: TenantDep, memory_id: str, body: UpdateIn) -> dict:
        """Correct a memory: it keeps its id, the old wording stays as history (survives
        re-extraction); answers the memory as it now reads."""
        mem0 = _facade(tenant)
        mem0.update(
            str(_id(memory_id)),
            body.text,
            kind=body.kind,
            subject=body.subject,
            valid_from=body.valid_from,
            valid_to=body.valid_to,
        )
        return mem0.get(str(_id(memory_id))) or {}

    @r.delete("/v1/memories/{memory_id}")
    def delete_memory(request: Request, tenant: TenantDep, memory_id: str) -> dict:
        """Forget a memory for good (with its corrections)."""
        tenant.drain(DRAIN_S)
        return _facade(tenant).delete(str(_id(memory_id)), actor=actor(request))

    @r.get("/v1/memories/{memory_id}/history")
    def memory_history(tenant: TenantDep, memory_id: str) -> list[dict]:
        """mem0's history of a memory: ADD, each UPDATE, and DELETE once it is forgotten."""
        return _facade(tenant).history(str(_id(memory_id)))


def _delete_routes(r: APIRouter) -> None:
    @r.delete("/v1/memory/messages/{conversation:path}/{message_id}")
    def forget_message(
        request: Request, tenant: TenantDep, conversation: str, message_id: str
    ) -> dict:
        """Remove one message from every index and re-derive its session (a conversation
        id may hold "/": the message id is the path's last part)."""
        tenant.drain(DRAIN_S)
        with tenant.lock(conversation):
            found = tenant.memory.forget_message(conversation, message_id, actor=actor(request))
            return {"deleted": found}

    @r.post("/v1/memory/people/merge")
    def merge_people(tenant: TenantDep, body: MergeIn) -> dict:
        """Two persons are one: the user's decision (method "user"), logged with its reason."""
        tenant.drain(DRAIN_S)
        kept = tenant.memory.merge_people(body.keep, body.drop, reason=body.reason)
        return _person(kept)

    @r.post("/v1/memory/people/{person:path}/split")
    def split_person(tenant: TenantDep, person: str, body: SplitIn) -> dict:
        """One (conversation, name) identity of a person is someone else: it becomes a
        person of its own, and automatic resolution does not merge them again."""
        tenant.drain(DRAIN_S)
        made = tenant.memory.split_person(person, body.conversation, body.name, reason=body.reason)
        return _person(made)

    @r.post("/v1/memory/reset")
    def reset(request: Request, tenant: TenantDep, confirm: str | None = None) -> dict:
        """Forget everything of this tenant; needs ``confirm=yes``."""
        if confirm != "yes":
            raise InputError("reset forgets everything: pass confirm=yes")
        tenant.drain(DRAIN_S)
        tenant.memory.reset(actor=actor(request))
        return {"reset": True}


class MergeIn(BaseModel):
    keep: str = Field(description="The person (id, or a name only one person goes by) kept")
    drop: str = Field(description="The person merged into it")
    reason: str = ""


class SplitIn(BaseModel):
    conversation: str
    name: str = Field(description="The name as spoken in that conversation")
    reason: str = ""


def _person(p: Any) -> dict:
    return {"id": p.id, "name": p.name, "identities": [list(i) for i in p.identities]}


def _filters(raw: str | None) -> dict | None:
    """The ``filters`` query parameter: a JSON object, else one InputError line (400)."""
    if raw is None:
        return None
    try:
        value = json.loads(raw)
    except ValueError:
        raise InputError("filters must be a JSON object") from None
    if not isinstance(value, dict):
        raise InputError("filters must be a JSON object")
    return value


def _id(memory_id: str) -> int:
    """A path's memory id; anything but an integer is one InputError line (400)."""
    from ..service_edits import claim_id

    return claim_id(memory_id)
