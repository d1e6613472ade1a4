"""The LoCoMo and scale benchmarks end to end on tiny data we write (FakeEmbedder)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from click.testing import CliRunner

from archivist.bench.context_recall import _key, packed, recent
from archivist.cli.main import cli
from archivist.errors import StoreError
from archivist.model import Message
from archivist.read.history import HISTORY_MARK

TURNS = [
    ("Ana", "I adopted a grey cat called Pixel yesterday."),
    ("Lee", "Pixel is a lovely name! I flew cargo to Reykjavik this week."),
    ("Ana", "My sister Marta and I are planning a trip to the Azores."),
    ("Lee", "Take a jacket, the islands are windy."),
]


def locomo_file(tmp_path: Path) -> Path:
    """A LoCoMo-shaped file: one conversation, two sessions, four questions."""
    conv = {"speaker_a": "Ana", "speaker_b": "Lee"}
    for n, date in ((1, "1:56 pm on 8 May, 2023"), (2, "10:00 am on 20 May, 2023")):
        conv[f"session_{n}_date_time"] = date
        conv[f"session_{n}"] = [
            {"speaker": s, "dia_id": f"D{n}:{i + 1}", "text": t} for i, (s, t) in enumerate(TURNS)
        ]
    qa = [
        {"question": "When did Ana adopt Pixel?", "answer": "7 May 2023", "evidence": ["D1:1"],
         "category": 2},
        {"question": "Where did Lee fly cargo?", "answer": "Reykjavik", "evidence": ["D1:2"],
         "category": 4},
        {"question": "Who goes to the Azores?", "answer": "Ana and Marta",
         "evidence": ["D1:3", "D2:3"], "category": 1},
        {"question": "What did Lee adopt?", "adversarial_answer": "a cat", "evidence": ["D1:1"],
         "category": 5},
    ]  # fmt: skip
    path = tmp_path / "locomo.json"
    path.write_text(json.dumps([{"sample_id": "conv-x", "conversation": conv, "qa": qa}]))
    return path


def test_bench_locomo_json_has_every_retriever_and_category(tmp_path: Path) -> None:
    db = tmp_path / "b.db"
    args = ["--db", str(db), "--embedder", "fake", "bench", "locomo"]
    result = CliRunner().invoke(cli, [*args, str(locomo_file(tmp_path)), "--k", "1,5", "--json"])
    assert result.exit_code == 0, result.output
    r = json.loads(result.stdout)
    assert set(r["retrieval"]) >= {"archivist", "bm25", "dense", "rrf"}
    for by_k in r["retrieval"].values():
        assert set(by_k) == {"recall@1", "recall@5"}
        assert set(by_k["recall@5"]) == {"overall", "1", "2", "4"}  # no category-3 question
        assert all(0.0 <= v <= 1.0 for v in by_k["recall@5"].values())
    # 8 messages, k=5: the single-hop and temporal evidence must be found by archivist
    assert r["retrieval"]["archivist"]["recall@5"]["4"] == 1.0
    assert r["questions_scored"] == 3
    assert r["questions_excluded"]["category_5_adversarial"] == 1
    assert r["ingest"]["messages_added"] == 8
    assert r["extraction"]["claims"] > 0 and r["extraction"]["llm_calls_per_message"] == 0.0
    assert r["search_latency_ms"]["p95"] >= r["search_latency_ms"]["p50"] > 0
    # a second run reuses the store: nothing re-ingested, same recall
    again = json.loads(
        CliRunner().invoke(cli, [*args, str(locomo_file(tmp_path)), "--k", "1,5", "--json"]).stdout
    )
    assert again["ingest"]["messages_added"] == 0
    assert again["retrieval"] == r["retrieval"]


def test_bench_locomo_table_and_bad_k(tmp_path: Path) -> None:
    args = ["--db", str(tmp_path / "t.db"), "--embedder", "fake", "bench", "locomo"]
    result = CliRunner().invoke(cli, [*args, str(locomo_file(tmp_path)), "--k", "3"])
    assert result.exit_code == 0, result.output
    assert "archivist" in result.stdout and "recall" in result.stdout
    bad = CliRunner().invoke(cli, [*args, str(locomo_file(tmp_path)), "--k", "0,x"])
    assert bad.exit_code != 0


def test_bench_locomo_plus_scores_and_times_ablations(tmp_path: Path) -> None:
    args = ["--db", str(tmp_path / "p.db"), "--embedder", "fake", "bench", "locomo"]
    path = str(locomo_file(tmp_path))
    plus = ["--plus", "entities", "--plus", "dossiers, scenes"]
    result = CliRunner().invoke(cli, [*args, path, "--k", "5", "--json", *plus])
    assert result.exit_code == 0, result.output
    r = json.loads(result.stdout)
    added = {"archivist+entities", "archivist+dossiers+scenes"}
    assert added <= set(r["retrieval"]) and set(r["latency_ms"]) == {"archivist", *added}
    assert all(x["p95"] >= x["p50"] > 0 for x in r["latency_ms"].values())
    table = CliRunner().invoke(cli, [*args, path, "--k", "5", "--plus", "entities"])
    assert "search latency (archivist+entities, same path)" in table.stdout
    bad = CliRunner().invoke(cli, [*args, path, "--plus", "nope"])
    assert bad.exit_code != 0 and "unknown ranker" in bad.output


def test_bench_scale_grows_the_store(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    args = ["--db", str(db), "--embedder", "fake", "bench", "scale"]
    result = CliRunner().invoke(cli, [*args, "--sizes", "1000,2000", "--queries", "5", "--json"])
    assert result.exit_code == 0, result.output
    r = json.loads(result.stdout)
    assert [s["messages"] for s in r["sizes"]] == [1000, 2000]
    for s in r["sizes"]:
        for scope in ("one conversation", "whole store"):
            assert s["search_ms"][scope]["p95"] >= s["search_ms"][scope]["p50"] > 0


def test_bench_scale_scans_codes_and_grows_postgres_beside_sqlite(tmp_path: Path, pg_dsn) -> None:
    """Above --ann-from the whole-store vector search scans 8-bit codes: its recall@10
    against the exact scan of the same run is reported, filtered and not; --pg-dsn grows
    a PostgreSQL store in the same run, up to --pg-max."""
    import uuid

    import psycopg

    schema = f"bench_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(pg_dsn, autocommit=True) as con:
        con.execute(f"CREATE SCHEMA {schema}")
    args = ["--db", str(tmp_path / "s.db"), "--embedder", "fake", "bench", "scale"]
    more = ["--sizes", "1000,2000", "--queries", "5", "--ann-from", "1000"]
    pg = ["--pg-dsn", pg_dsn, "--pg-schema", schema, "--pg-max", "1000"]
    result = CliRunner().invoke(cli, [*args, *more, *pg, "--json"])
    assert result.exit_code == 0, result.output
    r = json.loads(result.stdout)
    for s in r["sizes"]:
        vec = s["vector_only"]
        assert vec["ann"] is True and s["ann_build_s"] >= 0
        assert vec["recall_at_10"] >= 0.9 and vec["filtered_recall_at_10"] >= 0.9
        assert 0 < vec["filtered_share"] <= 1
    assert [s["messages"] for s in r["postgres"]["sizes"]] == [1000]
    (pg_row,) = r["postgres"]["sizes"]  # below ann_min_rows: exact, so recall is whole
    assert pg_row["recall_at_10"] == 1.0 and pg_row["vector_only"]["ann_index"] is None
    assert r["postgres"]["skipped_sizes"] == [2000]
    table = CliRunner().invoke(cli, [*args, "--sizes", "2000", "--queries", "3", *pg])
    assert table.exit_code == 0, table.output
    assert "SQLite" in table.stdout and "PostgreSQL (pgvector HNSW), same run" in table.stdout


def test_bench_scale_with_an_unreachable_postgres_fails_before_growing_anything(
    tmp_path: Path,
) -> None:
    db = tmp_path / "s.db"
    args = ["--db", str(db), "--embedder", "fake", "bench", "scale", "--sizes", "1000"]
    bad = ["--pg-dsn", "postgresql://nobody@127.0.0.1:1/none"]
    result = CliRunner().invoke(cli, [*args, "--queries", "1", *bad])
    # archivist.cli.main.main prints an ArchivistError as one line, no traceback
    assert isinstance(result.exception, StoreError), result.output
    assert "cannot connect to PostgreSQL" in str(result.exception)
    assert not db.exists()  # the SQLite run never started


def test_bench_locomo_context_scores_every_system_at_every_budget(tmp_path: Path) -> None:
    args = ["--db", str(tmp_path / "c.db"), "--embedder", "fake", "bench", "locomo"]
    path = str(locomo_file(tmp_path))
    result = CliRunner().invoke(cli, [*args, path, "--context", "--budgets", "40,400", "--json"])
    assert result.exit_code == 0, result.output
    r = json.loads(result.stdout)
    assert set(r["context"]) == {"archivist", "plain-rag", "hits", "recent"}
    for system, by_budget in r["context"].items():
        assert set(by_budget) == {"40", "400"}
        assert set(by_budget["400"]) == {"overall", "1", "2", "4"}
        for budget, row in by_budget.items():
            assert all(0.0 <= v <= 1.0 for v in row.values())
            assert r["tokens_used"][system][budget] <= int(budget)
    # 8 short messages fit in 400 tokens: every message-packing system holds all evidence
    assert r["context"]["plain-rag"]["400"]["overall"] == 1.0
    assert r["context"]["recent"]["400"]["overall"] == 1.0
    assert r["context"]["recent"]["40"]["overall"] < 1.0  # the last turn or two only
    assert r["assembly_ms"]["400"]["p95"] >= r["assembly_ms"]["400"]["p50"] > 0
    table = CliRunner().invoke(cli, [*args, path, "--context", "--budgets", "400"])
    assert table.exit_code == 0 and "plain-rag" in table.stdout and "assembly" in table.stdout
    both = CliRunner().invoke(cli, [*args, path, "--context", "--qa"])
    assert both.exit_code != 0
    bad = CliRunner().invoke(cli, [*args, path, "--context", "--budgets", "0,500"])
    assert bad.exit_code == 2 and "Invalid value for --budgets" in bad.output


def test_context_evidence_counts_provenance_not_word_overlap() -> None:
    # a claim's text inside key info, with its notes and a history mark, is that claim
    line = f"Ana adopted a grey cat called Pixel {HISTORY_MARK} (since 2023-05-07)."
    assert _key(line) == _key("Ana adopted a grey cat called Pixel.")
    assert _key("Ana: Ana adopted a grey cat called Pixel.") == _key(line)
    assert _key("Ana adopted a cat called Pixel.") != _key(line)  # a paraphrase is not
    msgs = [
        Message(f"D1:{i}", "c", 1, "Ana", " ".join(["word"] * n), datetime(2023, 5, 8, tzinfo=UTC))
        for i, n in enumerate((5, 50, 5), start=1)
    ]
    kept, used = packed(msgs, 40)
    assert [m.id for m in kept] == ["D1:1", "D1:3"] and used <= 40  # the long one skipped
    tail, _ = recent(msgs, 40)
    assert [m.id for m in tail] == ["D1:3"]  # contiguous from the end: stops at the long one
