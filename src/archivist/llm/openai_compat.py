"""Chat completions from any OpenAI-compatible endpoint (OpenAI, vLLM, Ollama, llama.cpp, …).

Only the standard ``chat.completions`` API is used. Servers differ in what they
accept, so a rejected ``response_format`` (or ``max_tokens`` / ``temperature``)
is downgraded once and remembered for the instance. Needs the optional
``openai`` package (``pip install 'archivist[openai]'``; from a clone
``pip install '.[openai]'``), imported on first use.
"""

from __future__ import annotations

import json
import re
import threading
import time
from importlib import util as importlib_util
from typing import Any, Unpack

from ..openai_client import MAX_RETRY_AFTER, endpoint_name, make_client, retry_after
from .base import (
    CallOptions,
    CallOptionsDict,
    Completion,
    LLMError,
    LLMRateLimited,
    LLMRefused,
    LLMTimeout,
)

RETRY_STATUSES = frozenset({408, 409}) | frozenset(range(500, 600))
REJECTED_STATUSES = frozenset({400, 422})  # "this request is wrong": maybe a parameter
FORMATS = ("json_schema", "json_object", "none")  # strongest first
# Words in a 400 that blame structured output (OpenAI, vLLM guided decoding, llama.cpp grammars).
_FORMAT_WORDS = ("response_format", "json_schema", "json_object", "schema", "grammar", "guided")
_NAME_CHARS = re.compile(r"[^A-Za-z0-9_-]")


def schema_name(schema: dict) -> str:
    """The schema's title as OpenAI accepts it (letters, digits, _ and -; 64 at most)."""
    name = _NAME_CHARS.sub("_", str(schema.get("title") or "response"))[:64]
    return name or "response"


def schema_instruction(schema: dict) -> str:
    """What the model is told when the server cannot enforce the schema itself."""
    return (
        "Reply with a single JSON value only, no prose or code fences, "
        "matching this JSON schema:\n" + json.dumps(schema, ensure_ascii=False)
    )


def with_instruction(messages: list[dict], text: str) -> list[dict]:
    """``messages`` with ``text`` added to the leading system message (or as a new one)."""
    messages = list(messages)
    first = messages[0] if messages else None
    if first and first.get("role") == "system" and isinstance(first.get("content"), str):
        messages[0] = {**first, "content": first["content"].rstrip() + "\n\n" + text}
    else:
        messages.insert(0, {"role": "system", "content": text})
    return messages


class OpenAIChatModel:
    """A ChatModel over ``/chat/completions`` with bounded retries and graceful downgrades."""

    def __init__(
        self,
        model: str,
        base_url: str,
        api_key: str = "",
        timeout: float = 60.0,
        http_client: Any = None,
        max_retries: int = 3,
        backoff: float = 0.5,
    ) -> None:
        if not model or not base_url:
            raise ValueError("OpenAIChatModel needs a model and a base_url")
        if max_retries < 0 or backoff < 0 or timeout <= 0:
            raise ValueError("max_retries and backoff must be >= 0, timeout > 0")
        if importlib_util.find_spec("openai") is None:
            raise LLMError(
                "llm 'openai' needs the openai package: pip install 'archivist[openai]' "
                "(from a clone: pip install '.[openai]')"
            )
        self.model = model
        self.base_url = base_url
        self.name = endpoint_name(model, base_url)
        self.timeout = timeout
        self.max_retries = max_retries
        self.backoff = backoff
        self._api_key = api_key
        self._http_client = http_client
        self._client: Any = None
        self._lock = threading.Lock()
        # What this server accepts, learnt from its 400s; only ever downgraded.
        self.response_format = FORMATS[0]
        self.token_param = "max_tokens"
        self.send_temperature = True

    def __repr__(self) -> str:
        return f"OpenAIChatModel(model={self.model!r}, base_url={self.base_url!r})"

    def complete(self, messages: list[dict], **options: Unpack[CallOptionsDict]) -> Completion:
        """One chat completion; a parameter the server rejects is dropped and the call redone."""
        import openai

        opts = CallOptions(**options)
        for _ in range(len(FORMATS) + 2):  # every downgrade happens at most once
            params = self._params(messages, opts)
            try:
                return self._completion(self._send(params))
            except openai.APIStatusError as e:
                if e.status_code not in REJECTED_STATUSES or not self._downgrade(e, params):
                    raise self._rejected(e) from e
        raise LLMError(f"{self.name}: the server rejected every variant of the request")

    def _params(self, messages: list[dict], opts: CallOptions) -> dict[str, Any]:
        """Request arguments for what this server is known to accept."""
        params: dict[str, Any] = {"model": self.model, "messages": messages}
        if self.send_temperature:
            params["temperature"] = opts.temperature
        if opts.max_tokens is not None:
            params[self.token_param] = opts.max_tokens
        if opts.timeout is not None:
            params["timeout"] = opts.timeout
        if (schema := opts.schema) is not None:
            if self.response_format == "json_schema":
                params["response_format"] = {
                    "type": "json_schema",
                    "json_schema": {"name": schema_name(schema), "schema": schema, "strict": False},
                }
            else:
                params["messages"] = with_instruction(messages, schema_instruction(schema))
                if self.response_format == "json_object":
                    params["response_format"] = {"type": "json_object"}
        return params

    def _downgrade(self, error: Exception, params: dict[str, Any]) -> bool:
        """Stop sending what the server just rejected; False if nothing we sent explains it."""
        text = f"{error} {getattr(error, 'body', '')}".lower()
        sent_format = params.get("response_format", {}).get("type")
        with self._lock:
            if sent_format and any(word in text for word in _FORMAT_WORDS):
                if self.response_format == sent_format:  # another thread may have done it
                    self.response_format = FORMATS[FORMATS.index(sent_format) + 1]
                return True
            if "max_tokens" in params and "max_completion_tokens" in text:
                self.token_param = "max_completion_tokens"
                return True
            if "temperature" in params and "temperature" in text:
                self.send_temperature = False
                return True
        return False

    def _rejected(self, error: Any) -> LLMError:
        """The error for a final 4xx: a content-policy block is a refusal, the rest failures."""
        text = f"{error} {getattr(error, 'body', '')}".lower()
        if "content_filter" in text or "content_policy" in text or "content management" in text:
            return LLMRefused(f"{self.name}: the request was blocked by a content filter: {error}")
        return LLMError(f"{self.name}: HTTP {error.status_code}: {error}")

    def _send(self, params: dict[str, Any]) -> Any:
        """POST once per try: 429, 5xx and connection errors retried; timeouts raised at once."""
        import openai

        client = self._get_client()
        attempt = 0
        while True:
            try:
                return client.chat.completions.create(**params)
            except openai.APITimeoutError as e:  # the caller's budget decides on a retry
                raise LLMTimeout(f"{self.name}: timed out: {e}") from e
            except openai.RateLimitError as e:
                wait = retry_after(e.response)
                if attempt >= self.max_retries or (wait or 0.0) > MAX_RETRY_AFTER:
                    raise LLMRateLimited(self._describe("HTTP 429", attempt, e), wait) from e
                delay = wait if wait is not None else self.backoff * 2**attempt
            except openai.APIStatusError as e:
                if e.status_code not in RETRY_STATUSES:
                    raise  # complete() decides: downgrade, refusal or failure
                if attempt >= self.max_retries:
                    raise LLMError(self._describe(f"HTTP {e.status_code}", attempt, e)) from e
                delay = self.backoff * 2**attempt
            except openai.APIConnectionError as e:
                if attempt >= self.max_retries:
                    raise LLMError(self._describe("unreachable", attempt, e)) from e
                delay = self.backoff * 2**attempt
            except openai.OpenAIError as e:  # e.g. a response body that does not parse
                raise LLMError(f"{self.name}: {e}") from e
            attempt += 1
            time.sleep(delay)

    def _completion(self, response: Any) -> Completion:
        """The first choice as a Completion; refusals and content filters raise LLMRefused."""
        choices = getattr(response, "choices", None) or []
        if not choices:
            raise LLMError(f"{self.name}: the response has no choices")
        choice = choices[0]
        message = choice.message
        refusal = getattr(message, "refusal", None)
        if refusal or choice.finish_reason == "content_filter":
            raise LLMRefused(f"{self.name}: {refusal or 'stopped by a content filter'}")
        usage = getattr(response, "usage", None)
        return Completion(
            text=message.content or "",
            input_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
            output_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
            model=getattr(response, "model", None) or self.model,
            finish_reason=choice.finish_reason,
        )

    def _describe(self, what: str, attempt: int, error: Exception) -> str:
        tries = f" after {attempt + 1} attempts" if attempt else ""
        return f"{self.name} ({self.base_url}): {what}{tries}: {error}"

    def _get_client(self) -> Any:
        """Build the openai client on first use (retries are ours, so its own are off)."""
        with self._lock:
            if self._client is None:
                self._client = make_client(
                    self.base_url, self._api_key, self.timeout, self._http_client
                )
            return self._client
