"""What every page of the memory browser shares: templates, who is looking, errors.

A page's handler returns ``render(request, template, ...)``; PageRoute turns
an archivist error anywhere in it (its dependencies included) into the same
page layout with the message and its HTTP status, and a missing key into a
redirect to the login page, so a browser never sees a JSON error or a traceback.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import secrets
from collections.abc import Callable
from datetime import datetime
from importlib import resources
from typing import Annotated, Any
from urllib.parse import quote

from fastapi import Depends, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.routing import APIRoute
from fastapi.templating import Jinja2Templates

from ...errors import ArchivistError, Forbidden, InputError
from ..statuses import status_for
from ..tenants import Tenant

log = logging.getLogger("archivist.server.ui")
COOKIE = "archivist_key"
SESSION = "archivist_session"  # a random id per browser session: the forms' tokens are its own
ASSETS = "/ui-assets"
STATIC = resources.files(__package__) / "static"
templates = Jinja2Templates(directory=str(resources.files(__package__) / "templates"))


class NeedKey(Exception):
    """No valid API key in the cookie: the browser is sent to the login page."""


def _when(value: datetime | str | None) -> datetime | None:
    """A datetime, an ISO string (the context log's) or nothing."""
    if isinstance(value, str):
        return datetime.fromisoformat(value) if value else None
    return value


def day(value: datetime | str | None) -> str:
    """'5 Aug 2024': how people read a date."""
    when = _when(value)
    return f"{when.day} {when:%b %Y}" if when else ""


def moment(value: datetime | str | None) -> str:
    """'5 Aug 2024, 18:02' (in the timestamp's own zone)."""
    when = _when(value)
    return f"{day(when)}, {when:%H:%M}" if when else ""


templates.env.filters["day"] = day
templates.env.filters["moment"] = moment
templates.env.filters["q"] = lambda v: quote(str(v), safe="")


def session_id(request: Request) -> str:
    """This browser's session: from its cookie, or a new one that ``render`` sets."""
    sid = request.cookies.get(SESSION, "")
    if len(sid) != 43 or not sid.replace("-", "").replace("_", "").isalnum():
        sid = getattr(request.state, "new_session", "") or secrets.token_urlsafe(32)
        request.state.new_session = sid
    return sid


def form_token(request: Request) -> str:
    """The token every form of this browser carries: bound to its session, its key and
    this process, so a token seen once names nothing another browser may do."""
    key = request.cookies.get(COOKIE, "")
    message = f"{session_id(request)}\n{key}".encode()
    return hmac.new(request.app.state.ui_secret, message, hashlib.sha256).hexdigest()


def check_token(request: Request, token: str) -> None:
    stored = request.cookies.get(SESSION, "")
    if not stored or not hmac.compare_digest(token or "", form_token(request)):
        raise Forbidden("the form is stale or came from another site: reload the page and retry")


def keep_session(request: Request, response: Response) -> Response:
    """Set the session cookie a new browser was given while its page was made."""
    sid = getattr(request.state, "new_session", "")
    if sid:
        response.set_cookie(
            SESSION, sid, httponly=True, samesite="strict", secure=request.url.scheme == "https"
        )
    return response


def ui_tenant(request: Request) -> Tenant:
    """The tenant whose memory the browser shows: from the key cookie (any key under --open)."""
    registry = request.app.state.registry
    who = registry.authenticate(request.cookies.get(COOKIE))
    if who is None:
        raise NeedKey
    if who.user is not None:
        raise Forbidden(
            f"this key is bound to user {who.user!r}: the memory browser needs a tenant key"
        )
    return registry.tenant(who.tenant)


UiTenant = Annotated[Tenant, Depends(ui_tenant)]


def render(request: Request, template: str, code: int = 200, **context: Any) -> HTMLResponse:
    """A page: its template with the request, the form token and the flash message."""
    context.setdefault("done", request.query_params.get("done", ""))
    page = templates.TemplateResponse(
        request,
        template,
        {
            "token": form_token(request),
            "open": request.app.state.registry.open_access,
            "api": request.app.state.settings.serve_api,
            **context,
        },
        status_code=code,
    )
    return keep_session(request, page)  # type: ignore[return-value]


def back(url: str, done: str) -> RedirectResponse:
    """After a change: to the page that shows its result, with a line saying what happened."""
    sep = "&" if "?" in url else "?"
    return RedirectResponse(f"{url}{sep}done={quote(done)}", status_code=303)


class PageRoute(APIRoute):
    """A route whose failures are pages: the error's message and status in the site's layout."""

    def get_route_handler(self) -> Callable:
        handle = super().get_route_handler()

        async def page(request: Request) -> Response:
            try:
                return await handle(request)
            except NeedKey:
                target = quote(request.url.path, safe="/")
                return RedirectResponse(f"/login?next={target}", status_code=303)
            except ArchivistError as e:
                return render(request, "error.html", status_for(e), message=str(e))
            except HTTPException as e:  # too many wrong keys from this address (429)
                return render(request, "error.html", e.status_code, message=str(e.detail))
            except RequestValidationError as e:
                first = e.errors()[0] if e.errors() else {}
                where = ".".join(str(p) for p in first.get("loc", ()))
                message = f"{where}: {first.get('msg', 'invalid request')}"
                return render(request, "error.html", 400, message=message)
            except Exception:  # a page must not show a traceback: log it, say what failed
                log.exception("page %s failed", request.url.path)
                return render(
                    request, "error.html", 500, message="this page failed; the server log has why"
                )

        return page


def need(value: str | None, what: str) -> str:
    """A required form field, trimmed; a one-line error naming it when empty."""
    if value is None or not value.strip():
        raise InputError(f"{what} is empty")
    return value.strip()
