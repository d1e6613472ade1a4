"""``bench implicit`` (cue/trigger pairs stitched into a LoCoMo file) and result files
(``bench … --save``), end to end on tiny data we write (FakeEmbedder)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from archivist.bench.implicit import read_pairs, stitch
from archivist.bench.record import load
from archivist.cli.main import cli
from archivist.errors import InputError
from archivist.load import load_file
from test_bench import locomo_file

PAIRS = [
    {
        "id": "p1",
        "kind": "lesson",
        "cue": [
            {"who": "B", "text": "how was the drive back?"},
            {"who": "A", "text": "ran out of petrol on the moor, never again below a quarter"},
            {"who": "B", "text": "oof"},
        ],
        "cue_turn": 1,
        "trigger": "road trip through the highlands next week, any tips?",
    },
    {
        "id": "p2",
        "kind": "value",
        "cue": [
            {"who": "A", "text": "we split chores evenly, fairness matters to me"},
            {"who": "B", "text": "respect"},
        ],
        "cue_turn": 0,
        "trigger": "let my nephew jump the ticket queue and it's bugging me",
    },
]


def pairs_file(tmp_path: Path, items: list | None = None) -> Path:
    path = tmp_path / "pairs.json"
    path.write_text(json.dumps({"items": PAIRS if items is None else items}))
    return path


def test_stitch_puts_each_cue_session_between_sessions_of_the_first_two_thirds(
    tmp_path: Path,
) -> None:
    (conv,) = load_file(locomo_file(tmp_path), "locomo")
    (stitched,), questions = stitch([conv], PAIRS, seed=3)
    ids = [m.id for m in stitched.messages]
    assert len(ids) == len(conv.messages) + 5 and len(set(ids)) == len(ids)
    times = [m.timestamp for m in stitched.messages]
    assert times == sorted(times)  # dated between the sessions around them
    assert [m.seq for m in stitched.messages] == list(range(len(ids)))
    assert [s.number for s in stitched.sessions] == [1, 2, 3, 4]
    cue = {m.id: m for m in stitched.messages}["cue:p1:1"]
    first_two_thirds = max(m.timestamp for m in conv.messages if m.session == 1)
    assert cue.timestamp > first_two_thirds and cue.session in (2, 3)
    by_pair = {q["pair"]: q for _, q in questions}
    assert by_pair["p1"]["evidence"] == ["cue:p1:1"] and by_pair["p1"]["category"] == "lesson"
    assert by_pair["p1"]["person"] == cue.speaker  # the trigger is A's turn
    assert {m.speaker for m in stitched.messages} == {"Ana", "Lee"}
    assert stitch([conv], PAIRS, seed=3)[1] == questions  # seeded


@pytest.mark.parametrize(
    ("items", "says"),
    [
        ([], "at least one pair"),
        ([{**PAIRS[0], "kind": "hobby"}], "kind 'hobby'"),
        ([{**PAIRS[0], "cue_turn": 0}], "one of A's turns"),
        ([PAIRS[0], PAIRS[0]], "twice"),
        ([{k: v for k, v in PAIRS[0].items() if k != "trigger"}], "lacks 'trigger'"),
    ],
)
def test_a_bad_pairs_file_is_one_input_error(tmp_path: Path, items: list, says: str) -> None:
    with pytest.raises(InputError, match=says):
        read_pairs(pairs_file(tmp_path, items))


def test_bench_implicit_scores_every_system_per_kind_and_saves_a_result_file(
    tmp_path: Path,
) -> None:
    args = ["--db", str(tmp_path / "i.db"), "--embedder", "fake", "bench", "implicit"]
    pairs, locomo = str(pairs_file(tmp_path)), str(locomo_file(tmp_path))
    saved = tmp_path / "results" / "implicit.json"
    run = [*args, pairs, locomo, "--budgets", "30,2000", "--json", "--save", str(saved)]
    result = CliRunner().invoke(cli, run)
    assert result.exit_code == 0, result.output
    r = json.loads(result.stdout)
    assert r["pairs"] == 2 and r["messages"] == 13
    systems = {"archivist", "plain-rag", "hits", "recent", "archivist-no-standing"}
    assert set(r["context"]) == systems
    for by_budget in r["context"].values():
        assert set(by_budget["2000"]) == {"overall", "lesson", "value"}
    # 13 short messages fit in 2,000 tokens: every cue is in every message-packing context
    assert r["context"]["recent"]["2000"]["overall"] == 1.0
    assert r["context"]["archivist"]["2000"]["overall"] == 1.0
    record = load(saved)
    assert record["result"] == r
    assert record["command"].startswith("archivist --db ")
    assert f"--embedder fake bench implicit --budgets 30,2000 {pairs} {locomo}" in record["command"]
    assert "--json" not in record["command"] and "--save" not in record["command"]
    assert record["machine"]["cores"] >= 1
    bad = CliRunner().invoke(cli, [*args, str(pairs_file(tmp_path, [])), locomo])
    assert isinstance(bad.exception, InputError) and "at least one pair" in str(bad.exception)


def _bench_add(*options: str):
    """A tiny ``bench add`` run through the CLI, with ``options`` appended."""
    base = ["--embedder", "fake", "bench", "add", "--messages", "10", "--adds", "1"]
    return CliRunner().invoke(cli, [*base, *options])


def test_a_result_file_that_cannot_be_written_is_one_error_before_or_after_the_run(
    tmp_path: Path,
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    early = _bench_add("--save", str(blocker / "x.json"))
    assert early.exit_code == 2 and "Invalid value for '--save'" in early.output
    late = tmp_path / "results"
    late.mkdir()
    # a link into a folder that is not there: found only on writing
    (late / "taken.json").symlink_to(tmp_path / "gone" / "x.json")
    ran = _bench_add("--json", "--save", str(late / "taken.json"))
    assert isinstance(ran.exception, InputError) and "cannot write the result file" in str(
        ran.exception
    )
    assert '"p95_ratio"' in ran.stdout  # the result was printed before the save failed
