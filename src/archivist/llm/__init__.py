"""The LLM layer: one ChatModel interface, providers chosen by name in one registry.

A provider module is imported only when chosen, so ``openai`` stays optional;
with no LLM configured ``get_chat_model`` returns None and callers use their
heuristic paths.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from ..config import Provider, check_provider
from ..errors import ConfigError
from .accounting import Accounting, TaskStats
from .base import (
    TRANSIENT_ERRORS,
    CallOptions,
    CallOptionsDict,
    ChatModel,
    Completion,
    LLMBadOutput,
    LLMError,
    LLMRateLimited,
    LLMRefused,
    LLMTimeout,
)
from .cache import MemoryResponseCache, ResponseCache, StoreResponseCache
from .repair import parse_json
from .structured import cache_key, call_structured, run_parallel

if TYPE_CHECKING:
    from ..config import Settings

__all__ = [
    "PROVIDERS",
    "TRANSIENT_ERRORS",
    "Accounting",
    "CallOptions",
    "CallOptionsDict",
    "ChatModel",
    "Completion",
    "LLMBadOutput",
    "LLMError",
    "LLMRateLimited",
    "LLMRefused",
    "LLMTimeout",
    "MemoryResponseCache",
    "ResponseCache",
    "StoreResponseCache",
    "TaskStats",
    "cache_key",
    "call_structured",
    "check_llm",
    "get_chat_model",
    "get_limiter",
    "parse_json",
    "run_parallel",
]

NO_LLM = ("", "none")  # the values of ``settings.llm`` that mean "heuristics only"
DEFAULT_TIMEOUT = 60.0
DEFAULT_CONCURRENCY = 4


def _setting(settings: Any, name: str, default: Any) -> Any:
    """A Settings attribute, or its default while Settings does not define it yet."""
    value = getattr(settings, name, None)
    return default if value is None else value


def _openai(settings: Settings) -> ChatModel:
    from .openai_compat import OpenAIChatModel

    return OpenAIChatModel(
        model=settings.llm_model,
        base_url=settings.llm_base_url,
        api_key=_setting(settings, "llm_api_key", ""),
        timeout=float(_setting(settings, "llm_timeout", DEFAULT_TIMEOUT)),
    )


def _local(settings: Settings) -> ChatModel:
    from .local_llama import LocalLlamaChatModel

    return LocalLlamaChatModel(settings.llm_model)


def _fake(settings: Settings) -> ChatModel:
    from .fake import FakeLLM

    return FakeLLM()


#: The one place an LLM provider name maps to its implementation (and what it needs set).
PROVIDERS: dict[str, Provider[ChatModel]] = {
    "openai": Provider(_openai, needs=("llm_model", "llm_base_url")),
    "local": Provider(_local, needs=("llm_model",), hint="the path of a GGUF file"),
    "fake": Provider(_fake),
}


def _provider(settings: Settings) -> Provider[ChatModel] | None:
    name = str(_setting(settings, "llm", "")).strip().lower()
    if name in NO_LLM:
        return None
    return check_provider("llm", name, PROVIDERS, settings, extra=("none",))


def check_llm(settings: Settings) -> None:
    """Refuse an unknown ``settings.llm``, or one missing a setting it needs."""
    _provider(settings)


def get_chat_model(settings: Settings) -> ChatModel | None:
    """The model ``settings.llm`` names, or None when no LLM is configured; sends nothing."""
    provider = _provider(settings)
    return None if provider is None else provider.make(settings)


def get_limiter(settings: Settings) -> threading.BoundedSemaphore:
    """A semaphore allowing ``settings.llm_concurrency`` calls at once; share one per process."""
    limit = int(_setting(settings, "llm_concurrency", DEFAULT_CONCURRENCY))
    if limit < 1:
        raise ConfigError(f"llm_concurrency must be >= 1; got {limit}")
    return threading.BoundedSemaphore(limit)
