"""What really differs between the SQL of SQLite and PostgreSQL, and nothing else.

The store body (store/log.py, derived.py, reconcile.py, people.py,
consolidate.py, jobs.py) is written once, in SQL with ``?`` placeholders that
both engines accept: ``INSERT ... ON CONFLICT``, ``RETURNING``, window
functions and ``NOT EXISTS`` mean the same in SQLite ≥ 3.35 and PostgreSQL.
A ``Dialect`` supplies the few fragments that do not: how an id list is bound,
how text sorts by code point, row locks, how a vector is bound and read back,
epoch seconds of an ISO timestamp, and membership in a JSON array. Keyword
ranking (FTS5 vs tsvector) and vector search (an in-process matrix vs
pgvector) differ in kind, not in syntax: each backend module implements them.

Why our own layer and not SQLAlchemy Core: the store's SQL is hand-written
and measured (FTS5 MATCH with scope tokens, BM25 over tsvector, pgvector's
``<=>``), which Core could only carry as text; what remained to abstract was
this page. Measured on one group first (docs/store.md).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from functools import lru_cache

import numpy as np

from .vecindex import pack


class Rows:
    """A statement's fully fetched rows: a cursor's reading API, holding no connection state."""

    def __init__(self, rows: list, rowcount: int) -> None:
        self._rows = rows
        self._next = 0
        self.rowcount = rowcount

    def fetchone(self):
        if self._next >= len(self._rows):
            return None
        self._next += 1
        return self._rows[self._next - 1]

    def fetchall(self) -> list:
        rest, self._next = self._rows[self._next :], len(self._rows)
        return rest

    def __iter__(self):
        return iter(self.fetchall())


class Dialect:
    """SQLite's fragments; PostgresDialect overrides what PostgreSQL spells otherwise."""

    name = "sqlite"
    ids_per_query = 500  # SQLite binds each id of an IN list as its own variable
    order_text = ""  # SQLite compares text by code point already
    lock_rows = ""  # BEGIN IMMEDIATE already serialises writers
    skip_locked = ""
    vector_param = "?"  # a packed float32 BLOB
    vector_read = "v.vec"
    true = "1"

    def in_ids(self, column: str, ids: Sequence) -> tuple[str, list]:
        """``column`` is one of ``ids``: the fragment and its parameters."""
        if not ids:
            return "0 = 1", []
        return f"{column} IN ({','.join('?' * len(ids))})", list(ids)

    def chunks(self, ids: Sequence) -> Iterator[Sequence]:
        """``ids`` cut into lists one statement can bind."""
        for i in range(0, len(ids), self.ids_per_query):
            yield ids[i : i + self.ids_per_query]

    def encode_vector(self, vec: np.ndarray) -> object:
        return pack(vec)

    def decode_vector(self, raw: object) -> np.ndarray:
        return np.frombuffer(bytes(raw), dtype="<f4").astype(np.float32)  # type: ignore[arg-type]

    def epoch(self, column: str) -> str:
        """Seconds since the epoch of an ISO-8601 text column, as a float."""
        return f"CAST(strftime('%s', {column}) AS REAL)"

    def json_has(self, column: str) -> str:
        """The JSON array of text in ``column`` holds ``?`` (lower-cased)."""
        return f"EXISTS (SELECT 1 FROM json_each({column}) a WHERE lower(a.value) = ?)"


class PgVector:
    """A vector to store, bound in pgvector's binary form: ``store/postgres.py`` registers
    its dumper (four header bytes, then big-endian float4s), so the values cross as bytes,
    not as a Python list psycopg turns into an array literal float by float."""

    __slots__ = ("data",)

    def __init__(self, vec: np.ndarray) -> None:
        self.data = np.asarray(vec, dtype=">f4").reshape(-1)

    def __len__(self) -> int:
        return int(self.data.shape[0])


class PostgresDialect(Dialect):
    name = "postgres"
    ids_per_query = 1_000_000  # one array parameter, whatever its length
    order_text = ' COLLATE "C"'  # sort by code point, as SQLite does, whatever the locale
    lock_rows = " FOR UPDATE"
    skip_locked = " FOR UPDATE SKIP LOCKED"
    vector_param = "?::vector"
    vector_read = "v.vec::real[]"
    true = "TRUE"

    def in_ids(self, column: str, ids: Sequence) -> tuple[str, list]:
        return f"{column} = ANY(?)", [list(ids)]

    def encode_vector(self, vec: np.ndarray) -> object:
        return PgVector(vec)

    def decode_vector(self, raw: object) -> np.ndarray:
        return np.asarray(raw, dtype=np.float32)

    def epoch(self, column: str) -> str:
        return f"extract(epoch FROM {column}::timestamptz)"

    def json_has(self, column: str) -> str:
        return (
            f"EXISTS (SELECT 1 FROM jsonb_array_elements_text({column}::jsonb) a(v) "
            "WHERE lower(a.v) = ?)"
        )


SQLITE = Dialect()
POSTGRES = PostgresDialect()

_LITERAL = re.compile(r"('(?:[^']|'')*')")


@lru_cache(maxsize=2048)
def to_format_style(sql: str) -> str:
    """``?`` placeholders as psycopg's ``%s`` (``%`` escaped; quoted literals left alone)."""
    parts = _LITERAL.split(sql.replace("%", "%%"))
    return "".join(p if i % 2 else p.replace("?", "%s") for i, p in enumerate(parts))
