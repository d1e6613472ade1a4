"""The write-latency benchmark: its synthetic chats, its report's shape, and the CLI.

Tiny sizes with the FakeEmbedder; no timing is asserted, only that both
stores end up holding every message and differ in reconciliation alone.
"""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from archivist.bench.add import TimedEmbedder, add_table, run_add, synthetic_chats
from archivist.cli.main import cli
from archivist.testing import FakeEmbedder

FIGURES = {"p50_ms", "p95_ms", "max_ms", "mean_ms", "embed_share", "before", "after"}


def test_synthetic_chats_grow_in_order() -> None:
    chats, _ = synthetic_chats(60, seed=3)
    assert len(chats) == 2 and sum(len(c.messages) for c in chats) == 60
    for chat in chats:
        msgs = chat.messages
        assert len({m.id for m in msgs}) == len(msgs)
        assert [m.seq for m in msgs] == list(range(len(msgs)))
        assert all(a.timestamp < b.timestamp for a, b in zip(msgs, msgs[1:], strict=False))
        assert {m.speaker for m in msgs} == set(chat.speakers)
        assert max(m.session for m in msgs) > 1
    texts = " ".join(m.text for c in chats for m in c.messages)
    assert any(cue in texts for cue in ("moved to", "no longer", "started working", "anymore"))


def test_synthetic_chats_are_deterministic() -> None:
    a, _ = synthetic_chats(40, seed=5)
    b, _ = synthetic_chats(40, seed=5)
    assert [m.text for c in a for m in c.messages] == [m.text for c in b for m in c.messages]


def test_timed_embedder_adds_up_time() -> None:
    timed = TimedEmbedder(FakeEmbedder())
    vecs = timed.embed_batch(["one", "two"])
    assert vecs.shape[0] == 2 and timed.seconds > 0 and timed.name == FakeEmbedder().name


def check_report(r: dict, messages: int, adds: int) -> None:
    assert r["benchmark"] == "add" and (r["messages"], r["adds"]) == (messages, adds)
    assert r["expected_messages"] == messages + r["warmup_adds"] + adds
    for key in ("reconcile", "baseline"):
        f = r[key]
        assert FIGURES <= set(f)
        assert 0 <= f["p50_ms"] <= f["p95_ms"] <= f["max_ms"]
        assert 0 <= f["embed_share"] <= 1
        assert f["before"]["messages"] == messages
        assert f["after"]["messages"] == r["expected_messages"]  # nothing lost
    on, off = r["reconcile"], r["baseline"]
    assert on["before"] == off["before"]  # one store, copied
    assert on["after"]["claims_unreconciled"] == 0
    new_claims = off["after"]["claims"] - off["before"]["claims"]
    assert off["after"]["claims_unreconciled"] == off["before"]["claims_unreconciled"] + new_claims
    assert r["target_met"] == (on["p95_ms"] < r["target_p95_ms"])


def test_run_add_keeps_every_message_in_both_stores() -> None:
    r = run_add(messages=60, adds=5, embedder=FakeEmbedder())
    check_report(r, 60, 5)
    assert r["conversations"] == 2 and r["embedder"] == FakeEmbedder().name
    table = add_table(r)
    assert "p95 ratio" in table and "off (baseline)" in table and "60-message store" in table


def test_cli_json_leaves_db_alone(tmp_path: Path) -> None:
    db = tmp_path / "unused.db"
    args = ["--db", str(db), "--embedder", "fake", "bench", "add"]
    result = CliRunner().invoke(
        cli, [*args, "--messages", "40", "--adds", "3", "--json"], catch_exceptions=False
    )
    assert result.exit_code == 0, result.output
    check_report(json.loads(result.stdout), 40, 3)
    assert not db.exists()


def test_cli_table() -> None:
    result = CliRunner().invoke(
        cli,
        ["--embedder", "fake", "bench", "add", "--messages", "40", "--adds", "2"],
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.output
    assert "target p95 < 50 ms" in result.stdout
