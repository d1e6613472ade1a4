"""Exact in-memory vector search over the rows a store hands it.

Vectors live in the store (packed float32 BLOBs, the durable copy); this is a
read-side cache of them as one numpy matrix, so a query is one matrix-vector
product instead of reading every BLOB again. The SQLite store uses it for
claims and episodes; message vectors, the bulk of a large store, live in a
memory-mapped side file instead (store/vecfile.py), which needs no loading.
"""

from __future__ import annotations

import numpy as np


def pack(vec: np.ndarray) -> bytes:
    """float32 little-endian bytes of a vector (the on-disk format)."""
    return np.asarray(vec, dtype="<f4").tobytes()


def unpack_many(blobs: list[bytes], dim: int) -> np.ndarray:
    """Stack packed vectors into an (n, dim) float32 matrix."""
    if not blobs:
        return np.zeros((0, dim), dtype=np.float32)
    return (
        np.frombuffer(b"".join(blobs), dtype="<f4")
        .reshape(len(blobs), dim)
        .astype(np.float32, copy=False)
    )


def top_k(scores: np.ndarray, k: int) -> np.ndarray:
    """Indices of the k largest scores, best first."""
    if k <= 0 or scores.size == 0:
        return np.zeros(0, dtype=np.int64)
    if k >= scores.size:
        return np.argsort(-scores, kind="stable")
    part = np.argpartition(-scores, k - 1)[:k]
    return part[np.argsort(-scores[part], kind="stable")]


class DenseIndex:
    """Rowid-sorted matrix of one model's vectors; grows by appending new rowids."""

    def __init__(self, model: str) -> None:
        self.model = model
        self.rowids = np.zeros(0, dtype=np.int64)
        self._mat: np.ndarray | None = None
        self.epoch: str | None = None
        self.fill_seq = 0  # the store's vector_fills seen so far
        # Rows whose vector came after later rowids were loaded: a small unsorted
        # side matrix (inserting into the sorted one would copy all of it each time).
        self._late_ids = np.zeros(0, dtype=np.int64)
        self._late: np.ndarray | None = None

    @property
    def max_rowid(self) -> int:
        return int(self.rowids[-1]) if self.rowids.size else 0

    def __len__(self) -> int:
        return int(self.rowids.size + self._late_ids.size)

    def __contains__(self, rowid: int) -> bool:
        pos = int(np.searchsorted(self.rowids, rowid))
        held = pos < self.rowids.size and int(self.rowids[pos]) == rowid
        return held or bool((self._late_ids == rowid).any())

    def add_late(self, rowids: np.ndarray, mat: np.ndarray) -> None:
        """Add rows below ``max_rowid`` that were not held (their vectors came late)."""
        if not len(rowids):
            return
        mat = mat.astype(np.float32, copy=False)
        self._late_ids = np.concatenate([self._late_ids, rowids.astype(np.int64)])
        self._late = mat if self._late is None else np.concatenate([self._late, mat])

    def append(self, rowids: np.ndarray, mat: np.ndarray) -> None:
        """Add rows whose rowids are all greater than any already held."""
        if not len(rowids):
            return
        mat = mat.astype(np.float32, copy=False)
        self.rowids = np.concatenate([self.rowids, rowids.astype(np.int64)])
        self._mat = mat if self._mat is None else np.concatenate([self._mat, mat])

    def search(
        self, query: np.ndarray, k: int, restrict: np.ndarray | None = None
    ) -> list[tuple[int, float]]:
        """Top-k (rowid, cosine) pairs, optionally only among ``restrict`` rowids."""
        found = self._search_sorted(query, k, restrict)
        if self._late is None:
            return found
        q = np.asarray(query, dtype=np.float32).reshape(-1)
        keep = (
            np.arange(self._late_ids.size)
            if restrict is None
            else np.flatnonzero(np.isin(self._late_ids, restrict))
        )
        scores = self._late[keep] @ q
        late = [(int(self._late_ids[keep[i]]), float(scores[i])) for i in top_k(scores, k)]
        return sorted(found + late, key=lambda x: -x[1])[:k]

    def _search_sorted(
        self, query: np.ndarray, k: int, restrict: np.ndarray | None
    ) -> list[tuple[int, float]]:
        q = np.asarray(query, dtype=np.float32).reshape(-1)
        if self._mat is None:
            return []
        if q.shape[0] != self._mat.shape[1]:
            raise ValueError(f"query has {q.shape[0]} dims, index has {self._mat.shape[1]}")
        if restrict is None:
            scores = self._mat @ q
            idx = top_k(scores, k)
            return [(int(self.rowids[i]), float(scores[i])) for i in idx]
        if not self.rowids.size or not len(restrict):
            return []
        # searchsorted + an equality check drops rowids that have no vector.
        pos = np.searchsorted(self.rowids, restrict)
        clipped = np.minimum(pos, self.rowids.size - 1)
        pos = pos[(pos < self.rowids.size) & (self.rowids[clipped] == restrict)]
        if not pos.size:
            return []
        scores = self._mat[pos] @ q
        idx = top_k(scores, k)
        return [(int(self.rowids[pos[i]]), float(scores[i])) for i in idx]
