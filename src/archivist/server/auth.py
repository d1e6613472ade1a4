"""Who is calling: the tenant an API key maps to (a FastAPI dependency of every route)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, HTTPException, Request
from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer

from .tenants import TenantRegistry

_bearer = HTTPBearer(auto_error=False)
_api_key = APIKeyHeader(name="X-API-Key", auto_error=False)


def tenant_id(
    request: Request,
    bearer: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
    api_key: Annotated[str | None, Depends(_api_key)],
) -> str:
    """The caller's tenant, from its API key; 401 without a valid one."""
    registry: TenantRegistry = request.app.state.registry
    key = bearer.credentials if bearer is not None else api_key
    found = registry.authenticate(key)
    if found is None:
        raise HTTPException(401, "missing or invalid API key", {"WWW-Authenticate": "Bearer"})
    return found
