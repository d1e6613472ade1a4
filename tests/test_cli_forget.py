"""``archivist forget``, ``correct`` and ``reset`` through the console entry point."""

from __future__ import annotations

import json

from click.testing import CliRunner

from archivist.cli.main import cli
from test_cli import conv_file, db, run_main  # noqa: F401 - fixtures


def ingest(capsys, db, conv_file) -> list[dict]:  # noqa: F811
    code, _, err = run_main(capsys, "--db", str(db), "--embedder", "fake", "ingest", str(conv_file))
    assert code == 0, err
    code, out, _ = run_main(
        capsys, "--db", str(db), "--embedder", "fake", "show", "claims", "--json"
    )
    return json.loads(out)


def test_forget_claim_message_person_and_correct(capsys, db, conv_file) -> None:  # noqa: F811
    claims = ingest(capsys, db, conv_file)
    base = ("--db", str(db), "--embedder", "fake")
    cat = next(c for c in claims if "Pixel" in c["text"])
    code, out, _ = run_main(capsys, *base, "correct", str(cat["id"]), "Ana adopted Pixel in May.")
    assert code == 0 and "corrected" in out
    code, out, _ = run_main(capsys, *base, "forget", "--claim", str(cat["id"]), "--json")
    assert code == 0 and json.loads(out)["deleted"] == 2
    code, out, err = run_main(capsys, *base, "forget", "--message", "ana-lee:D1:4")
    assert code == 0 and "forgot message D1:4 of ana-lee: 1 deleted" in out, err
    code, _, err = run_main(capsys, *base, "forget", "--message", "ana-lee:D1:4")
    assert code == 6 and err.count("\n") == 1 and "D1:4" in err
    code, out, _ = run_main(capsys, *base, "forget", "--person", "Lee")
    assert code == 0 and "person Lee" in out
    code, _, err = run_main(capsys, *base, "forget", "--claim", "1", "--person", "Lee")
    assert code == 3 and "exactly one" in err
    code, _, err = run_main(capsys, *base, "correct", "99999", "nothing")
    assert code == 6 and "no memory 99999" in err


def test_reset_asks_first(capsys, db, conv_file) -> None:  # noqa: F811
    ingest(capsys, db, conv_file)
    base = ["--db", str(db), "--embedder", "fake"]
    no = CliRunner().invoke(cli, [*base, "reset"], input="n\n")
    assert no.exit_code != 0
    code, out, _ = run_main(capsys, *base, "stats", "--json")
    assert json.loads(out)["messages"] == 7
    code, out, _ = run_main(capsys, *base, "reset", "--yes")
    assert code == 0 and "everything forgotten" in out
    code, out, _ = run_main(capsys, *base, "stats", "--json")
    assert json.loads(out)["messages"] == 0


def test_people_merge_and_split_are_your_decisions(capsys, db, conv_file) -> None:  # noqa: F811
    ingest(capsys, db, conv_file)
    base = ("--db", str(db), "--embedder", "fake")
    code, out, err = run_main(capsys, *base, "people", "merge", "Ana", "Lee", "--reason", "same")
    assert code == 0 and "ana-lee/Ana, ana-lee/Lee" in out, err
    code, out, err = run_main(capsys, *base, "people", "split", "Ana", "ana-lee", "Lee", "--json")
    assert code == 0 and json.loads(out)["name"] == "Lee", err
    code, out, _ = run_main(capsys, *base, "decisions", "--json")
    assert [(d["verdict"], d["method"]) for d in json.loads(out)][-2:] == [
        ("MERGE", "user"),
        ("SEPARATE", "user"),
    ]
    code, _, err = run_main(capsys, *base, "people", "merge", "Ana", "Ana")
    assert code == 3 and err.count("\n") == 1 and "already one person" in err
