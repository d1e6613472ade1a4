"""The documentation stays true: generated pages match the code, the site builds with
no broken link, the README is short, its example runs, and the demo prints what the
docs show."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from archivist.cli.main import cli

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
HASH = re.compile(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}\b")


def test_generated_pages_match_the_code() -> None:
    # a fresh interpreter: click remembers a command's help option once it has run
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gen_reference.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=300,
        env={k: v for k, v in os.environ.items() if not k.startswith(("ARCHIVIST_", "OPENAI_"))},
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]


def test_every_command_is_in_the_cli_reference() -> None:
    page = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")

    def walk(group, path):
        yield path
        for name, sub in getattr(group, "commands", {}).items():
            yield from walk(sub, f"{path} {name}")

    missing = [p for p in walk(cli, "archivist") if f"\n## {p}\n" not in page]
    assert not missing


def test_the_readme_is_short_and_no_diary() -> None:
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 300
    assert not HASH.findall(text), "commit hashes belong nowhere in the README"


def test_docstrings_cite_only_what_exists() -> None:
    cited = [
        f"{path.relative_to(ROOT)}: {m.group(0)}"
        for path in (ROOT / "src").rglob("*.py")
        for m in re.finditer(r"DESIGN(?:\.md)?\s*§[\d.]+", path.read_text(encoding="utf-8"))
    ]
    assert not cited, "DESIGN.md is not in the repository"


def test_the_readme_python_example_runs(tmp_path, monkeypatch) -> None:
    block = re.search(r"## In Python\n\n```python\n(.*?)```", README.read_text(), re.S)
    assert block is not None
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ARCHIVIST_EMBEDDER", "fake")
    (tmp_path / "chats.jsonl").write_text(
        '{"conversation": "c", "id": "1", "speaker": "lee", "text": "I am pescatarian.",'
        ' "timestamp": "2024-03-04T10:00:00Z"}\n',
        encoding="utf-8",
    )
    exec(compile(block.group(1), "README.md", "exec"), {})  # noqa: S102 - our own example


def _normalised(text: str) -> str:
    text = re.sub(r"store: .*", "store: <store>", text)
    text = re.sub(r"in \d+(?:\.\d+)? s ", "in <t> s ", text)
    text = re.sub(r"--db \S+", "--db <store>", text)
    return text.strip()


def test_the_demo_prints_what_the_docs_show(tmp_path) -> None:
    page = (ROOT / "docs" / "getting-started.md").read_text(encoding="utf-8")
    shown = re.search(r"<!-- demo-output -->\n```text\n(.*?)```", page, re.S)
    assert shown is not None
    run = CliRunner().invoke(cli, ["--db", str(tmp_path / "demo.db"), "demo"])
    assert run.exit_code == 0, run.output
    assert _normalised(run.output) == _normalised(shown.group(1))


@pytest.mark.skipif(
    shutil.which("mkdocs") is None and not (Path(sys.executable).parent / "mkdocs").exists(),
    reason="mkdocs is in the dev extra",
)
def test_the_docs_site_builds_strict(tmp_path) -> None:
    mkdocs = shutil.which("mkdocs") or str(Path(sys.executable).parent / "mkdocs")
    done = subprocess.run(
        [mkdocs, "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
