"""The memory browser: what memory believes and why, and the means to correct it.

Server-rendered HTML (Jinja2 templates and one stylesheet shipped in this
package; no script, no CDN, so it works air-gapped and in any browser), over
the same Tenant and MemoryService the REST API uses. Pages read; every change
is a POST form carrying a per-session token, and server/guard.py refuses any
write another site's page sends. ``archivist serve`` asks for a tenant API key
once (kept in an HttpOnly, SameSite=Strict cookie) unless it runs with ``--open``;
``archivist ui`` serves one local store on loopback.
"""

from __future__ import annotations

import secrets

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles

from . import actions, pages
from .web import ASSETS, STATIC


def add_ui(app: FastAPI) -> None:
    """Mount the memory browser's pages at / and its stylesheet under /ui-assets."""
    app.state.ui_secret = secrets.token_bytes(32)  # signs the forms' tokens, per process
    app.mount(ASSETS, StaticFiles(directory=str(STATIC)), name="ui-assets")
    app.include_router(actions.router)  # first: "/conversations/{c:path}/forget" before the page
    app.include_router(pages.router)


__all__ = ["add_ui"]
