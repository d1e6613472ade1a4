"""Several server processes on one port: ``archivist serve --workers N``.

uvicorn starts N processes that accept on one socket; each builds its own app
from the settings the command resolved (options, keys file and environment
read once), which the parent hands over in a private file. Each process opens
its own connection to every tenant's store and starts its own background
worker; they share the durable job queue, so a job is taken by one of them.
Counters, the auth-failure limit and the timings in ``/v1/memory/status`` are
per process: a status request shows the process that answered it.
"""

from __future__ import annotations

import os
import pickle
import socket
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from .settings import ServerSettings

try:  # the server extra: uvicorn's HTTP protocol (httptools when installed, else h11)
    from uvicorn.protocols.http.auto import AutoHTTPProtocol as _HTTP
except ImportError:
    _HTTP = None

SETTINGS_FILE_ENV = "ARCHIVIST_SERVER_SETTINGS_FILE"
FACTORY = "archivist.server.workers:app_from_settings_file"


@contextmanager
def settings_file(settings: ServerSettings) -> Iterator[Path]:
    """The settings in a file only this user can read (they hold the API keys), named in
    the environment the worker processes inherit; removed afterwards."""
    folder = Path(tempfile.mkdtemp(prefix="archivist-serve-"))  # mode 0700
    path = folder / "settings.pickle"
    try:
        with os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as f:
            pickle.dump(settings, f)
        before = os.environ.get(SETTINGS_FILE_ENV)
        os.environ[SETTINGS_FILE_ENV] = str(path)
        try:
            yield path
        finally:
            if before is None:
                os.environ.pop(SETTINGS_FILE_ENV, None)
            else:
                os.environ[SETTINGS_FILE_ENV] = before
    finally:
        path.unlink(missing_ok=True)
        folder.rmdir()


def app_from_settings_file() -> Any:
    """One worker process's app (uvicorn's factory), from the parent's settings file."""
    from .app import create_app

    name = os.environ.get(SETTINGS_FILE_ENV)
    if not name:
        raise ConfigError(f"${SETTINGS_FILE_ENV} is not set: start workers with archivist serve")
    with open(name, "rb") as f:
        settings = pickle.load(f)  # noqa: S301 - our own file, private to this user
    if not isinstance(settings, ServerSettings):
        raise ConfigError(f"{name} holds no server settings")
    return create_app(settings)


def serve_workers(
    settings: ServerSettings, host: str, port: int, workers: int, log_level: str
) -> None:
    """Serve with ``workers`` processes on one socket until interrupted (SIGINT/SIGTERM end
    every process gracefully: in-flight requests finish, stores close)."""
    import uvicorn

    with settings_file(settings):
        uvicorn.run(
            FACTORY,
            factory=True,
            host=host,
            port=port,
            workers=workers,
            log_level=log_level,
            http=NoDelayHTTPProtocol if _HTTP is not None else "auto",
        )


if _HTTP is not None:

    class NoDelayHTTPProtocol(_HTTP):  # type: ignore[misc, valid-type]
        """uvicorn's HTTP protocol with Nagle's delay off on every connection it serves.

        With several workers uvicorn binds the socket itself, without the protocol
        number asyncio looks for before it turns the delay off; a response written in
        two parts over a kept-alive connection then waited for the client's delayed
        acknowledgement: 40 ms a request under ``bench load``. (A module-level class:
        the worker processes unpickle it by name.)"""

        def connection_made(self, transport: Any) -> None:
            sock = transport.get_extra_info("socket")
            if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            super().connection_made(transport)
