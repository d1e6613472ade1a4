"""Who is calling: the tenant an API key maps to (a FastAPI dependency of every route)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, HTTPException, Request
from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer

from .limits import AuthFailures
from .tenants import TenantRegistry

_bearer = HTTPBearer(auto_error=False)
_api_key = APIKeyHeader(name="X-API-Key", auto_error=False)


def tenant_id(
    request: Request,
    bearer: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
    api_key: Annotated[str | None, Depends(_api_key)],
) -> str:
    """The caller's tenant, from its API key; 401 without a valid one, 429 for an address
    that sent too many wrong keys in the last minute (server/limits.py)."""
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
