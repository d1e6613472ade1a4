"""Embeddings from any OpenAI-compatible endpoint (OpenAI, Ollama, vLLM, LM Studio, …).

Needs the optional ``openai`` package (``pip install 'archivist[openai]'``; from a
clone ``pip install '.[openai]'``); it is imported only when this embedder is first used.
"""

from __future__ import annotations

import threading
import time
from importlib import util as importlib_util
from typing import Any

import numpy as np

from ..errors import EmbeddingError
from ..openai_client import MAX_RETRY_AFTER, endpoint_name, make_client, retry_after
from .base import is_blank, l2_normalise

RETRY_STATUSES = frozenset({408, 409, 429}) | frozenset(range(500, 600))
PROBE_TEXT = "dimension probe"


class OpenAIEmbedder:
    """Remote embeddings with bounded retries, checked for count and dimension."""

    def __init__(
        self,
        model: str,
        base_url: str,
        api_key: str = "",
        dim: int = 0,
        timeout: float = 30.0,
        batch_size: int = 64,
        http_client: Any = None,
        *,
        retries: int = 3,
        backoff: float = 0.5,
    ) -> None:
        if not model or not base_url:
            raise ValueError("OpenAIEmbedder needs a model and a base_url")
        if batch_size < 1 or dim < 0 or retries < 0:
            raise ValueError("batch_size must be >= 1, dim and retries >= 0")
        if importlib_util.find_spec("openai") is None:
            raise EmbeddingError(
                "embedder 'openai' needs the openai package: pip install 'archivist[openai]' "
                "(from a clone: pip install '.[openai]')"
            )
        self.model = model
        self.base_url = base_url
        self.name = endpoint_name(model, base_url)
        self.endpoint = base_url.rstrip("/") + "/embeddings"
        self.batch_size = batch_size
        self.retries = retries
        self.backoff = backoff
        self._api_key = api_key
        self._timeout = timeout
        self._http_client = http_client
        self._dim = dim
        self._client: Any = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"OpenAIEmbedder(model={self.model!r}, base_url={self.base_url!r}, dim={self._dim})"

    @property
    def dim(self) -> int:
        """The configured dimension, or, when none was given, one learnt from the endpoint."""
        if not self._dim:
            self._embed_chunk([PROBE_TEXT])
        return self._dim

    def embed_batch(self, texts: list[str]) -> np.ndarray:
        """Embed in requests of ``batch_size``; blank texts get zero rows and are not sent."""
        todo = [i for i, text in enumerate(texts) if not is_blank(text)]
        chunks = [
            self._embed_chunk([texts[i] for i in todo[s : s + self.batch_size]])
            for s in range(0, len(todo), self.batch_size)
        ]
        out = np.zeros((len(texts), self.dim if texts else self._dim), dtype=np.float32)
        if chunks:
            out[todo] = np.concatenate(chunks)
        return out

    def _embed_chunk(self, batch: list[str]) -> np.ndarray:
        """One request (with retries), validated and normalised."""
        data = self._request(batch)
        if len(data) != len(batch):
            raise EmbeddingError(
                f"{self.endpoint} returned {len(data)} embeddings for {len(batch)} inputs"
            )
        ordered = sorted(data, key=lambda item: item.index)
        if [item.index for item in ordered] != list(range(len(batch))):
            raise EmbeddingError(f"{self.endpoint} returned embeddings with bad indices")
        try:
            vectors = np.array([item.embedding for item in ordered], dtype=np.float32)
        except (TypeError, ValueError) as e:  # ragged rows or non-numbers
            raise EmbeddingError(f"{self.endpoint} returned malformed embeddings: {e}") from e
        if vectors.ndim != 2 or vectors.shape[1] == 0 or not np.isfinite(vectors).all():
            raise EmbeddingError(f"{self.endpoint} returned malformed embeddings")
        got = vectors.shape[1]
        if not self._dim:
            self._dim = got
        elif got != self._dim:
            raise EmbeddingError(
                f"{self.endpoint} returned {got}-dimensional embeddings for model "
                f"{self.model!r}; expected {self._dim}"
            )
        return l2_normalise(vectors)

    def _request(self, batch: list[str]) -> list[Any]:
        """POST /embeddings, retrying timeouts, 429s and 5xx with exponential backoff."""
        import openai

        client = self._get_client()
        attempt = 0
        while True:
            try:
                response = client.embeddings.create(
                    model=self.model, input=batch, encoding_format="float"
                )
                return list(response.data)
            except openai.APIStatusError as e:
                status = e.status_code
                if status not in RETRY_STATUSES or attempt >= self.retries:
                    raise EmbeddingError(self._describe(f"HTTP {status}", attempt, e)) from e
                delay = self._retry_after(e.response) or self.backoff * 2**attempt
            except openai.APIConnectionError as e:  # includes APITimeoutError
                what = "timed out" if isinstance(e, openai.APITimeoutError) else "unreachable"
                if attempt >= self.retries:
                    raise EmbeddingError(self._describe(what, attempt, e)) from e
                delay = self.backoff * 2**attempt
            except openai.OpenAIError as e:  # e.g. a response that does not parse
                raise EmbeddingError(f"{self.endpoint} failed: {e}") from e
            attempt += 1
            time.sleep(delay)

    def _describe(self, what: str, attempt: int, error: Exception) -> str:
        tries = f" after {attempt + 1} attempts" if attempt else ""
        return f"embedding endpoint {self.endpoint} (model {self.model!r}): {what}{tries}: {error}"

    def _retry_after(self, response: Any) -> float:
        """Honour a short Retry-After header; ignore long or unparsable ones."""
        seconds = retry_after(response)
        return seconds if seconds is not None and seconds <= MAX_RETRY_AFTER else 0.0

    def _get_client(self) -> Any:
        """Build the openai client on first use (retries are ours, so its own are off)."""
        with self._lock:
            if self._client is None:
                self._client = make_client(
                    self.base_url, self._api_key, self._timeout, self._http_client
                )
            return self._client
