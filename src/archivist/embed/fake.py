"""FakeEmbedder: a deterministic embedder for tests and the ``fake`` provider.

It implements the real interface (a fake, not a mock), so code under test runs
unchanged and needs no model. Shipped to users through ``archivist.testing``.
"""

from __future__ import annotations

import hashlib
import re
from functools import lru_cache

import numpy as np

from .base import is_blank, l2_normalise

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
