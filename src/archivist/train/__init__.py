"""Training what archivist ships: ``python -m archivist.train judge`` (the ``train`` extra)."""

from __future__ import annotations

import hashlib
from pathlib import Path


def file_hash(path: Path) -> str:
    """The first 16 hex digits of a training file's sha256 (what a model card records)."""
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]
