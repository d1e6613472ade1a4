"""What the proxy hands back from the upstream: its body when sound, else an OpenAI error.

A client's SDK must see either a chat completion or an error it knows
(``{"error": {"message", "type", "code"}}``), never a 200 it cannot parse: an
upstream body that is not a JSON object becomes a 502, an error page that is not
JSON (an HTML 500) an error of the same status, and a stream whose event is not
JSON, or that ends before the reply does, ends with an error event.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from fastapi.responses import JSONResponse, Response

log = logging.getLogger("archivist.proxy")

PASSED_HEADERS = ("retry-after", "x-request-id")  # upstream headers the client may need
INVALID = "upstream_invalid_body"  # the error code of a body the proxy would not pass on
INCOMPLETE = "upstream_incomplete_stream"  # ... of a stream that broke off


def error_body(message: str, code: str | None) -> dict:
    """An error in the shape OpenAI's API (and so every OpenAI SDK) uses."""
    return {"error": {"message": message, "type": "upstream_error", "code": code}}


def json_object(content: bytes) -> dict | None:
    """``content`` as a JSON object, or None when it is anything else."""
    try:
        data = json.loads(content)
    except (ValueError, RecursionError):  # ValueError: also bytes that are not UTF-8
        return None
    return data if isinstance(data, dict) else None


def _is_json(content: bytes) -> bool:
    try:
        json.loads(content)
    except (ValueError, RecursionError):
        return False
    return True


def _headers(resp: Any) -> dict[str, str]:
    return {h: resp.headers[h] for h in PASSED_HEADERS if h in resp.headers}


def passthrough(resp: Any) -> Response:
    """The upstream's response as ours: same status, body, content type and key headers."""
    return Response(
        resp.content,
        status_code=resp.status_code,
        media_type=resp.headers.get("content-type"),
        headers=_headers(resp),
    )


def _kind(resp: Any) -> str:
    """What the upstream sent, for the error message: its content type, shortly."""
    kind = resp.headers.get("content-type", "").split(";")[0].strip()[:60]
    return f"a {kind} body" if kind else "a body"


def invalid_body(resp: Any) -> JSONResponse:
    """A 2xx whose body is not a JSON object: a 502 the client's SDK raises (and retries)."""
    message = f"upstream answered {resp.status_code} with {_kind(resp)} that is not a JSON object"
    log.warning("%s", message)
    return JSONResponse(error_body(message, INVALID), status_code=502, headers=_headers(resp))


def error_response(resp: Any) -> Response:
    """An upstream error as the client should see it: a JSON body passes through as it came;
    anything else (an HTML page, plain text, nothing) becomes an OpenAI-shaped error with the
    upstream's status, or 502 where that is not an error status."""
    if resp.status_code >= 400 and _is_json(resp.content):
        return passthrough(resp)
    status = resp.status_code if 400 <= resp.status_code <= 599 else 502
    message = f"upstream answered {resp.status_code} with {_kind(resp)} that is not JSON"
    if not resp.content:
        message = f"upstream answered {resp.status_code} with an empty body"
    return JSONResponse(error_body(message, INVALID), status_code=status, headers=_headers(resp))


def unreachable(e: Exception) -> JSONResponse:
    """The upstream could not be reached (or did not answer in time)."""
    log.warning("upstream unreachable: %s", e)
    error = error_body(f"upstream unreachable: {e}", None)
    return JSONResponse(error, status_code=502)


def error_event(message: str) -> bytes:
    """The last event of a stream that cannot go on: an error the SDKs raise."""
    log.warning("%s", message)
    return b"data: " + json.dumps(error_body(message, INCOMPLETE)).encode("utf-8") + b"\n\n"


class EventStream:
    """Reads an upstream chat stream event by event as it passes through: each whole, sound
    event is passed on, the reply's text is collected, and the first event whose data is
    not a JSON object stops it (``broken``), so the client never sees what it cannot parse."""

    def __init__(self) -> None:
        self.buffer = b""
        self.event: list[bytes] = []  # the lines of the event being read
        self.parts: list[str] = []
        self.done = False  # [DONE] or a finish_reason seen
        self.errored = False  # the upstream sent its own error event
        self.broken: str | None = None  # why nothing more can be passed on
        self.usage: Any = None  # sent in a last chunk when the client asked for it

    @property
    def ended(self) -> bool:
        """Did the stream end as a stream should: the reply finished, or an error told?"""
        return self.done or self.errored

    def feed(self, chunk: bytes) -> bytes:
        """The bytes ``chunk`` completes that can be passed on: whole events only."""
        self.buffer += chunk
        if b"\n" not in chunk or self.broken:
            return b""
        *lines, self.buffer = self.buffer.split(b"\n")
        out: list[bytes] = []
        for line in lines:
            if line.strip():
                self.event.append(line)
                continue
            event, self.event = self.event, []  # a blank line ends an event
            if not self._read(event):
                break
            out.extend(x + b"\n" for x in event)
            out.append(line + b"\n")
        return b"".join(out)

    def finish(self) -> bytes:
        """What is left when the upstream closes: its last event, perhaps unterminated."""
        if self.broken or (not self.buffer.strip() and not self.event):
            return b""
        return self.feed(b"\n\n")

    def _read(self, lines: list[bytes]) -> bool:
        """Take in one event's data; False (and ``broken`` set) when it is not sound."""
        data = [x[5:].strip() for x in lines if x.startswith(b"data:")]
        if not data:
            return True  # a comment, an id, a keep-alive
        payload = b"\n".join(data)
        if payload == b"[DONE]":
            self.done = True
            return True
        event = json_object(payload)
        if event is None:
            self.broken = "upstream sent a stream event that is not a JSON object"
            return False
        if event.get("error"):
            self.errored = True  # passed on: the SDK raises it
            return True
        self.usage = event.get("usage") or self.usage
        choices = event.get("choices")
        choice = choices[0] if isinstance(choices, list) and choices else None
        if isinstance(choice, dict):
            delta = choice.get("delta")
            content = delta.get("content") if isinstance(delta, dict) else None
            if isinstance(content, str):
                self.parts.append(content)
            if choice.get("finish_reason"):
                self.done = True
        return True
