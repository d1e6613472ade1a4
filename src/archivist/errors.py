"""One rooted exception tree; the CLI maps it to messages and exit codes.

ArchivistError
├── ConfigError          bad settings or environment
├── InputError           bad data from the caller
│   └── LoadError        a malformed file: names file, record and field
├── StoreError           the database refused or is inconsistent
│   ├── EmbeddingMismatch  index built with another embedding model
│   ├── StaleExtraction    a session's extraction moved on while it was read
│   └── StaleReconciliation  another writer reconciled the conversation meanwhile
├── EmbeddingError       the embedder failed (model missing, endpoint down)
├── NotFound             an id, conversation or person that is not stored
└── Forbidden            the caller's key may not do this (a key bound to one user)
"""

from __future__ import annotations


class ArchivistError(Exception):
    """Root of every error archivist raises on purpose."""

    exit_code = 1


class ConfigError(ArchivistError):
    """Settings are missing or contradictory."""

    exit_code = 2


class InputError(ArchivistError):
    """Caller-supplied data is invalid; nothing was stored."""

    exit_code = 3


class LoadError(InputError):
    """A file could not be loaded; the message names file, record and field."""

    def __init__(self, path: str, record: str | int | None, field: str | None, problem: str):
        self.path = path
        self.record = record
        self.field = field
        self.problem = problem
        where = str(path)
        if record is not None:
            where += f", record {record}"
        if field:
            where += f", field '{field}'"
        super().__init__(f"{where}: {problem}")


class StoreError(ArchivistError):
    """The store failed; the transaction was rolled back."""

    exit_code = 4


class EmbeddingMismatch(StoreError):
    """Vectors from two embedding models would be mixed in one index."""


class StaleExtraction(StoreError):
    """An append to a session's extraction found the session extracted further meanwhile
    (another process got there first); nothing was written."""


class StaleReconciliation(StoreError):
    """What a conversation's reconciliation was decided from changed before it was written
    (another process reconciled, re-extracted or corrected it); nothing was written."""


class EmbeddingError(ArchivistError):
    """The embedding model could not produce vectors."""

    exit_code = 5


class NotFound(ArchivistError):
    """The requested item is not stored."""

    exit_code = 6


class Forbidden(ArchivistError):
    """The caller's key does not allow this request (the server answers 403)."""

    exit_code = 7
