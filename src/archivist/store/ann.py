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
from pathlib import Path

import numpy as np

SUFFIX = ".sq8"  # what the side file names this index; older kinds (".usearch") are rebuilt
BUILD_BATCH = 100_000  # rows encoded at a time (bounds the float32 copy)
TRAIN_ROWS = 50_000  # rows, spread over the file, that set the 8-bit range


def _faiss():
    """faiss, with its OpenMP pool kept to one thread. One query scans as fast on one
    thread here (23 vs 26 ms p50 at 1M), encoding 1M rows takes seconds either way, and
    a second OpenMP runtime in the process (a local model's) with live worker
    threads can crash it at exit."""
    import faiss

    if faiss.omp_get_max_threads() != 1:
        faiss.omp_set_num_threads(1)
    return faiss


def new_index(dim: int):
    """An empty 8-bit uniform scalar-quantizer index scored by inner product (the
    vectors are normalised): what SQLite's side file and PostgreSQL's vector copy
    (store/pgmirror.py) both scan."""
    faiss = _faiss()
    return faiss.IndexScalarQuantizer(
        dim, faiss.ScalarQuantizer.QT_8bit_uniform, faiss.METRIC_INNER_PRODUCT
    )


def best_positions(
    index, rows: int, query: np.ndarray, count: int, admit: np.ndarray | None = None
) -> np.ndarray:
    """Positions of the ``count`` best-scoring codes of ``index``'s first ``rows``, best
    first; ``admit``: a boolean mask over those positions, only those are scored."""
    faiss = _faiss()
    count = min(count, rows)
    if count <= 0:
        return np.zeros(0, dtype=np.int64)
    q = np.ascontiguousarray(np.asarray(query, dtype=np.float32).reshape(1, -1))
    params = None
    if admit is not None:
        bits = np.packbits(admit[:rows], bitorder="little")  # kept alive below
        params = faiss.SearchParameters(sel=faiss.IDSelectorBitmap(rows, faiss.swig_ptr(bits)))
    _, found = index.search(q, count, params=params)
    keys = np.asarray(found[0], dtype=np.int64)
    return keys[keys >= 0]  # fewer admitted than asked: faiss pads with -1


def build(vecs: np.ndarray, rows: int, path: Path) -> None:
    """Encode the first ``rows`` vectors of ``vecs`` (keys = positions) into ``path``.

    The 8-bit range is learnt from rows spread over the whole file, so a later
    part of the log is not clipped by an earlier one's range (a clipped value
    only blurs the candidates: they are scored again exactly). Written to a
    temporary name and renamed, so a reader never maps half a file.
    """
    faiss = _faiss()
    index = new_index(int(vecs.shape[1]))
    sample = np.unique(np.linspace(0, rows - 1, min(rows, TRAIN_ROWS)).astype(np.int64))
    index.train(np.ascontiguousarray(vecs[sample], dtype=np.float32))
    for start in range(0, rows, BUILD_BATCH):
        stop = min(rows, start + BUILD_BATCH)
        index.add(np.ascontiguousarray(vecs[start:stop], dtype=np.float32))
    tmp = path.with_name(path.name + ".tmp")
    faiss.write_index(index, str(tmp))
    os.replace(tmp, path)


READ_CHUNK = 1 << 24
CACHED_SHARE = 0.9  # a file with less of its pages in the page cache is read first


def _read_ahead(path: Path) -> None:
    """Read the file into the page cache first when it is not there (after a reboot).

    faiss maps the codes and reads them by page faults, a page at a time: a cold
    first scan took 5.4 s for 1M rows' codes (384 MB) and 16–19 s for 3M rows'
    (1.15 GB) here, where reading the file end to end takes under a second and 2.3 s
    (``posix_fadvise`` WILLNEED changed nothing on this machine). ``mincore`` says
    how much of it is cached; a cached file is not read again.
    """
    share = _cached_share(path)
    if share is not None and share >= CACHED_SHARE:
        return
    try:
        with open(path, "rb", buffering=0) as f:
            buf = bytearray(READ_CHUNK)
            while f.readinto(buf):
                pass
    except OSError:
        return  # read_index reports it


def _cached_share(path: Path) -> float | None:
    """The share of the file's pages in the page cache (Linux ``mincore``); None where
    it cannot be asked, and then the file is read."""
    try:
        import ctypes
        import mmap

        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if not size:
                return 1.0
            # a private mapping is writable for ctypes and never writes the file
            mapped = mmap.mmap(f.fileno(), size, access=mmap.ACCESS_COPY)
        try:
            view = (ctypes.c_char * size).from_buffer(mapped)
            pages = (size + mmap.PAGESIZE - 1) // mmap.PAGESIZE
            resident = (ctypes.c_ubyte * pages)()
            libc = ctypes.CDLL(None, use_errno=True)
            rc = libc.mincore(
                ctypes.c_void_p(ctypes.addressof(view)), ctypes.c_size_t(size), resident
            )
            del view  # the mapping cannot close while a ctypes view holds it
            if rc != 0:
                return None
            return float((np.frombuffer(resident, dtype=np.uint8) & 1).mean())
        finally:
            mapped.close()
    except (OSError, ValueError, AttributeError, TypeError):
        return None


class QuantizedScan:
    """A saved index, memory-mapped: the page cache is shared by every process."""

    def __init__(self, path: Path, rows: int) -> None:
        faiss = _faiss()
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
        return best_positions(self._index, self.rows, query, count, admit)
