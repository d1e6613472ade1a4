"""HTTP statuses of archivist's errors, shared by the JSON API and the memory browser."""

from __future__ import annotations

from ..errors import (
    ArchivistError,
    ConfigError,
    EmbeddingError,
    EmbeddingMismatch,
    Forbidden,
    InputError,
    NotFound,
    StoreError,
)

STATUS: tuple[tuple[type[ArchivistError], int], ...] = (
    (NotFound, 404),
    (Forbidden, 403),
    (InputError, 400),
    (EmbeddingMismatch, 409),
    (StoreError, 503),
    (EmbeddingError, 503),
    (ConfigError, 500),
)


def status_for(error: ArchivistError) -> int:
    """The HTTP status of an archivist error (the CLI's exit codes, as statuses)."""
    return next((code for kind, code in STATUS if isinstance(error, kind)), 500)
