"""The embedding interface: one required method, with helpers built on top.

Every provider returns float32 rows of unit length, so the store can compare
vectors by dot product and never has to know which model made them.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Protocol, runtime_checkable

import numpy as np


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into unit vectors of one fixed model.

    ``name`` identifies the model (and, for remote ones, the endpoint) stably
    across runs, so the store never mixes vectors of two models in one index.
    ``embed_batch`` returns a float32 array of shape ``(len(texts), dim)`` whose
    rows are L2-normalised; a text with nothing in it may get a zero row, never NaN.
    """

    name: str
    dim: int

    def embed_batch(self, texts: list[str]) -> np.ndarray:
        """Vectors for ``texts``, one unit-length row each, in the given order."""
        ...


def embed_one(embedder: Embedder, text: str) -> np.ndarray:
    """One text's vector, shape ``(dim,)``, so callers need not wrap and index."""
    return embedder.embed_batch([text])[0]


_QUERIES: OrderedDict[tuple[str, int, str], np.ndarray] = OrderedDict()
_QUERIES_MAX = 256
_QUERIES_LOCK = threading.Lock()


def query_vector(embedder: Embedder, text: str) -> np.ndarray:
    """A turn's or a query's vector, kept for the next few asks of the same text: one
    context assembly embeds its turn once, for search and for the standing items."""
    key = (embedder.name, getattr(embedder, "dim", 0) or 0, text)
    with _QUERIES_LOCK:
        if (found := _QUERIES.get(key)) is not None:
            _QUERIES.move_to_end(key)
            return found
    vector = embed_one(embedder, text)
    vector.setflags(write=False)  # shared: nobody may change it in place
    with _QUERIES_LOCK:
        _QUERIES[key] = vector
        while len(_QUERIES) > _QUERIES_MAX:
            _QUERIES.popitem(last=False)
    return vector


def forget_query_vectors() -> None:
    """Empty the cache of ``query_vector`` (a benchmark timing a cold turn calls this)."""
    with _QUERIES_LOCK:
        _QUERIES.clear()


def l2_normalise(vectors: np.ndarray) -> np.ndarray:
    """Unit-length float32 rows; all-zero rows stay zero instead of becoming NaN."""
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return np.divide(vectors, norms, out=np.zeros_like(vectors), where=norms > 0)


def is_blank(text: str) -> bool:
    """True for texts with nothing to embed; providers give these a zero row."""
    return not text or text.isspace()
