"""What one caller may cost the server: request size, and failed authentications.

``BodyLimit`` refuses a request whose body is larger than the limit with 413,
before any handler reads it: by its Content-Length when it has one, else by
counting the chunks as they arrive (a chunked upload stops there).
``AuthFailures`` answers 429 to a client address after too many wrong keys
within a minute, so keys cannot be guessed at network speed.
"""

from __future__ import annotations

import json
import threading
import time
from collections import defaultdict, deque

from fastapi import HTTPException

ERROR_TYPE = "RequestTooLarge"


def _error_body(limit: int) -> bytes:
    message = f"request body over {limit} bytes (ARCHIVIST_MAX_REQUEST_BYTES)"
    return json.dumps({"error": {"type": ERROR_TYPE, "message": message}}).encode()


# A refused body is still read (and dropped) up to this much, so the client, which sends
# all of it before it reads the answer, gets the 413 instead of a reset connection.
DRAIN_BYTES = 64 * 1024 * 1024


class BodyLimit:
    """ASGI middleware: 413 with the common error body for bodies over ``limit`` bytes.

    A body with a Content-Length over the limit is refused before it is read; one
    without (chunked) is read into memory up to the limit before the app sees it, so
    no handler or form parser ever meets a body cut short.
    """

    def __init__(self, app, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http" or self.limit <= 0:
            await self.app(scope, receive, send)
            return
        length = dict(scope.get("headers") or ()).get(b"content-length")
        if length is not None:
            if not length.isdigit() or int(length) <= self.limit:
                await self.app(scope, receive, send)  # the server holds it to its length
                return
            if int(length) <= DRAIN_BYTES:
                await _drain(receive, 0)
            await self._refuse(send)
            return
        chunks: list[bytes] = []
        seen = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return  # the client went away
            chunks.append(message.get("body", b""))
            seen += len(chunks[-1])
            if seen > self.limit:
                await _drain(receive, seen, message.get("more_body", False))
                await self._refuse(send)
                return
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        sent = False

        async def replay():
            nonlocal sent
            if sent:
                return await receive()  # a disconnect, when it comes
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)

    async def _refuse(self, send) -> None:
        body = _error_body(self.limit)
        headers = [(b"content-type", b"application/json"), (b"connection", b"close")]
        await send({"type": "http.response.start", "status": 413, "headers": headers})
        await send({"type": "http.response.body", "body": body})


async def _drain(receive, seen: int, more: bool = True) -> None:
    """Read and drop what is left of a refused body, up to DRAIN_BYTES in all."""
    while more and seen <= DRAIN_BYTES:
        message = await receive()
        if message["type"] != "http.request":
            return
        seen += len(message.get("body", b""))
        more = message.get("more_body", False)


class AuthFailures:
    """Wrong keys per client address over the last ``window`` seconds."""

    def __init__(self, limit: int, window: float = 60.0) -> None:
        self.limit = limit
        self.window = window
        self._seen: dict[str, deque[float]] = defaultdict(deque)
        self._lock = threading.Lock()

    def _recent(self, client: str, now: float) -> deque[float]:
        times = self._seen[client]
        while times and times[0] <= now - self.window:
            times.popleft()
        return times

    def check(self, client: str) -> None:
        """429 while ``client`` is over its limit (0 turns the limit off)."""
        if self.limit <= 0:
            return
        now = time.monotonic()
        with self._lock:
            times = self._recent(client, now)
            if len(times) >= self.limit:
                wait = max(1, int(times[0] + self.window - now) + 1)
                raise HTTPException(
                    429,
                    f"too many invalid API keys from this address; retry in {wait} s",
                    {"Retry-After": str(wait)},
                )

    def failed(self, client: str) -> None:
        if self.limit <= 0:
            return
        with self._lock:
            self._recent(client, time.monotonic()).append(time.monotonic())
            if len(self._seen) > 10_000:  # forget idle addresses
                for c in [c for c, t in self._seen.items() if not t]:
                    del self._seen[c]
