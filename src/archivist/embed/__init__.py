"""Embedding providers behind one small interface, chosen by name in one registry.

Each provider module is imported only when chosen, so onnxruntime and openai
stay optional at import time.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from ..config import Provider, check_provider
from .base import Embedder, embed_one, l2_normalise

if TYPE_CHECKING:
    from ..config import Settings

__all__ = ["PROVIDERS", "Embedder", "check_embedder", "embed_one", "get_embedder", "l2_normalise"]


def _local(settings: Settings) -> Embedder:
    return _shared_local(settings.embed_threads, settings.embed_batch_size)


@functools.lru_cache(maxsize=4)
def _shared_local(threads: int, batch_size: int) -> Embedder:
    """One bundled model per process: a server's tenants share it instead of each loading
    its own copy (about 90 MB and a fraction of a second each)."""
    from .local import MiniLMEmbedder

    return MiniLMEmbedder(threads=threads, batch_size=batch_size)


def _openai(settings: Settings) -> Embedder:
    from .openai_compat import OpenAIEmbedder

    return OpenAIEmbedder(
        model=settings.embed_model,
        base_url=settings.embed_base_url,
        api_key=settings.embed_api_key,
        dim=settings.embed_dim,
        timeout=settings.embed_timeout,
        batch_size=settings.embed_batch_size,
    )


def _fake(settings: Settings) -> Embedder:
    from .fake import FakeEmbedder

    return FakeEmbedder(dim=settings.embed_dim or 64)


#: The one place a provider name maps to its implementation (and what it needs set).
PROVIDERS: dict[str, Provider[Embedder]] = {
    "local": Provider(_local),
    "openai": Provider(_openai, needs=("embed_model", "embed_base_url")),
    "fake": Provider(_fake),
}


def check_embedder(settings: Settings) -> None:
    """Refuse an unknown ``settings.embedder``, or one missing a setting it needs."""
    check_provider("embedder", settings.embedder, PROVIDERS, settings)


def get_embedder(settings: Settings) -> Embedder:
    """The embedder ``settings.embedder`` names; constructing it loads and sends nothing."""
    return check_provider("embedder", settings.embedder, PROVIDERS, settings).make(settings)
