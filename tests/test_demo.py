"""``archivist demo``: the five things it shows on the shipped sample, as JSON and as text."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from archivist.cli.main import cli
from conftest import raw_count


def run_demo(*args: str, as_json: bool = False) -> str:
    """``archivist ARGS demo [--json]``."""
    command = [*args, "demo", *(["--json"] if as_json else [])]
    result = CliRunner().invoke(cli, command, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.stdout


@pytest.fixture(scope="module")
def demo_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("demo") / "demo.db"


@pytest.fixture(scope="module")
def report(demo_db: Path) -> dict:
    """The demo as users run it: the bundled embedder, the default judge."""
    return json.loads(run_demo("--db", str(demo_db), as_json=True))


def ids(evidence: list[dict]) -> list[str]:
    return [e["id"] for e in evidence]


def test_the_sample_is_ingested_into_the_given_store(report: dict, demo_db: Path) -> None:
    assert report["db"] == str(demo_db)
    assert (report["embedder"], report["archivist"], report["llm"]) == (
        "local:all-MiniLM-L6-v2-int8",
        "heuristic",
        None,
    )
    assert report["ingested"]["messages_added"] == 40
    assert raw_count(demo_db, "SELECT count(*) FROM messages") == 40


def test_a_claim_with_its_speaker_and_evidence(report: dict) -> None:
    claim, evidence = report["claim"]["claim"], report["claim"]["evidence"]
    assert "adopted a cat" in claim["text"] and "Pixel" in claim["text"]
    assert (claim["speaker"], claim["subject"]) == ("Ana", "Ana")
    assert claim["valid_from"].startswith("2024-03-03")  # "yesterday", said on 4 March
    assert claim["evidence"] == ["S1:9"]
    assert (evidence["id"], evidence["speaker"], evidence["addressees"]) == ("S1:9", "Ana", ["Lee"])
    assert evidence["timestamp"] == "2024-03-04T18:10:00+01:00"
    assert "I adopted a cat yesterday" in evidence["text"]


def test_a_state_change_with_its_history(report: dict) -> None:
    change = report["state_change"]
    assert (change["person"], change["group"]) == ("Lee", "health and diet")
    before = " ".join(e["text"] for e in change["before"]["entries"])
    assert "pescatarian" in before and "vegan" not in before
    (vegan,) = [e for e in change["now"]["entries"] if "vegan" in e["text"]]
    assert not [e for e in change["now"]["entries"] if "pescatarian" in e["text"]]
    assert vegan["since"].startswith("2024-06-01")  # "last month", said on 9 July
    assert [e["message"] for e in vegan["evidence"]] == ["S4:2"]
    (replaced,) = vegan["replaced"]
    assert replaced["value"] == "pescatarian"
    assert (replaced["since"][:10], replaced["until"][:10]) == ("2024-03-04", "2024-06-01")
    # the judge may log more of Lee's changes ("Lisbon to Sao Paulo from June", then
    # "in Sao Paulo right now"); the diet's is the one this section shows
    conflict = next(c for c in change["conflicts"] if c["attribute"] == "diet")
    assert (conflict["attribute"], conflict["old_value"], conflict["new_value"]) == (
        "diet",
        "pescatarian",
        "vegan",
    )
    assert conflict["resolution"] == "newest_wins"


def test_one_question_answered_as_of_two_times(report: dict) -> None:
    assert report["as_of"]["question"] == "Does Lee eat fish?"
    then, now = report["as_of"]["asked"]
    assert then["at"].startswith("2024-05-01") and now["at"] is None
    assert not then["answer"]["abstain"] and not now["answer"]["abstain"]
    assert then["answer"]["answer"].startswith("Yes") and "pescatarian" in then["answer"]["answer"]
    assert ids(then["answer"]["evidence"]) == ["S1:13"]
    assert now["answer"]["answer"].startswith("No") and "vegan" in now["answer"]["answer"]
    assert ids(now["answer"]["evidence"]) == ["S4:2"]


def test_an_abstention_that_names_whose_it_was(report: dict) -> None:
    answer = report["abstention"]["answer"]
    assert answer["question"] == "When did Lee adopt a cat?"
    assert answer["abstain"] is True
    assert answer["answer"] == "Not mentioned for Lee: that was Ana's, not Lee's."
    assert (answer["speaker"], answer["said_by"]) == ("Ana", "Ana")
    assert ids(answer["evidence"]) == ["S1:9"]


def test_the_context_a_turn_gets(report: dict) -> None:
    context = report["context"]
    assert (context["person"], context["budget"]) == ("Ana", 200)
    assert 0 < context["tokens"] <= 200
    lines = context["text"].splitlines()
    (old,) = [line for line in lines if "pescatarian" in line]
    (new,) = [line for line in lines if "vegan" in line]
    assert "[history]" in old and "[history]" not in new
    assert "ana-lee/S4:2" in [i["id"] for i in context["items"] if i["kind"] == "message"]


def test_rerunning_adds_nothing_and_shows_the_same(report: dict, demo_db: Path) -> None:
    again = json.loads(run_demo("--db", str(demo_db), as_json=True))
    assert again["ingested"]["messages_added"] == 0
    assert again["stats"] == report["stats"]
    for part in ("claim", "as_of", "abstention", "context"):
        assert again[part] == report[part], part
    assert again["state_change"]["conflicts"] == report["state_change"]["conflicts"]
    for when in ("before", "now"):  # "now" is another instant; what holds is the same
        entries = again["state_change"][when]["entries"]
        assert entries == report["state_change"][when]["entries"]


def test_the_text_has_a_section_per_point(demo_db: Path) -> None:
    out = run_demo("--db", str(demo_db))
    assert f"store: {demo_db}" in out
    for heading in (
        "1. A claim keeps its speaker and its evidence",
        "2. A change of state keeps its history",
        "3. Questions about the past are answered as of then",
        "4. It abstains, and says whose it was",
        "5. The context a turn gets",
    ):
        assert f"\n{heading}\n" in out
    assert "said by Ana, about Ana, an event that happened on 2024-03-03" in out
    assert "evidence: Ana to Lee, 04 Mar 2024 18:10 (ana-lee/S1:9)" in out
    assert "replaced: pescatarian (2024-03-04 to 2024-06-01)" in out
    assert "Lee diet: 'pescatarian' (since 2024-03-04) -> 'vegan' (since 2024-06-01)" in out
    assert "$ archivist ask 'Does Lee eat fish?' --person Lee --at 2024-05-01T00:00+00:00" in out
    assert "     No: I went vegan last month, so no more fish." in out
    assert "     Not mentioned for Lee: that was Ana's, not Lee's." in out
    assert "[history] (no longer holds from 1 June 2024)" in out


def test_without_db_it_uses_its_own_store_in_the_data_dir(tmp_path: Path) -> None:
    report = json.loads(run_demo("--embedder", "fake", as_json=True))
    demo_db = Path(report["db"])
    assert demo_db.name == "demo.db"
    assert demo_db.is_relative_to(tmp_path / "xdg-data")  # conftest points XDG here
    assert raw_count(demo_db, "SELECT count(*) FROM messages") == 40


def test_a_configured_llm_is_left_out(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ARCHIVIST_LLM", "fake")  # a FakeLLM with nothing scripted would fail
    db = tmp_path / "demo.db"
    report = json.loads(run_demo("--db", str(db), "--embedder", "fake", as_json=True))
    assert (report["archivist"], report["llm"]) == ("heuristic", None)
    assert report["abstention"]["answer"]["method"] == "extractive"
