"""The ``archivist`` command: in-process with CliRunner and ``main``, plus the real script."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from archivist.cli.main import cli, main
from archivist.load import FORMATS
from archivist.read.search import PRESETS
from conftest import ana_bob, ana_lee, jsonl_records, raw_count, write_jsonl

SCRIPT = Path(sys.executable).with_name("archivist")


def invoke(*args: str) -> Result:
    """Run the click group in-process; archivist errors propagate as exceptions."""
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return result


def run_main(capsys: pytest.CaptureFixture, *args: str) -> tuple[int, str, str]:
    """Run the console entry point (with its error handling) and capture its output."""
    try:
        main(list(args))
        code = 0
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 1
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "cli.db"


@pytest.fixture
def conv_file(tmp_path: Path) -> Path:
    return write_jsonl(tmp_path / "ana-lee.jsonl", jsonl_records(ana_lee()))


@pytest.fixture
def ingested(db: Path, conv_file: Path) -> Path:
    result = invoke("--db", str(db), "--embedder", "fake", "ingest", str(conv_file))
    assert result.exit_code == 0, result.output
    return db


def messages_in(db: Path) -> int:
    if not db.exists():
        return 0
    return raw_count(db, "SELECT count(*) FROM messages")


# -- ingest ---------------------------------------------------------------------------


def test_ingest_prints_a_summary_line(db: Path, conv_file: Path) -> None:
    result = invoke("--db", str(db), "--embedder", "fake", "ingest", str(conv_file))
    assert result.exit_code == 0
    assert f"{conv_file}: 1 conversation(s), 7 messages, 7 new" in result.stdout
    assert messages_in(db) == 7


def test_ingest_json_summary_and_idempotent_rerun(db: Path, conv_file: Path, tmp_path) -> None:
    other = write_jsonl(tmp_path / "ana-bob.ndjson", jsonl_records(ana_bob()))
    args = ("--db", str(db), "--embedder", "fake", "ingest", "--json", str(conv_file), str(other))
    first = json.loads(invoke(*args).stdout)
    assert first["db"] == str(db)
    assert [(f["file"], f["conversations"], f["messages"], f["added"]) for f in first["files"]] == [
        (str(conv_file), 1, 7, 7),
        (str(other), 1, 3, 3),
    ]
    second = json.loads(invoke(*args).stdout)
    assert [(f["added"], f["unchanged"]) for f in second["files"]] == [(0, 7), (0, 3)]
    assert messages_in(db) == 10


def test_ingest_format_option(db: Path, tmp_path: Path) -> None:
    txt = write_jsonl(tmp_path / "chat.txt", jsonl_records(ana_bob()))
    result = invoke("--db", str(db), "--embedder", "fake", "ingest", "--format", "jsonl", str(txt))
    assert result.exit_code == 0 and messages_in(db) == 3


def test_ingest_format_choices_are_the_loader_formats() -> None:
    result = CliRunner().invoke(cli, ["ingest", "--help"])
    assert result.exit_code == 0
    for name in FORMATS:
        assert name in result.stdout


def test_ingest_unknown_format_is_a_usage_error(
    capsys: pytest.CaptureFixture, db: Path, conv_file: Path
) -> None:
    code, _, err = run_main(capsys, "--db", str(db), "ingest", "--format", "csv", str(conv_file))
    assert code == 2
    assert "'csv' is not one of" in err and "jsonl" in err
    assert messages_in(db) == 0


def test_ingest_with_the_wrong_format_names_the_file(
    capsys: pytest.CaptureFixture, db: Path, conv_file: Path
) -> None:
    code, _, err = run_main(
        capsys,
        "--db",
        str(db),
        "--embedder",
        "fake",
        "ingest",
        "--format",
        "locomo",
        str(conv_file),
    )
    assert code == 3
    assert err.startswith(f"error: {conv_file}")
    assert messages_in(db) == 0


def test_ingest_of_a_missing_file_fails_and_stores_nothing(
    capsys: pytest.CaptureFixture, db: Path, tmp_path: Path
) -> None:
    missing = tmp_path / "nope.jsonl"
    code, out, err = run_main(capsys, "--db", str(db), "--embedder", "fake", "ingest", str(missing))
    assert code == 3
    assert err.strip() == f"error: {missing}: cannot read file: No such file or directory"
    assert out == ""
    assert messages_in(db) == 0


def test_ingest_of_a_garbled_file_fails_and_stores_nothing(
    capsys: pytest.CaptureFixture, db: Path, tmp_path: Path
) -> None:
    good = json.dumps(jsonl_records(ana_lee())[0])
    bad = tmp_path / "garbled.jsonl"
    bad.write_text(good + "\n" + '{"conversation": "ana-lee", "id": "D1:2", "text": \n')
    code, out, err = run_main(capsys, "--db", str(db), "--embedder", "fake", "ingest", str(bad))
    assert code == 3
    assert err.startswith(f"error: {bad}, record 2: invalid JSON")
    assert len(err.strip().splitlines()) == 1  # one readable line, no traceback
    assert messages_in(db) == 0


def test_ingest_of_binary_garbage_names_the_file(
    capsys: pytest.CaptureFixture, db: Path, tmp_path: Path
) -> None:
    junk = tmp_path / "junk.jsonl"
    junk.write_bytes(b"\xff\xfe\x00garbage\x81")
    code, _, err = run_main(capsys, "--db", str(db), "--embedder", "fake", "ingest", str(junk))
    assert code == 3
    assert f"error: {junk}: invalid UTF-8" in err
    assert messages_in(db) == 0


def test_ingest_validates_every_file_before_storing_any(
    capsys: pytest.CaptureFixture, db: Path, conv_file: Path, tmp_path: Path
) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{not json\n")
    code, _, err = run_main(
        capsys, "--db", str(db), "--embedder", "fake", "ingest", str(conv_file), str(bad)
    )
    assert code == 3 and str(bad) in err
    assert messages_in(db) == 0


def test_ingest_needs_a_file(capsys: pytest.CaptureFixture, db: Path) -> None:
    code, _, err = run_main(capsys, "--db", str(db), "ingest")
    assert code == 2 and "Missing argument" in err


# -- search ---------------------------------------------------------------------------


def test_search_json(ingested: Path) -> None:
    result = invoke(
        "--db", str(ingested), "--embedder", "fake", "search", "Pixel the grey cat", "--json"
    )
    assert result.exit_code == 0
    data = json.loads(result.stdout)
    assert data["query"] == "Pixel the grey cat"
    top = data["hits"][0]
    assert (top["conversation"], top["id"], top["speaker"]) == ("ana-lee", "D1:1", "Ana")
    assert top["addressees"] == ["Lee"]
    assert top["provenance"]["rankers"] == {"bm25": 1, "dense": 1, "claims_dense": 1}
    assert top["claims"] and all(c["speaker"] == "Ana" for c in top["claims"])
    assert len(data["hits"]) == 7  # default k=10, only 7 messages stored


def test_search_options(ingested: Path) -> None:
    base = ("--db", str(ingested), "--embedder", "fake", "search")
    data = json.loads(invoke(*base, "cat", "-k", "2", "--json").stdout)
    assert len(data["hits"]) == 2
    data = json.loads(invoke(*base, "cat", "--speaker", "Lee", "--preset", "rrf", "--json").stdout)
    assert data["hits"] and {h["speaker"] for h in data["hits"]} == {"Lee"}
    data = json.loads(invoke(*base, "cat", "--person", "Bob", "--json").stdout)
    assert data["hits"] == []
    data = json.loads(invoke(*base, "cat", "--conversation", "ana-lee", "--json").stdout)
    assert {h["conversation"] for h in data["hits"]} == {"ana-lee"}
    data = json.loads(invoke(*base, "Azores", "--preset", "bm25", "--json").stdout)
    assert [h["id"] for h in data["hits"]] == ["D2:3"]


@pytest.mark.parametrize(
    "query", ['Pixel OR "cat', "NEAR(Pixel cat) AND NOT -grey", "search_text: Pixel*", '"""']
)
def test_search_with_fts_operators_works(ingested: Path, query: str) -> None:
    result = invoke("--db", str(ingested), "--embedder", "fake", "search", query, "--json")
    assert result.exit_code == 0
    data = json.loads(result.stdout)
    assert isinstance(data["hits"], list)
    if "Pixel" in query:
        assert data["hits"][0]["id"] in {"D1:1", "D1:2"}


def test_search_plain_listing(ingested: Path) -> None:
    result = invoke("--db", str(ingested), "--embedder", "fake", "search", "Azores", "-k", "1")
    first, *claims = result.stdout.rstrip("\n").split("\n")
    assert first.startswith(" 1. ")
    assert claims and all(c.startswith("      claim [") for c in claims)
    assert "ana-lee/D2:3  2023-05-15  Ana → Lee: My sister Marta" in first


def test_search_with_no_matches_says_so(tmp_path: Path) -> None:
    from archivist.service import MemoryService
    from archivist.testing import FakeEmbedder

    MemoryService(tmp_path / "empty.db", embedder=FakeEmbedder()).close()  # a store, empty
    result = invoke("--db", str(tmp_path / "empty.db"), "--embedder", "fake", "search", "cat")
    assert result.stdout.strip() == "(no matches)"


@pytest.mark.parametrize(
    "command", [("search", "cat"), ("ask", "Who adopted a cat?"), ("show", "claims")]
)
def test_a_read_of_a_store_that_does_not_exist_names_it(
    capsys: pytest.CaptureFixture, tmp_path: Path, command: tuple[str, ...]
) -> None:
    """A mistyped --db is an error naming the path (exit 6), not an empty new store."""
    typo = tmp_path / "typo" / "memroy.db"
    code, out, err = run_main(capsys, "--db", str(typo), "--embedder", "fake", *command)
    assert code == 6
    assert err.startswith("error: no store at ") and str(typo) in err
    assert "Traceback" not in err and not out
    assert not typo.exists() and not typo.parent.exists()


def test_search_preset_and_k_choices_are_checked(
    capsys: pytest.CaptureFixture, ingested: Path
) -> None:
    base = ("--db", str(ingested), "--embedder", "fake", "search", "cat")
    code, _, err = run_main(capsys, *base, "--preset", "magic")
    assert code == 2
    for name in PRESETS:
        assert name in err
    code, _, err = run_main(capsys, *base, "-k", "0")
    assert code == 2 and "-k" in err


def test_search_with_an_empty_query_is_an_input_error(
    capsys: pytest.CaptureFixture, ingested: Path
) -> None:
    code, out, err = run_main(capsys, "--db", str(ingested), "--embedder", "fake", "search", " ")
    assert code == 3
    assert err.strip() == "error: search query must be a non-empty string"


def test_searching_with_another_embedder_is_a_store_error(
    capsys: pytest.CaptureFixture, ingested: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ARCHIVIST_EMBED_DIM", "32")
    code, _, err = run_main(capsys, "--db", str(ingested), "--embedder", "fake", "search", "cat")
    assert code == 4
    assert "fake:64" in err and "fake:32" in err


def test_a_non_archivist_db_file_is_a_store_error(
    capsys: pytest.CaptureFixture, tmp_path: Path
) -> None:
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"this is not sqlite" * 100)
    code, _, err = run_main(capsys, "--db", str(junk), "--embedder", "fake", "stats")
    assert code == 4
    assert err.startswith(f"error: {junk} is not a usable archivist store")


# -- stats, env -------------------------------------------------------------------------


def test_stats_json(ingested: Path) -> None:
    data = json.loads(invoke("--db", str(ingested), "--embedder", "fake", "stats", "--json").stdout)
    assert (data["conversations"], data["sessions"], data["messages"], data["people"]) == (
        1,
        2,
        7,
        2,
    )
    assert data["vectors"]["fake:64"] >= 7  # one per message text, plus any derived rows
    assert data["embed_model"] == "fake:64"
    assert data["path"] == str(ingested)
    assert data["conversation_list"] == [
        {
            "id": "ana-lee",
            "participants": ["Ana", "Lee"],
            "source": str(ingested.parent / "ana-lee.jsonl"),
            "messages": 7,
            "sessions": 2,
        }
    ]


def test_stats_text(ingested: Path) -> None:
    out = invoke("--db", str(ingested), "--embedder", "fake", "stats").stdout
    assert "messages:      7" in out
    assert "embed model:   fake:64" in out
    assert "ana-lee: 7 messages, 2 sessions, Ana, Lee" in out


def test_environment_supplies_db_and_embedder(
    ingested: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ARCHIVIST_DB", str(ingested))
    monkeypatch.setenv("ARCHIVIST_EMBEDDER", "fake")
    data = json.loads(invoke("stats", "--json").stdout)
    assert data["path"] == str(ingested) and data["messages"] == 7


def test_unknown_embedder_is_a_usage_error(capsys: pytest.CaptureFixture, db: Path) -> None:
    code, _, err = run_main(capsys, "--db", str(db), "--embedder", "magic", "stats")
    assert code == 2 and "magic" in err


def test_version_and_help() -> None:
    assert CliRunner().invoke(cli, ["--version"]).exit_code == 0
    help_text = CliRunner().invoke(cli, ["--help"]).stdout
    for command in ("ingest", "search", "stats", "demo", "bench"):
        assert command in help_text


@pytest.mark.parametrize("module", ["archivist.cli.demo", "archivist.cli.search"])
def test_command_modules_import_on_their_own(module: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", f"import {module}"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr


# -- the installed console script ----------------------------------------------------


@pytest.mark.skipif(not SCRIPT.exists(), reason="console script not installed in this venv")
def test_console_script_exit_codes(db: Path, conv_file: Path, tmp_path: Path) -> None:
    env_args = ("--db", str(db), "--embedder", "fake")

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [str(SCRIPT), *env_args, *args], capture_output=True, text=True, timeout=60
        )

    ok = run("ingest", "--json", str(conv_file))
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["files"][0]["added"] == 7

    missing = run("ingest", str(tmp_path / "missing.jsonl"))
    assert missing.returncode == 3
    assert f"error: {tmp_path / 'missing.jsonl'}: cannot read file" in missing.stderr
    assert "Traceback" not in missing.stderr

    usage = run("search", "cat", "-k", "0")
    assert usage.returncode == 2
    assert messages_in(db) == 7


@pytest.mark.parametrize("listing", ["claims", "entities", "episodes"])
def test_a_listing_cut_at_its_limit_says_so(
    capsys: pytest.CaptureFixture, ingested: Path, listing: str
) -> None:
    base = ("--db", str(ingested), "--embedder", "fake", "show", listing)
    code, whole, err = run_main(capsys, *base, "--limit", "1000", "--json")
    assert code == 0 and not err  # everything shown: nothing to say
    rows = json.loads(whole)
    if len(rows) < 2:
        pytest.skip(f"the sample has {len(rows)} {listing}")
    code, out, err = run_main(capsys, *base, "--limit", "1", "--json")
    assert code == 0 and len(json.loads(out)) == 1
    assert err.strip() == f"(the first 1 {listing}; --limit 2 shows more)"


def test_a_plan_called_off_reads_as_called_off_in_the_timeline_and_profile(tmp_path: Path) -> None:
    """ "Dublin marathon in October", then "Marathon is off" in May: the plan stopped
    holding when called off, before it would have begun; the listings say so instead of
    a span that ends before it starts."""
    from datetime import UTC, datetime

    from conftest import make_conversation

    conv = make_conversation(
        "plan",
        [
            [("Liam", "Training for the Dublin marathon in October, hopefully.")],
            [("Liam", "Knee surgeon says no more running for me. Marathon is off.")],
        ],
        people=("Liam", "Dara"),
        start=datetime(2024, 5, 13, 9, tzinfo=UTC),
    )
    db = tmp_path / "plan.db"
    path = write_jsonl(tmp_path / "plan.jsonl", jsonl_records(conv))
    assert invoke("--db", str(db), "--embedder", "fake", "ingest", str(path)).exit_code == 0
    timeline = invoke("--db", str(db), "--embedder", "fake", "timeline", "Liam").output
    assert "x 2024-10-01, called off 2024-05-20  Liam: Training for the Dublin" in timeline
    profile = invoke("--db", str(db), "--embedder", "fake", "profile", "Liam").output
    assert "(2024-10-01, called off 2024-05-20;" in profile
