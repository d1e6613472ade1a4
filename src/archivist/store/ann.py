"""Whole-store candidates for a large SQLite store: an 8-bit scan of every vector (faiss).

Why a quantized scan and not a graph (docs/store.md; 1M vectors of the scale
benchmark's synthetic data, 2 cores, the same session): reading one byte per
dimension (faiss ``IndexScalarQuantizer``, 8-bit uniform, a quarter of the
float32 file) takes ~25 ms a query at 1M, and its best 100 candidates, scored
again from the float32 side file, held the exact top 10 in every query tried.
The usearch HNSW graph it replaces needed ef 8,192 and 68–109 ms for recall@10
0.95 there, and 13 minutes to build; this index builds in ~3 s and opens
memory-mapped (``IO_FLAG_MMAP_IFC``) in a millisecond. A scan also takes a
bitmap of the positions a search admits, so filters and tombstones are
honoured inside it instead of by over-fetching and hoping enough pass.

Keys are positions in the side file; the caller maps them to rowids.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np

SUFFIX = ".sq8"  # what the side file names this index; older kinds (".usearch") are rebuilt
BUILD_BATCH = 100_000  # rows encoded at a time (bounds the float32 copy)
TRAIN_ROWS = 50_000  # rows, spread over the file, that set the 8-bit range


def build(vecs: np.ndarray, rows: int, path: Path) -> None:
    """Encode the first ``rows`` vectors of ``vecs`` (keys = positions) into ``path``.

    The 8-bit range is learnt from rows spread over the whole file, so a later
    part of the log is not clipped by an earlier one's range (a clipped value
    only blurs the candidates: they are scored again exactly). Written to a
    temporary name and renamed, so a reader never maps half a file.
    """
    import faiss

    dim = int(vecs.shape[1])
    index = faiss.IndexScalarQuantizer(
        dim, faiss.ScalarQuantizer.QT_8bit_uniform, faiss.METRIC_INNER_PRODUCT
    )
    sample = np.unique(np.linspace(0, rows - 1, min(rows, TRAIN_ROWS)).astype(np.int64))
    index.train(np.ascontiguousarray(vecs[sample], dtype=np.float32))
    for start in range(0, rows, BUILD_BATCH):
        stop = min(rows, start + BUILD_BATCH)
        index.add(np.ascontiguousarray(vecs[start:stop], dtype=np.float32))
    tmp = path.with_name(path.name + ".tmp")
    faiss.write_index(index, str(tmp))
    os.replace(tmp, path)


PROBES = 32  # pages read at spread offsets to tell a cold file from a cached one
COLD_PROBE_S = 0.005  # 32 cached pages take ~0.1 ms to read; from disk, tens of ms
READ_CHUNK = 1 << 24


def _read_ahead(path: Path) -> None:
    """Read the file into the page cache first when it is not there (after a reboot).

    faiss maps the codes and reads them by page faults, a page at a time: a cold
    first scan of 3M rows' codes (1.15 GB) took 16–19 s here, where reading the
    file end to end takes 2.3 s and the scan after it 0.17 s (``posix_fadvise``
    WILLNEED changed nothing on this machine). A few pages read at spread offsets
    tell whether the file is cached; a cached one is not read again.
    """
    try:
        with open(path, "rb", buffering=0) as f:
            size = os.fstat(f.fileno()).st_size
            t = time.perf_counter()
            for i in range(PROBES):
                os.pread(f.fileno(), 1, size * i // PROBES)
            if time.perf_counter() - t < COLD_PROBE_S:
                return
            buf = bytearray(READ_CHUNK)
            while f.readinto(buf):
                pass
    except OSError:
        return  # read_index reports it


class QuantizedScan:
    """A saved index, memory-mapped: the page cache is shared by every process."""

    def __init__(self, path: Path, rows: int) -> None:
        import faiss

        self.rows = rows
        _read_ahead(path)
        try:
            self._index = faiss.read_index(str(path), faiss.IO_FLAG_MMAP_IFC)
        except RuntimeError as e:  # faiss reports a short or foreign file this way
            raise OSError(f"cannot read the vector index {path}: {e}") from e
        if self._index.ntotal != rows:
            raise OSError(f"the vector index {path} holds {self._index.ntotal} rows, not {rows}")

    def candidates(self, query: np.ndarray, count: int, admit: np.ndarray | None = None):
        """Positions of the ``count`` best-scoring vectors by their 8-bit codes.

        ``admit``: a boolean mask over the index's positions; only those are scored.
        """
        import faiss

        count = min(count, self.rows)
        if count <= 0:
            return np.zeros(0, dtype=np.int64)
        q = np.ascontiguousarray(np.asarray(query, dtype=np.float32).reshape(1, -1))
        params = None
        if admit is not None:
            bits = np.packbits(admit[: self.rows], bitorder="little")  # kept alive below
            params = faiss.SearchParameters(
                sel=faiss.IDSelectorBitmap(self.rows, faiss.swig_ptr(bits))
            )
        _, found = self._index.search(q, count, params=params)
        keys = np.asarray(found[0], dtype=np.int64)
        return keys[keys >= 0]  # fewer admitted than asked: faiss pads with -1
