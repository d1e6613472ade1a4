"""What the OpenAI-compatible providers (embeddings and chat) share.

The ``openai`` package is an optional extra: it is imported only inside
``make_client``, when a provider first talks to its server.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

MAX_RETRY_AFTER = 10.0  # seconds: never sleep longer than this on a server's say-so


def endpoint_name(model: str, base_url: str) -> str:
    """``openai:<model>@<host[:port]>``: the same model behind two servers is two models."""
    parts = urlsplit(base_url if "//" in base_url else f"//{base_url}")
    host = parts.hostname or base_url
    if parts.port:
        host = f"{host}:{parts.port}"
    return f"openai:{model}@{host}"


def retry_after(response: Any) -> float | None:
    """The server's Retry-After (or retry-after-ms) in seconds; None if absent or a date."""
    headers = getattr(response, "headers", None) or {}
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        try:
            seconds = float(headers.get(name, "")) * scale
        except (TypeError, ValueError):
            continue
        if seconds >= 0:
            return seconds
    return None


def make_client(base_url: str, api_key: str, timeout: float, http_client: Any = None) -> Any:
    """An ``openai.OpenAI`` client whose own retries are off (the providers retry)."""
    import openai

    return openai.OpenAI(
        base_url=base_url,
        # Local servers need no key, but the client insists on one.
        api_key=api_key or "unused",
        timeout=timeout,
        max_retries=0,
        http_client=http_client,
    )
