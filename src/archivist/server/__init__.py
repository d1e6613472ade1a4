"""Servers over MemoryService: the REST API and the OpenAI-compatible proxy (``archivist serve``).

Needs the ``server`` extra (FastAPI, uvicorn, httpx2): ``pip install 'archivist[server]'``
(from a clone: ``pip install '.[server]'``).
"""

from __future__ import annotations

__all__ = ["ServerSettings", "create_app"]


def __getattr__(name: str):
    """Import FastAPI only when the server is used, so the core stays dependency-light."""
    if name in __all__:
        from . import app

        return getattr(app, name)
    raise AttributeError(name)
