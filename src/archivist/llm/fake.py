"""FakeLLM: a scripted ChatModel for tests and the ``fake`` provider.

It implements the real interface (a fake, not a mock): answers come from a
queue or a responder and every call is kept. Shipped through ``archivist.testing``.
"""

from __future__ import annotations

import copy
import json
import threading
from collections import deque
from collections.abc import Callable
from typing import Any, Unpack

from .base import CallOptions, CallOptionsDict, Completion

#: What a scripted answer may be: text, a JSON value, a ready Completion, or an error to raise.
FakeResponse = str | dict | list | Completion | BaseException | type[BaseException]
Responder = Callable[[list[dict], dict | None], FakeResponse]


class FakeLLM:
    """A scripted ChatModel: answers come from a queue (or a responder), every call is kept.

    ``enqueue("text", {"json": 1}, LLMTimeout("slow"))`` scripts three calls in
    order; ``responder(messages, schema)`` answers once the queue is empty.
    ``calls`` holds each call's messages and schema, so tests can read the prompts.
    """

    def __init__(
        self,
        *responses: FakeResponse,
        responder: Responder | None = None,
        name: str = "fake-llm",
    ) -> None:
        self.name = name
        self.responder = responder
        self.calls: list[dict[str, Any]] = []
        self._queue: deque[FakeResponse] = deque(responses)
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"FakeLLM(name={self.name!r}, queued={len(self._queue)}, calls={len(self.calls)})"

    @property
    def pending(self) -> int:
        """How many scripted responses are still queued."""
        return len(self._queue)

    def enqueue(self, *responses: FakeResponse) -> FakeLLM:
        """Script the next answers, in order; returns self for chaining."""
        with self._lock:
            self._queue.extend(responses)
        return self

    def complete(self, messages: list[dict], **options: Unpack[CallOptionsDict]) -> Completion:
        """The next scripted answer; an exception in the script is raised here."""
        opts = CallOptions(**options)
        with self._lock:
            number = len(self.calls) + 1
            self.calls.append(
                {
                    "messages": copy.deepcopy(messages),
                    "schema": opts.schema,
                    "temperature": opts.temperature,
                    "max_tokens": opts.max_tokens,
                }
            )
            response = self._queue.popleft() if self._queue else None
        if response is None:
            if self.responder is None:
                raise RuntimeError(
                    f"FakeLLM: call {number} has no scripted response "
                    "(enqueue() more, or pass responder=)"
                )
            response = self.responder(messages, opts.schema)
        return self._answer(response, messages)

    def _answer(self, response: FakeResponse, messages: list[dict]) -> Completion:
        """Turn one scripted response into a Completion (or raise it)."""
        if isinstance(response, BaseException) or (
            isinstance(response, type) and issubclass(response, BaseException)
        ):
            raise response
        if isinstance(response, Completion):
            return response
        text = response if isinstance(response, str) else json.dumps(response)
        prompt = " ".join(str(m.get("content", "")) for m in messages)
        return Completion(
            text=text,
            input_tokens=_count_words(prompt),
            output_tokens=_count_words(text),
            model=self.name,
            finish_reason="stop",
        )


def _count_words(text: str) -> int:
    """A rough, deterministic token count: whitespace-separated words."""
    return len(text.split())
