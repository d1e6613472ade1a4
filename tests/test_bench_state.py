"""The state-tracking benchmark: pure scoring, suite validation, the runner and the CLI.

The runner runs on a tiny suite written here, with the FakeEmbedder and the
heuristic archivist; only the report's shape and arithmetic are checked, never
its accuracy (that moves as the pipeline improves).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from archivist.bench import state
from archivist.bench.state import (
    KINDS,
    Probe,
    check_answer,
    covers,
    parse_suite,
    run_state,
    score_probe,
    stale_as_current,
    summarise,
)
from archivist.cli.main import cli, main
from archivist.config import Settings
from archivist.errors import InputError
from archivist.testing import FakeEmbedder

AT = "2024-09-01T12:00:00Z"
MARKS = ("[history]",)


def msg(n: int, speaker: str, to: str, text: str, day: str, session: int) -> dict:
    """One JSONL message record; ``day`` is "MM-DD" in 2024."""
    return {"id": f"S{session}:{n}", "speaker": speaker, "addressees": [to], "text": text,
            "timestamp": f"2024-{day}T09:0{n}:00Z", "session": session, "role": "user"}  # fmt: skip


SUITE = {
    "scenarios": [
        {
            "id": "garden",
            "messages": [
                msg(1, "Tomas", "Ines", "I grow tomatoes on my balcony in Porto.", "02-03", 1),
                msg(2, "Ines", "Tomas", "My brother Rui sold his bicycle yesterday.", "02-03", 1),
                msg(1, "Tomas", "Ines", "I moved to Lisbon in May, no more balcony.", "06-11", 2),
                msg(2, "Tomas", "Ines", "Now I keep basil and mint on the windowsill.", "06-11", 2),
            ],
            "probes": [
                {"question": "Where does Tomas live?", "person": "Tomas", "at": AT,
                 "expect": ["Lisbon"], "stale": ["Porto"], "kind": "current"},
                {"question": "Where did Tomas live before Lisbon?", "person": "Tomas", "at": AT,
                 "expect": ["Porto"], "kind": "history"},
                {"question": "Which herbs does Tomas keep?", "person": "Tomas", "at": AT,
                 "expect": ["basil"], "expect_all": ["basil", "mint"], "kind": "multi"},
            ],
        },
        {
            "id": "work",
            "messages": [
                msg(1, "Mara", "Jo", "I started as a nurse at the city hospital.", "01-15", 1),
                msg(2, "Jo", "Mara", "I adopted a beagle called Biscuit.", "01-15", 1),
                msg(1, "Mara", "Jo", "I quit nursing last month, now I teach biology.", "07-20", 2),
            ],
            "probes": [
                {"question": "What is Mara's job?", "person": "Mara", "at": AT,
                 "expect": ["biology", "teach"], "stale": ["nurse"], "kind": "current"},
                {"question": "When did Mara quit nursing?", "person": "Mara", "at": AT,
                 "expect": ["June", "2024-06"], "kind": "temporal"},
                {"question": "When did Mara adopt a beagle?", "person": "Mara", "at": AT,
                 "expect": ["Jo"], "abstain": True, "kind": "attribution"},
            ],
        },
    ]
}  # fmt: skip


def probe(**kw) -> Probe:
    return Probe(**{"question": "q?", "kind": "current", **kw})


# -- scoring ----------------------------------------------------------------------------


def test_answer_needs_an_expected_string_and_no_stale_one() -> None:
    p = probe(expect=("vegan",), stale=("pescatarian",))
    assert check_answer(p, "Priya is VEGAN now.", False) is None
    assert "none of" in check_answer(p, "Priya likes salmon.", False)
    assert "stale" in check_answer(p, "Vegan, formerly pescatarian.", False)
    assert check_answer(p, "Not mentioned: vegan", True) == "abstained"


def test_a_bare_yes_or_no_is_judged_by_the_verdict() -> None:
    """ "Yes: On crutches until the end of the month, no driving." says yes; the "no" of
    its quote is not its answer. An answer without a verdict word is read whole."""
    p = probe(expect=("yes",), stale=("no",), kind="temporal")
    said = "Yes: On crutches until the end of the month, no driving."
    assert check_answer(p, said, False) is None
    assert "none of" in check_answer(p, "No: crutches handed back, yes!", False)
    assert check_answer(p, "She is, yes.", False) is None
    assert "stale" in check_answer(p, "Not any more, no; yes earlier.", False)


def test_expect_all_needs_every_string() -> None:
    p = probe(expect=("band",), expect_all=("band", "chess"), kind="multi")
    assert check_answer(p, "The band and the Chess club.", False) is None
    assert check_answer(p, "Only the band.", False) == "missing 'chess'"


def test_abstain_probes_must_abstain_and_name_the_owner() -> None:
    p = probe(expect=("Priya",), abstain=True, kind="attribution")
    assert check_answer(p, "Not mentioned for Ava: that was priya's, not Ava's.", True) is None
    assert check_answer(p, "Not mentioned in memory.", True).startswith("abstained without")
    assert check_answer(p, "Ava sold it in May; Priya helped.", False) == "did not abstain"
    assert check_answer(probe(abstain=True), "Not mentioned in memory.", True) is None


def test_coverage_looks_for_any_expected_string() -> None:
    assert covers(probe(expect=("vegan", "plant")), "- Priya: plant-based since March") is True
    assert covers(probe(expect=("vegan",)), "- Priya: pescatarian") is False
    assert covers(probe(expect_all=("band", "chess")), "chess on Fridays") is True
    assert covers(probe(abstain=True), "anything") is None
    # a yes or no is read from the evidence, not found in it
    assert covers(probe(expect=("yes",)), "- Camille: no alcohol until the 15th") is None
    assert covers(probe(expect=("No", "quit")), "- Noor: quit the clinic") is True


def test_stale_counts_only_on_lines_without_the_history_marker() -> None:
    p = probe(expect=("vegan",), stale=("pescatarian",))
    marked = "- Priya is vegan\n- [history] Priya was Pescatarian until March"
    unmarked = "- Priya is vegan\n- Priya was pescatarian until March"
    assert stale_as_current(p, marked, MARKS) is False
    assert stale_as_current(p, unmarked, MARKS) is True  # "was"/"until" are not the marker
    assert stale_as_current(p, "- Priya is vegan", MARKS) is False
    assert stale_as_current(probe(expect=("x",)), unmarked, MARKS) is False  # no stale strings
    # the marker must be on the stale string's own line
    assert stale_as_current(p, "[history]\n- Priya: pescatarian", MARKS) is True


def test_history_marker_comes_from_the_renderer_s_history_module(monkeypatch) -> None:
    from archivist.read import history

    monkeypatch.setattr(history, "HISTORY_MARK", "(superseded)", raising=False)
    assert state.history_marks() == ("(superseded)",)
    monkeypatch.delattr(history, "HISTORY_MARK")
    assert state.history_marks() == ("[history]",)


def test_score_and_summarise_count_consistently() -> None:
    current = probe(expect=("vegan",), stale=("pescatarian",))
    multi = probe(expect_all=("band", "chess"), kind="multi")
    rows = [
        score_probe("s", current, "vegan", False, "- vegan\n- pescatarian", MARKS),
        score_probe("s", current, "vegan", False, "- vegan\n- [history] pescatarian", MARKS),
        score_probe("s", multi, "band only " + "x" * 300, False, "nothing here", MARKS),
    ]
    assert [r.answer_ok for r in rows] == [True, True, False]
    assert [r.stale_current for r in rows] == [True, False, False]
    s = summarise(rows)
    assert s["overall"] == {
        "probes": 3, "answer_correct": 2, "answer_accuracy": 0.6667, "coverage_scored": 3,
        "coverage_hits": 2, "coverage": 0.6667, "stale_probes": 2, "stale_as_current": 1,
        "stale_as_current_rate": 0.5, "failed": 2,
    }  # fmt: skip
    assert list(s["by_kind"]) == ["current", "multi"]
    first, second = s["failures"]
    assert first["failed"] == ["stale-as-current"]
    assert second["failed"] == ["answer", "coverage"]
    assert len(second["answer"]) == 160


# -- suite validation -------------------------------------------------------------------


def broken(**changes) -> dict:
    data = json.loads(json.dumps(SUITE))
    scenario = data["scenarios"][1]
    for key, value in changes.items():
        if key == "probe":
            scenario["probes"][0] = value
        else:
            scenario[key] = value
    return data


@pytest.mark.parametrize(
    ("data", "words"),
    [
        ({"runs": []}, "'scenarios' list"),
        (broken(probes=[]), "scenario 'work': 'probes' must be a non-empty list"),
        (broken(probe={"kind": "current", "expect": ["a"]}), "probe 1: 'question'"),
        (broken(probe={"question": "Who?", "kind": "future", "expect": ["a"]}), "'kind' must"),
        (broken(probe={"question": "Who?", "kind": "current"}), "needs 'expect'"),
        (
            broken(probe={"question": "Who?", "kind": "current", "expect": ["a"], "person": "Zed"}),
            "'person' 'Zed'",
        ),  # fmt: skip
        (
            broken(probe={"question": "Who?", "kind": "current", "expect": ["a"], "at": "soon"}),
            "'at' must",
        ),  # fmt: skip
        (broken(messages=[{"id": "1", "speaker": "Mara", "text": "hi"}]), "'timestamp'"),
    ],
)
def test_bad_suites_are_one_line_input_errors(data: dict, words: str) -> None:
    with pytest.raises(InputError) as e:
        parse_suite(data, "suite.json")
    message = str(e.value)
    assert words in message and "\n" not in message
    assert message.startswith("suite.json")


def test_suite_parses_into_scenarios() -> None:
    scenarios = parse_suite(SUITE, "suite.json")
    assert [s.id for s in scenarios] == ["garden", "work"]
    assert [c.id for c in scenarios[0].conversations] == ["garden"]  # defaults to the scenario
    assert {p.kind for s in scenarios for p in s.probes} == set(KINDS)
    assert scenarios[1].probes[2].abstain and scenarios[0].probes[0].at.tzinfo is not None


# -- the runner and the CLI -------------------------------------------------------------


def check_report(r: dict, probes: int) -> None:
    assert r["probes"] == r["overall"]["probes"] == probes
    assert sum(f["probes"] for f in r["by_kind"].values()) == probes
    assert set(r["by_kind"]) <= set(KINDS)
    for f in [r["overall"], *r["by_kind"].values()]:
        for key in ("answer_accuracy", "coverage", "stale_as_current_rate"):
            assert 0.0 <= f[key] <= 1.0
        assert f["answer_correct"] <= f["probes"]
        assert f["coverage_hits"] <= f["coverage_scored"] <= f["probes"]
        assert f["stale_as_current"] <= f["stale_probes"] <= f["probes"]
    for key in ("answer_correct", "coverage_hits", "stale_as_current", "failed"):
        assert sum(f[key] for f in r["by_kind"].values()) == r["overall"][key]
    assert len(r["failures"]) == r["overall"]["failed"]
    for x in r["failures"]:
        assert x["kind"] in KINDS and x["failed"] and len(x["answer"]) <= 160


def test_runner_reports_every_probe() -> None:
    scenarios = parse_suite(SUITE, "suite.json")
    r = run_state(scenarios, settings=Settings(llm="none"), embedder=FakeEmbedder(), budget=300)
    assert (r["scenarios"], r["llm"], r["budget"], r["job_errors"]) == (2, False, 300, [])
    check_report(r, 6)
    assert set(r["by_kind"]) == set(KINDS)


def test_cli_json(tmp_path: Path) -> None:
    suite = tmp_path / "mine.json"
    suite.write_text(json.dumps(SUITE), encoding="utf-8")
    args = ["--db", str(tmp_path / "unused.db"), "--embedder", "fake", "bench", "state"]
    result = CliRunner().invoke(
        cli, [*args, str(suite), "--json", "--no-llm", "--budget", "200"], catch_exceptions=False
    )
    assert result.exit_code == 0, result.output
    r = json.loads(result.stdout)
    assert (r["suite"], r["llm"], r["budget"]) == ("mine.json", False, 200)
    check_report(r, 6)
    assert not (tmp_path / "unused.db").exists()  # each scenario has its own store


def test_cli_defaults_to_the_bundled_suite(tmp_path: Path, monkeypatch) -> None:
    suite = tmp_path / "bundled.json"
    suite.write_text(json.dumps({"scenarios": SUITE["scenarios"][:1]}), encoding="utf-8")
    monkeypatch.setattr(state, "DEFAULT_SUITE", suite)
    result = CliRunner().invoke(
        cli, ["--embedder", "fake", "bench", "state", "--no-llm"], catch_exceptions=False
    )
    assert result.exit_code == 0, result.output
    assert "bundled.json" in result.stdout and "overall" in result.stdout


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("{not json", "not JSON"),
        (json.dumps(broken(probe={"kind": "current"})), "scenario 'work': probe 1"),
    ],
)
def test_cli_malformed_file_exits_3_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture, text: str, words: str
) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(text, encoding="utf-8")
    with pytest.raises(SystemExit) as e:  # the console entry point, with its error handling
        main(["--embedder", "fake", "bench", "state", str(bad), "--json"])
    out = capsys.readouterr()
    assert e.value.code == 3
    assert out.out == ""
    assert out.err.count("\n") == 1 and out.err.startswith("error: ") and words in out.err


def test_a_reader_answers_each_probe_from_the_context_and_from_the_dated_history() -> None:
    """The reader sees the notes (context or history) and the question; its answers are
    scored like ask's. This scripted reader answers from the newest line that holds a
    word of the question's expected values, else "not mentioned"."""
    from archivist.testing import FakeLLM

    seen: list[str] = []

    def read(messages: list[dict], schema) -> str:
        notes = messages[-1]["content"]
        seen.append(notes)
        for line in reversed(notes.splitlines()):
            for word in ("Lisbon", "Porto", "basil", "biology", "June", "Jo"):
                if word in line and "[history]" not in line:
                    return json.dumps({"answer": word})
        return json.dumps({"answer": "not mentioned"})

    scenarios = parse_suite(SUITE, "suite.json")
    reader = FakeLLM(responder=read)
    r = run_state(scenarios, settings=Settings(llm="none"), embedder=FakeEmbedder(), reader=reader)
    rd = r["reader"]
    assert rd["model"] == reader.name and rd["overall"]["probes"] == 6
    assert rd["overall"]["failed_calls"] == 0 and len(seen) == 12  # two readings a probe
    assert set(rd["by_kind"]) == set(KINDS)
    history = [n for n in seen if "I grow tomatoes" in n and "sold his bicycle" in n]
    assert history, "the dated history holds every message said by then"
    assert any("[2 February 2024]" in n or "3 February 2024" in n for n in history)
    assert 0 <= rd["overall"]["context_accuracy"] <= 1
    assert rd["overall"]["history_tokens_mean"] > 0 and rd["overall"]["context_tokens_mean"] > 0
    assert "reader:" in state.state_table(r)
