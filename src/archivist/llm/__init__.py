"""The LLM layer: one ChatModel interface, providers chosen by name in one registry.

A provider module is imported only when chosen, so ``openai`` stays optional;
with no LLM configured ``get_chat_model`` returns None and callers use their
heuristic paths.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError
from .accounting import Accounting, TaskStats
from .base import (
    TRANSIENT_ERRORS,
    ChatModel,
    Completion,
    LLMBadOutput,
    LLMError,
    LLMRateLimited,
    LLMRefused,
    LLMTimeout,
)
from .cache import MemoryResponseCache, ResponseCache
from .repair import parse_json
from .structured import cache_key, call_structured, run_parallel

if TYPE_CHECKING:
    from ..config import Settings

__all__ = [
    "PROVIDERS",
    "TRANSIENT_ERRORS",
    "Accounting",
    "ChatModel",
    "Completion",
    "LLMBadOutput",
    "LLMError",
    "LLMRateLimited",
    "LLMRefused",
    "LLMTimeout",
    "MemoryResponseCache",
    "ResponseCache",
    "TaskStats",
    "cache_key",
    "call_structured",
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

    model, base_url = _setting(settings, "llm_model", ""), _setting(settings, "llm_base_url", "")
    if not (model and base_url):
        raise ConfigError(
            "llm 'openai' needs llm_model and llm_base_url "
            "(env ARCHIVIST_LLM_MODEL, ARCHIVIST_LLM_BASE_URL)"
        )
    return OpenAIChatModel(
        model=model,
        base_url=base_url,
        api_key=_setting(settings, "llm_api_key", ""),
        timeout=float(_setting(settings, "llm_timeout", DEFAULT_TIMEOUT)),
    )


def _local(settings: Settings) -> ChatModel:
    from .local_llama import LocalLlamaChatModel

    path = _setting(settings, "llm_model", "")
    if not path:
        raise ConfigError("llm 'local' needs llm_model: the path of a GGUF file")
    return LocalLlamaChatModel(path)


def _fake(settings: Settings) -> ChatModel:
    from ..testing import FakeLLM

    return FakeLLM()


#: The one place an LLM provider name maps to its implementation.
PROVIDERS: dict[str, Callable[[Settings], ChatModel]] = {
    "openai": _openai,
    "local": _local,
    "fake": _fake,
}


def get_chat_model(settings: Settings) -> ChatModel | None:
    """The model ``settings.llm`` names, or None when no LLM is configured; sends nothing."""
    name = str(_setting(settings, "llm", "")).strip().lower()
    if name in NO_LLM:
        return None
    try:
        factory = PROVIDERS[name]
    except KeyError:
        choices = ", ".join([*PROVIDERS, "none"])
        raise ConfigError(f"unknown llm {name!r}; choose one of {choices}") from None
    return factory(settings)


def get_limiter(settings: Settings) -> threading.BoundedSemaphore:
    """A semaphore allowing ``settings.llm_concurrency`` calls at once; share one per process."""
    limit = int(_setting(settings, "llm_concurrency", DEFAULT_CONCURRENCY))
    if limit < 1:
        raise ConfigError(f"llm_concurrency must be >= 1; got {limit}")
    return threading.BoundedSemaphore(limit)
