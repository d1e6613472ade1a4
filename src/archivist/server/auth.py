"""Who is calling: the tenant an API key maps to, and the user it is bound to, if any.

Every route depends on ``caller`` (through ``tenant_id`` or directly). A key
bound to one user (server/tenants.py) may only use the routes that take a
``Caller`` and scope themselves to that user: adding that user's messages,
search, ask, context, that user's profile and the proxy. Routes over the whole
tenant (listings, deletes, export, import, status) depend on ``tenant_id``,
which refuses such a key with 403.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, HTTPException, Request
from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer

from ..errors import Forbidden
from ..lang.text import person_key
from .limits import AuthFailures
from .tenants import Caller, TenantRegistry

_bearer = HTTPBearer(auto_error=False)
_api_key = APIKeyHeader(name="X-API-Key", auto_error=False)


def caller(
    request: Request,
    bearer: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
    api_key: Annotated[str | None, Depends(_api_key)],
) -> Caller:
    """The caller, from its API key; 401 without a valid one, 429 for an address that
    sent too many wrong keys in the last minute (server/limits.py)."""
    registry: TenantRegistry = request.app.state.registry
    failures: AuthFailures = request.app.state.auth_failures
    client = request.client.host if request.client else "unknown"
    failures.check(client)
    key = bearer.credentials if bearer is not None else api_key
    found = registry.authenticate(key)
    if found is None:
        if key:  # a key was tried: a guess, or a typo
            failures.failed(client)
        raise HTTPException(401, "missing or invalid API key", {"WWW-Authenticate": "Bearer"})
    return found


def tenant_id(request: Request, who: Annotated[Caller, Depends(caller)]) -> str:
    """The caller's tenant, for a route over the whole tenant: a user-bound key is refused."""
    if who.user is not None:
        raise Forbidden(
            f"this key is bound to user {who.user!r}: {request.url.path} needs a tenant key"
        )
    return who.tenant


def actor(request: Request) -> str:
    """Who the audit log names for a deletion over REST: the API and the client address."""
    client = request.client.host if request.client else "unknown"
    return f"rest ({client})"


def as_user(who: Caller, field: str, value: str | None) -> str | None:
    """``value`` of a user field (a person, the chat's user) as a bound key allows it.

    Unbound keys: ``value`` unchanged. Bound keys: the bound user, and a value
    naming anyone else is refused (403), not quietly replaced.
    """
    if who.user is None:
        return value
    if value is not None and value.strip() and person_key(value) != person_key(who.user):
        raise Forbidden(f"this key is bound to user {who.user!r}; {field} {value!r} is not them")
    return who.user


def own_conversation(store, who: Caller, conversation: str | None) -> bool:
    """A bound key names only conversations its user took part in (403 otherwise).

    A conversation not stored yet is the user's to start. Returns whether
    ``conversation`` is stored (False too when there is nothing to check).
    """
    if who.user is None or conversation is None:
        return False
    people = store.participants(conversation)
    if people is not None and person_key(who.user) not in {person_key(p) for p in people}:
        raise Forbidden(
            f"this key is bound to user {who.user!r}, who is not in conversation {conversation!r}"
        )
    return people is not None


def own_messages(store, who: Caller, conversations) -> None:
    """A bound key adds only its user's turns (and the replies to them) to its user's
    conversations: every user-role message is the user's, and each conversation is
    stored with the user in it already or holds a message of theirs."""
    if who.user is None:
        return
    me = person_key(who.user)
    for conv in conversations:
        stored = own_conversation(store, who, conv.id)
        for m in conv.messages:
            if m.role == "user" and person_key(m.speaker) != me:
                raise Forbidden(
                    f"this key is bound to user {who.user!r}; message {m.id!r} of "
                    f"conversation {conv.id!r} is spoken by {m.speaker!r}"
                )
        if not stored and not any(person_key(m.speaker) == me for m in conv.messages):
            raise Forbidden(
                f"this key is bound to user {who.user!r}; conversation {conv.id!r} holds "
                "no message of theirs"
            )
