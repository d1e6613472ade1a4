"""Who may reach a handler at all: this server's own names, and requests a page did not forge.

A local server shares its machine with a browser that visits any site. Two
attacks follow, and ``RequestGuard`` refuses both before a handler runs:

- **Cross-site writes.** Any page can make the browser POST a form, or a
  ``text/plain`` body, to ``http://127.0.0.1:PORT``. A state-changing request
  (POST, PUT, PATCH, DELETE) is refused with 403 when the browser says it came
  from elsewhere (an ``Origin`` that is not this server's own, or
  ``Sec-Fetch-Site: cross-site``/``same-site``), and the JSON API takes bodies
  only as ``application/json`` (415 otherwise), a type no page can send to
  another site without a CORS preflight, which this server never answers.
  Browser forms (the memory browser's routes, outside ``/v1/``) carry a
  per-session token as well (ui/web.py).
- **DNS rebinding.** A page on ``attacker.example`` whose name is made to
  resolve to 127.0.0.1 reads answers as same-origin. Where no key protects the
  memory (``--open``, ``archivist ui``), a request whose ``Host`` is not a
  loopback name or a configured one is refused (403) before any handler runs.
"""

from __future__ import annotations

import json
from urllib.parse import urlsplit

LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})
WRITES = frozenset({b"POST", b"PUT", b"PATCH", b"DELETE"})
JSON_TYPES = frozenset({"application/json"})
# Exports come back as JSON Lines: the import route takes them as they were sent.
LINES_TYPES = frozenset({"application/x-ndjson", "application/jsonl", "application/json"})
LINES_ROUTES = frozenset({"/v1/memory/import"})
# The memory browser's forms (outside /v1/): token-checked in ui/web.py.
FORM_TYPES = frozenset({"application/x-www-form-urlencoded", "multipart/form-data"})


def host_name(host: str) -> str:
    """``Host`` without its port, lowercased; IPv6 brackets dropped ('[::1]:80' -> '::1')."""
    host = host.strip().lower()
    if host.startswith("["):
        return host[1:].split("]", 1)[0]
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def _netloc(scheme: str, host: str) -> str:
    """``host[:port]`` with the scheme's default port dropped, for comparing origins."""
    host = host.strip().lower()
    default = {"http": ":80", "https": ":443"}.get(scheme, "")
    return host[: -len(default)] if default and host.endswith(default) else host


def origin_netloc(origin: str) -> str | None:
    """An ``Origin`` header's ``host[:port]``; None for 'null' or anything not an origin."""
    try:
        parts = urlsplit(origin.strip())
    except ValueError:
        return None
    if parts.scheme not in ("http", "https") or not parts.netloc:
        return None
    return _netloc(parts.scheme, parts.netloc)


def media_type(value: str) -> str:
    """'application/json; charset=utf-8' -> 'application/json'."""
    return value.split(";", 1)[0].strip().lower()


def _refusal(status: int, message: str) -> tuple[int, bytes]:
    kind = "UnsupportedMediaType" if status == 415 else "Forbidden"
    return status, json.dumps({"error": {"type": kind, "message": message}}).encode()


class RequestGuard:
    """ASGI middleware: refuses foreign Hosts (when asked) and cross-site writes."""

    def __init__(
        self,
        app,
        *,
        check_host: bool,
        allowed_hosts: tuple[str, ...] = (),
        allowed_origins: tuple[str, ...] = (),
    ) -> None:
        self.app = app
        self.check_host = check_host
        self.hosts = LOOPBACK_HOSTS | {host_name(h) for h in allowed_hosts}
        self.origins = frozenset(filter(None, (origin_netloc(o) for o in allowed_origins)))

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        refused = self.refusal(scope)
        if refused is None:
            await self.app(scope, receive, send)
            return
        status, body = refused
        headers = [(b"content-type", b"application/json"), (b"connection", b"close")]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    def refusal(self, scope) -> tuple[int, bytes] | None:
        """Why this request may not reach a handler (status, JSON body), or None."""
        headers = _headers(scope)
        host = headers.get("host", "")
        if self.check_host and host_name(host) not in self.hosts:
            return _refusal(
                403,
                f"Host {host_name(host)!r} is not a name of this server: it answers on "
                "loopback names only (configure ARCHIVIST_ALLOWED_HOSTS to add one)",
            )
        if scope["method"].encode() not in WRITES:
            return None
        return self._cross_site(host, headers) or self._body_type(scope["path"], headers)

    def _cross_site(self, host: str, headers: dict[str, str]) -> tuple | None:
        site = headers.get("sec-fetch-site", "").strip().lower()
        if site in ("cross-site", "same-site"):
            return _refusal(403, f"a {site} request may not change memory")
        origin = headers.get("origin")
        if origin is None:
            return None  # not sent by a browser's page: curl, SDKs, the CLI
        seen = origin_netloc(origin)
        own = {_netloc("http", host), _netloc("https", host)}  # this server, behind TLS or not
        if seen is not None and (seen in self.origins or seen in own):
            return None
        return _refusal(403, f"a request from origin {origin[:100]!r} may not change memory")

    def _body_type(self, path: str, headers: dict[str, str]) -> tuple | None:
        given = headers.get("content-type")
        has_body = headers.get("content-length", "0").strip() not in ("", "0") or (
            "transfer-encoding" in headers
        )
        if given is None and not has_body:
            return None
        kind = media_type(given or "")
        if not path.startswith("/v1/"):
            if kind in FORM_TYPES:
                return None
            return _refusal(415, f"the memory browser's forms are sent as a form, not {kind!r}")
        allowed = LINES_TYPES if path in LINES_ROUTES else JSON_TYPES
        if kind in allowed or (kind.startswith("application/") and kind.endswith("+json")):
            return None
        want = " or ".join(sorted(allowed))
        return _refusal(415, f"send the body as {want}, not {kind or 'no Content-Type'!r}")


def _headers(scope) -> dict[str, str]:
    """The request's headers by lowercase name (the first of a repeated one)."""
    out: dict[str, str] = {}
    for name, value in scope.get("headers") or ():
        out.setdefault(name.decode("latin-1").lower(), value.decode("latin-1"))
    return out
