"""An approximate nearest-neighbour graph over the vector side file (usearch HNSW).

Why usearch (measured in docs/store.md, 100k vectors of the bench's structured
synthetic data, 2 cores): its saved index opens as a memory-mapped view in
~15 ms (hnswlib loads the whole file, ~175 ms at 100k; faiss HNSW ~130 ms),
it stores int8 vectors (a quarter of float32), and it built fastest of the
HNSW libraries at equal recall. The graph only proposes candidates: the
caller scores them again exactly from the float32 side file, so int8 costs
ranking nothing. Keys are positions in the side file, not rowids, so a
message deleted after the build is dropped by the side file's tombstones.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

CONNECTIVITY = 32  # HNSW M: edges per node (recall@10 0.944 vs 0.913 for 16 at ef 2048)
EXPANSION_ADD = 256  # candidates kept while inserting: 0.980 vs 0.944 for 128, 2.8x build
EXPANSION_SEARCH = 2048  # candidates kept while searching (0.897 at 512; see docs/store.md)
# Recall at a fixed ef falls as the graph grows: on the 1M scale store, ef 2048 / 4096 /
# 8192 gave recall@10 0.81 / 0.89 / 0.95 at 18 / 34 / 68 ms p50 (docs/store.md).
LARGE_GRAPH = 250_000
LARGE_EXPANSION_SEARCH = 8192


def search_ef(rows: int) -> int:
    """How many candidates a search keeps for a graph of ``rows`` vectors."""
    return EXPANSION_SEARCH if rows <= LARGE_GRAPH else LARGE_EXPANSION_SEARCH


BUILD_BATCH = 100_000  # rows handed to usearch at a time (bounds the float32 copy)
SMALL_GRAPH = 20_000  # built on one thread: deterministic, and quick either way


def _index(dim: int):
    from usearch.index import Index

    return Index(
        ndim=dim,
        metric="ip",  # the vectors are normalised: inner product is cosine
        dtype="i8",
        connectivity=CONNECTIVITY,
        expansion_add=EXPANSION_ADD,
        expansion_search=EXPANSION_SEARCH,
    )


def build(vecs: np.ndarray, rows: int, path: Path, base: tuple[Path, int] | None = None) -> None:
    """Index the first ``rows`` vectors of ``vecs`` (keys = positions) into ``path``.

    ``base``: a saved graph over the first positions, loaded and extended with the
    rest (adding 10% to a graph is far cheaper than building it again). Written to a
    temporary name and renamed, so a reader never maps half a file.
    """
    from usearch.index import Index

    first = 0
    index = None
    if base is not None:
        index = Index.restore(str(base[0]), view=False)
        first = base[1] if index is not None else 0
    if index is None:
        index = _index(int(vecs.shape[1]))
    for start in range(first, rows, BUILD_BATCH):
        stop = min(rows, start + BUILD_BATCH)
        chunk = np.ascontiguousarray(vecs[start:stop], dtype=np.float32)
        # One thread for small graphs: the same rows build the same graph (tests
        # compare it with exact search); all cores for large ones.
        threads = 1 if rows <= SMALL_GRAPH else 0
        index.add(np.arange(start, stop, dtype=np.uint64), chunk, threads=threads)
    tmp = path.with_name(path.name + ".tmp")
    index.save(str(tmp))
    os.replace(tmp, path)


class Graph:
    """A saved graph opened as a view: pages come in from disk as searches touch them."""

    def __init__(self, path: Path, rows: int) -> None:
        from usearch.index import Index

        self.rows = rows
        self._index = Index.restore(str(path), view=True)
        if self._index is None:
            raise OSError(f"cannot read the vector graph {path}")
        self.ef = search_ef(rows)
        self._index.expansion_search = self.ef

    def candidates(self, query: np.ndarray, count: int) -> np.ndarray:
        """Positions of up to ``count`` approximate nearest neighbours of ``query``."""
        count = min(count, self.rows)
        if count <= 0:
            return np.zeros(0, dtype=np.int64)
        found = self._index.search(np.asarray(query, dtype=np.float32), count, threads=1)
        return np.asarray(found.keys, dtype=np.int64)
