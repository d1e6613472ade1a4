"""The chat-model interface: one required method, and the LLM layer's errors.

Everything above this layer (structured calls, prompts, the write path) talks
to ``ChatModel.complete`` only, so a provider is one small class and a test
double is a scripted queue (``archivist.testing.FakeLLM``).

LLMError               any failure of the LLM layer (exit code 7)
├── LLMTimeout         the request took longer than its timeout (transient)
├── LLMRateLimited     HTTP 429 after the client's own retries (transient)
├── LLMRefused         the model refused or a content filter fired
└── LLMBadOutput       no valid structured output within the attempt budget
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, TypedDict, Unpack, runtime_checkable

from ..errors import ArchivistError

Messages = list[dict]


@dataclass(frozen=True)
class Completion:
    """One model answer with what it cost, so callers can count calls and tokens."""

    text: str
    input_tokens: int
    output_tokens: int
    model: str
    finish_reason: str | None = None


class CallOptionsDict(TypedDict, total=False):
    """The keywords ``ChatModel.complete`` takes, each optional (defaults in ``CallOptions``)."""

    schema: dict | None
    temperature: float
    max_tokens: int | None
    timeout: float | None


@dataclass(frozen=True)
class CallOptions:
    """One call's options with their defaults; a provider builds it once from the keywords.

    ``max_tokens`` or ``timeout`` (seconds) None leaves the provider's own limit in force.
    """

    schema: dict | None = None
    temperature: float = 0.0
    max_tokens: int | None = None
    timeout: float | None = None


@runtime_checkable
class ChatModel(Protocol):
    """A chat model behind any API, reduced to one call.

    ``name`` identifies model and endpoint stably across runs (it is part of
    every response-cache key). ``schema`` is a JSON schema the answer should
    follow; providers pass it to the server where they can and the caller
    validates either way.
    """

    @property
    def name(self) -> str:
        """The model's stable name (read-only: a plain attribute satisfies it too)."""
        ...

    def complete(self, messages: list[dict], **options: Unpack[CallOptionsDict]) -> Completion:
        """The model's answer to ``messages`` (OpenAI chat format).

        Called with keywords (``schema=``, ``temperature=``, ``max_tokens=``,
        ``timeout=``); an implementation may spell them out instead, with the
        defaults of ``CallOptions``.
        """
        ...


class LLMError(ArchivistError):
    """The LLM layer failed; the message that triggered the call is still stored."""

    exit_code = 7


class LLMTimeout(LLMError):
    """The request timed out; worth retrying later."""


class LLMRateLimited(LLMError):
    """The server kept answering 429; ``retry_after`` is its own hint in seconds, if any."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class LLMRefused(LLMError):
    """The model declined (refusal or content filter): skip this input, keep the message."""


class LLMBadOutput(LLMError):
    """Answers never validated; keeps the last raw text and its errors for diagnosis."""

    def __init__(self, task: str, raw_text: str, errors: list[str], attempts: int) -> None:
        self.task = task
        self.raw_text = raw_text
        self.errors = list(errors)
        self.attempts = attempts
        shown = "; ".join(self.errors[:3]) or "unknown error"
        if len(self.errors) > 3:
            shown += f"; … ({len(self.errors) - 3} more)"
        super().__init__(f"{task}: no valid structured output after {attempts} attempt(s): {shown}")


#: Errors that say "try again later", not "this input cannot work".
TRANSIENT_ERRORS: tuple[type[LLMError], ...] = (LLMTimeout, LLMRateLimited)
