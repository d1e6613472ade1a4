"""Pure SQL builders for PostgreSQL: each returns ``(sql, params)`` and is testable as a string.

The PostgreSQL side of store/sql.py. Keyword search is BM25 computed in SQL
over the rows a GIN index hands back (``ts_rank`` is not BM25: its top 10
overlapped BM25's by 8% in shared/research/storage.md); vector search is exact
(``(vec <=> q) + 0`` keeps the planner off the HNSW index) within the filtered
rows. User text never reaches a ``tsquery`` as syntax: it is cut into words
first (``sql.query_terms``) and each lexeme is quoted.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .dialect import POSTGRES, PgVector
from .sql import KEYS, Filters, scope_token, where

BM25_K1 = 1.2  # FTS5's defaults, so the two backends rank alike
BM25_B = 0.75
MAX_QUERY_LEXEMES = 256  # a "keyword query" longer than this is a document: rank its first words
# BM25 reads each candidate's term frequencies by unnesting its tsvector (about 6 µs a
# row); the candidates are first ranked with each term counted once (a ``@@`` per term)
# and only the best max(PRESCORED_PER_HIT x k, PRESCORED_MIN) are ranked exactly. A
# message's score only grows with a term's count, so one left out would have had to
# climb past all of those.
PRESCORED_PER_HIT = 4
PRESCORED_MIN = 200


def quote_lexeme(lexeme: str, weight: str = "") -> str:
    """A lexeme as a ``tsquery`` literal (no re-parsing, no stemming), optionally weighted."""
    body = lexeme.replace("\\", "\\\\").replace("'", "''")
    return f"'{body}'" + (f":{weight}" if weight else "")


def lexemes_sql(terms: Sequence[str]) -> tuple[str, list]:
    """The English lexemes of query terms (stemmed, stopwords and over-long words gone)."""
    return (
        "SELECT DISTINCT lexeme FROM "
        "unnest(tsvector_to_array(to_tsvector('english'::regconfig, ?))) AS lexeme "
        "ORDER BY lexeme",
        [" ".join(terms)],
    )


def corpus_sql(table: str) -> tuple[str, list]:
    """Documents and mean document length of a table (BM25's N and avgdl)."""
    return f"SELECT count(*), coalesce(avg(doc_len), 0)::float8 FROM {table}", []


def sampled_corpus_sql(table: str) -> tuple[str, list]:
    """BM25's N and avgdl of a large table without reading it all: the row count the
    last VACUUM or ANALYZE left in ``pg_class`` (0 or less: never counted) and the mean
    length of the rows on one page in four hundred."""
    return (
        "SELECT (SELECT reltuples FROM pg_class WHERE oid = to_regclass(?))::float8, "
        f"(SELECT coalesce(avg(doc_len), 0) FROM {table} TABLESAMPLE SYSTEM (0.25) "
        "REPEATABLE (7))::float8",
        [table],
    )


def doc_freq_sql(table: str, lexemes: Sequence[str], cap: int | None) -> tuple[str, list]:
    """Documents holding each lexeme, counting at most ``cap`` (cost bounded)."""
    limit = "LIMIT ?" if cap is not None else ""
    sql = (
        "SELECT t.lexeme, (SELECT count(*) FROM (SELECT 1 FROM "
        f"{table} d WHERE d.search_tsv @@ t.tq::tsquery {limit}) s) "
        "FROM unnest(?::text[], ?::text[]) AS t(lexeme, tq)"
    )
    params: list = [] if cap is None else [int(cap)]
    # Unweighted: the GIN bitmap answers without rechecking each row's tsvector
    # (scope tokens are "c"/"p" + 16 hex digits, never an English lexeme).
    return sql, [*params, list(lexemes), [quote_lexeme(x) for x in lexemes]]


def scope_tsquery(f: Filters) -> str | None:
    """The ``tsquery`` for the conversation/person part of the filters (None if none)."""
    parts = []
    if (convs := f.conversations()) is not None:
        if convs:  # none at all: the SQL filter alone answers (nothing)
            parts.append(
                "(" + " | ".join(quote_lexeme(scope_token("c", c), "D") for c in convs) + ")"
            )
    for person in (f.person, f.speaker):  # a speaker is one of the message's people
        if person is not None:
            parts.append(quote_lexeme(scope_token("p", person), "D"))
    return " & ".join(parts) if parts else None


def match_tsquery(lexemes: Sequence[str], f: Filters) -> str:
    """Any of the lexemes in the text, within the filters' scope tokens."""
    terms = "(" + " | ".join(quote_lexeme(x, "A") for x in lexemes) + ")"
    scope = scope_tsquery(f)
    return f"{terms} & ({scope})" if scope else terms


def bm25_sql(
    table: str,
    lexemes: Sequence[str],
    idfs: Sequence[float],
    avgdl: float,
    f: Filters,
    limit: int,
    apart: Sequence[tuple[str, float]] = (),
) -> tuple[str, list]:
    """BM25-ranked keys of ``table`` matching any lexeme under the filters, best first.

    The GIN index picks the candidates (text lexemes and scope tokens in one
    ``tsquery``); the best of them by BM25 with every term counted once go on
    (``PRESCORED_PER_HIT``), and their term frequencies come from unnesting their
    tsvectors; the IDFs are computed by the caller from corpus counts. ``apart``:
    frequent terms (lexeme, IDF) that pick no candidate but add their weight to
    those holding them, counted once (tf = 1; ``PostgresStore._add_frequent``).
    """
    alias, key = KEYS[table]
    cond, params = where(f, table, alias, POSTGRES)
    norm = f"(1 - {BM25_B} + {BM25_B} * c.doc_len / ?)"
    row_norm = f"(1 - {BM25_B} + {BM25_B} * {alias}.doc_len / ?)"
    tf = "cardinality(u.positions)"
    terms = [*((x, idf) for x, idf in zip(lexemes, idfs, strict=True)), *apart]
    presence = " + ".join(
        f"CASE WHEN {alias}.search_tsv @@ ?::tsquery THEN ?::float8 ELSE 0 END" for _ in terms
    )
    held = "".join(
        f" + CASE WHEN {alias}.search_tsv @@ ?::tsquery THEN ?::float8 ELSE 0 END" for _ in apart
    )
    extra = f"(0{held})" if apart else "0"
    once = f" + min(c.extra * {BM25_K1 + 1} / (1 + {BM25_K1} * {norm}))" if apart else ""
    sql = (
        f"WITH c AS MATERIALIZED (SELECT {alias}.{key} AS k, {alias}.search_tsv, "
        f"{alias}.doc_len, {extra}::float8 AS extra "
        f"FROM {table} {alias} WHERE {alias}.search_tsv @@ ?::tsquery AND {cond} "
        f"ORDER BY ({presence}) / (1 + {BM25_K1} * {row_norm}) DESC, {alias}.{key} LIMIT ?) "
        f"SELECT c.k, (sum(t.idf * {tf} * {BM25_K1 + 1} / ({tf} + {BM25_K1} * {norm})){once})"
        "::float8 AS score FROM c CROSS JOIN LATERAL unnest(c.search_tsv) AS u "
        "JOIN unnest(?::text[], ?::float8[]) AS t(lexeme, idf) ON t.lexeme = u.lexeme "
        "GROUP BY c.k ORDER BY score DESC, c.k LIMIT ?"
    )
    avg = max(float(avgdl), 1e-9)
    return sql, [
        *(x for lexeme, idf in apart for x in (quote_lexeme(lexeme), float(idf))),
        match_tsquery(lexemes, f),
        *params,
        *(x for lexeme, idf in terms for x in (quote_lexeme(lexeme), float(idf))),
        avg,
        max(int(limit) * PRESCORED_PER_HIT, PRESCORED_MIN),
        avg,
        *([avg] if apart else []),
        list(lexemes),
        [float(x) for x in idfs],
        int(limit),
    ]


def estimated_rows_sql(table: str, lexeme: str) -> tuple[str, list]:
    """The planner's estimate of the rows holding ``lexeme`` (from the column's
    statistics: ``EXPLAIN``, nothing read), as a JSON plan; for a term too frequent
    to count."""
    return (
        f"EXPLAIN (FORMAT JSON) SELECT 1 FROM {table} WHERE search_tsv @@ ?::tsquery",
        [quote_lexeme(lexeme)],
    )


def holders_sql(
    table: str, lexemes: Sequence[str], f: Filters, after: int | None, limit: int
) -> tuple[str, list]:
    """The newest filtered rows holding any of ``lexemes``, with a key above ``after``
    (None: any), at most ``limit``: each with its length and each lexeme's ``@@`` as a
    boolean. How frequent terms reach rows no rarer term found."""
    alias, key = KEYS[table]
    held = ", ".join(f"{alias}.search_tsv @@ ?::tsquery" for _ in lexemes)
    cond, params = where(f, table, alias, POSTGRES)
    newer = f" AND {alias}.{key} > ?" if after is not None else ""
    sql = (
        f"SELECT {alias}.{key}, {alias}.doc_len, {held} FROM {table} {alias} "
        f"WHERE {alias}.search_tsv @@ ?::tsquery AND {cond}{newer} "
        f"ORDER BY {alias}.{key} DESC LIMIT ?"
    )
    return sql, [
        *(quote_lexeme(x) for x in lexemes),
        match_tsquery(lexemes, f),
        *params,
        *([int(after)] if after is not None else []),
        int(limit),
    ]


def _vector_join(table: str) -> str:
    alias, key = KEYS[table]
    return f"{table} {alias} JOIN vectors v ON v.id = {alias}.vec_id AND v.model = ?"


def exact_vector_sql(
    table: str, query: Sequence[float], model: str, f: Filters, limit: int
) -> tuple[str, list]:
    """Exact cosine top-k among the filtered rows of ``table`` (model's vectors only).

    ``+ 0`` keeps the planner from answering with the approximate HNSW index.
    The query vector is bound once, in pgvector's binary form (``PgVector``).
    """
    alias, key = KEYS[table]
    cond, params = where(f, table, alias, POSTGRES)
    sql = (
        "WITH q AS (SELECT ?::vector AS v) "
        f"SELECT {alias}.{key}, (1 - (v.vec <=> q.v))::float8 AS score "
        f"FROM q, {_vector_join(table)} WHERE {cond} "
        f"ORDER BY (v.vec <=> q.v) + 0, {alias}.{key} LIMIT ?"
    )
    return sql, [PgVector(np.asarray(query)), model, *params, int(limit)]


def ann_vector_sql(query: Sequence[float], model: str, dim: int, limit: int) -> tuple[str, list]:
    """Approximate cosine top-k over all messages through the IVF (or an older store's
    HNSW) index: unfiltered search.

    The index is on ``vec::vector(dim)`` for the store's model (vectors of any
    dimension share the column), so the query orders by that same expression.
    With the iterative scan the scan goes on until ``limit`` messages join.
    """
    d = int(dim)
    # the model as a literal: the index is partial (WHERE model = '…'), and a generic plan
    # of a prepared statement cannot prove a bound model matches it
    literal = "'" + model.replace("'", "''") + "'"
    sql = (
        f"SELECT m.rowid, (1 - (v.vec::vector({d}) <=> ?::vector({d})))::float8 "
        f"FROM vectors v JOIN messages m ON m.vec_id = v.id WHERE v.model = {literal} "
        f"ORDER BY v.vec::vector({d}) <=> ?::vector({d}) LIMIT ?"
    )
    vec = PgVector(np.asarray(query))
    return sql, [vec, vec, int(limit)]
