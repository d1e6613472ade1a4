"""Deterministic fakes of archivist's provider interfaces, shipped for tests.

They implement the real interfaces (fakes, not mocks), so code under test runs
unchanged and needs no model, network or GPU.
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
import threading
from collections import deque
from collections.abc import Callable
from functools import lru_cache
from typing import Any

import numpy as np

from .embed.base import is_blank, l2_normalise
from .llm.base import Completion

# --------------------------------------------------------------------------------------
# FakeEmbedder
# --------------------------------------------------------------------------------------

_WORD = re.compile(r"\w+")
TRIGRAM_WEIGHT = 0.25  # words dominate; trigrams only make "cat"/"cats" a little alike


@lru_cache(maxsize=65536)
def _bucket(feature: str, dim: int) -> tuple[int, float]:
    """A stable (bucket, ±1) for a feature: blake2b, not Python's per-process hash()."""
    digest = hashlib.blake2b(feature.encode("utf-8"), digest_size=8).digest()
    value = int.from_bytes(digest, "little")
    return value % dim, (1.0 if (value >> 63) & 1 else -1.0)


class FakeEmbedder:
    """Hashed bag of words (plus light character trigrams): texts sharing words are closer."""

    def __init__(self, dim: int = 64) -> None:
        if dim < 1:
            raise ValueError(f"dim must be >= 1; got {dim}")
        self.dim = dim
        self.name = f"fake:{dim}"
        self.calls = 0  # embed_batch calls, to check caching in tests
        self.texts_embedded = 0

    def __repr__(self) -> str:
        return f"FakeEmbedder(dim={self.dim})"

    def embed_batch(self, texts: list[str]) -> np.ndarray:
        """The same text always gets the same vector, in every process."""
        self.calls += 1
        self.texts_embedded += len(texts)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            if not is_blank(text):
                out[row] = self._vector(text)
        return l2_normalise(out)

    def _vector(self, text: str) -> np.ndarray:
        vec = np.zeros(self.dim, dtype=np.float32)
        for word in _WORD.findall(text.lower()):
            bucket, sign = _bucket("w:" + word, self.dim)
            vec[bucket] += sign
            padded = f"<{word}>"
            for i in range(len(padded) - 2):
                bucket, sign = _bucket("t:" + padded[i : i + 3], self.dim)
                vec[bucket] += sign * TRIGRAM_WEIGHT
        return vec


# --------------------------------------------------------------------------------------
# FakeLLM
# --------------------------------------------------------------------------------------

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

    def complete(
        self,
        messages: list[dict],
        *,
        schema: dict | None = None,
        temperature: float = 0.0,
        max_tokens: int | None = None,
        timeout: float | None = None,
    ) -> Completion:
        """The next scripted answer; an exception in the script is raised here."""
        with self._lock:
            number = len(self.calls) + 1
            self.calls.append(
                {
                    "messages": copy.deepcopy(messages),
                    "schema": schema,
                    "temperature": temperature,
                    "max_tokens": max_tokens,
                }
            )
            response = self._queue.popleft() if self._queue else None
        if response is None:
            if self.responder is None:
                raise RuntimeError(
                    f"FakeLLM: call {number} has no scripted response "
                    "(enqueue() more, or pass responder=)"
                )
            response = self.responder(messages, schema)
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
