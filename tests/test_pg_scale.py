"""PostgreSQL grown past 100k messages (slow: about a minute; run with -m slow).

The scale bench's synthetic store, grown to 110,000 messages through the service's
own write path: every message stored once, whole-store search through the
process's 8-bit vector copy at recall@10 1.0 against the exact scan, and frequent
terms scored apart in keyword search."""

from __future__ import annotations

import uuid
from dataclasses import replace

import pytest

from archivist.bench.scale import MESSAGES_PER_CONVERSATION, run_scale
from archivist.config import Settings
from archivist.service import MemoryService
from archivist.store import postgres as backend
from archivist.store.sql import Filters
from archivist.testing import FakeEmbedder

SIZE = 110_000


@pytest.mark.slow
def test_postgres_grows_past_100k_messages(pg_dsn: str, monkeypatch) -> None:
    import psycopg

    schema = f"grow_{uuid.uuid4().hex[:10]}"
    settings = replace(Settings(), store="postgres", pg_dsn=pg_dsn, pg_schema=schema)
    mem = MemoryService(settings=settings, embedder=FakeEmbedder(dim=384))
    try:
        result = run_scale(mem, [SIZE], queries=10)
        (row,) = result["sizes"]
        assert row["messages"] == SIZE and row["insert_rows_per_s"] > 0
        store = mem.store
        (stored, distinct) = store._db.execute(
            "SELECT count(*), count(DISTINCT (conversation, msg_id)) FROM messages"
        ).fetchone()
        assert stored == distinct == SIZE  # each message once
        assert row["vector_only"]["mirror_rows"] == SIZE
        assert row["recall_at_10"] == 1.0  # the copy's candidates, scored by the server
        assert row["mirror_read_s"] >= 0 and row["vector_only"]["ann_index"] is None
        # a filler word of the synthetic chats ("went") is in most messages: a query
        # naming it scores it apart, and it still lifts and finds its holders
        found = store.keyword_search("went", Filters(), 10)
        assert store._corpus["messages"][3]["went"] >= backend.FREQUENT_ROWS
        (held,) = store._db.execute(
            "SELECT count(*) FROM messages WHERE rowid = ANY(?) AND search_tsv @@ 'went'",
            ([r for r, _ in found],),
        ).fetchone()
        assert len(found) == held == 10
        one = store.keyword_search("went", Filters(conversation="syn-3"), 50)
        assert all(
            m.conversation == "syn-3" for m in store.messages_by_rowid(r for r, _ in one).values()
        )
        assert len(mem.conversations()) == SIZE // MESSAGES_PER_CONVERSATION
        # BM25's N and avgdl of a large table: estimated once ANALYZE counted it
        exact_n, exact_avg = store._db.execute(
            "SELECT count(*), avg(doc_len)::float8 FROM messages"
        ).fetchone()
        monkeypatch.setattr(backend, "CORPUS_SAMPLED_FROM", 100_000)
        store._db.execute("ANALYZE messages")
        store._corpus.clear()
        n, avgdl, _ = store._corpus_stats("messages")
        assert abs(n - exact_n) < 0.1 * exact_n and abs(avgdl - exact_avg) < 0.1 * exact_avg
    finally:
        mem.close()
        with psycopg.connect(pg_dsn, autocommit=True) as con:
            con.execute(f'DROP SCHEMA "{schema}" CASCADE')
