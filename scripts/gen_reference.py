#!/usr/bin/env python3
"""Write the generated reference pages: docs/cli.md (every ``archivist`` command and
option, from the click commands), docs/configuration.md (every setting and its
environment variable, from ``Settings`` and ``ServerSettings``), the root
SECURITY.md and CHANGELOG.md as docs/security.md and docs/changelog.md, and each
docs/results/NAME.md.tmpl as docs/NAME.md with its figures from the result files
(docs/results/*.json, written by ``archivist bench … --save``).

    python scripts/gen_reference.py          # rewrite the pages
    python scripts/gen_reference.py --check  # exit 1 when a page differs from the code

tests/test_docs.py runs the check, so a page cannot drift from the code.
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import inspect
import re
import sys
from pathlib import Path

import click

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
WIDTH = 88  # columns of the help texts shown


# -- the CLI ----------------------------------------------------------------------------------


def _commands(group: click.Command, path: tuple[str, ...]):
    """(path, command) of every command under ``group``, depth first, in name order."""
    yield path, group
    if isinstance(group, click.Group):
        for name in sorted(group.commands):
            yield from _commands(group.commands[name], (*path, name))


def _help(command: click.Command, path: tuple[str, ...], root: click.Command) -> str:
    parent = None
    for i, name in enumerate(path):
        parent = click.Context(
            command if i == len(path) - 1 else click.Group(name),
            info_name=name,
            parent=parent,
            max_content_width=WIDTH,
            terminal_width=WIDTH,
            **(root.context_settings if i == 0 else {}),
        )
    assert parent is not None
    return command.get_help(parent).rstrip()


def cli_page() -> str:
    from archivist.cli.main import cli

    lines = [
        "# CLI reference",
        "",
        "Every `archivist` command with its options, as `--help` prints them. This page is",
        "generated from the commands (`python scripts/gen_reference.py`); a test fails",
        "when it drifts from them.",
        "",
    ]
    found = list(_commands(cli, ("archivist",)))
    lines += ["| command | what it does |", "|---|---|"]
    for path, command in found[1:]:
        summary = (command.get_short_help_str(limit=100) or "").replace("|", "\\|")
        anchor = "-".join(path)
        lines.append(f"| [`{' '.join(path)}`](#{anchor}) | {summary} |")
    lines.append("")
    for path, command in found:
        lines += [
            f"## {' '.join(path)}",
            "",
            "```text",
            _help(command, path, cli),
            "```",
            "",
        ]
    return "\n".join(lines)


# -- the settings -----------------------------------------------------------------------------

_FIELD = re.compile(r"^    (\w+): [^=]+(?:=\s*(.*?))?\s*(?:#\s*(.*))?$")


def _field_notes(cls: type) -> dict[str, str]:
    """Each field's comments in the class body: the lines above it and the one after it."""
    notes: dict[str, str] = {}
    above: list[str] = []
    for line in inspect.getsource(cls).splitlines():
        stripped = line.strip()
        if stripped.startswith("#"):
            above.append(stripped.lstrip("# ").strip())
            continue
        m = _FIELD.match(line)
        if m and not stripped.startswith(("def ", "@")):
            parts = [*above, m.group(3) or ""]
            notes[m.group(1)] = " ".join(p for p in parts if p).strip()
        above = []
    return notes


def _env_names(cls: type, read) -> dict[str, str]:
    """field -> the environment variable ``read`` (its from_env) sets it from, found by
    setting each ARCHIVIST_* name its source spells and seeing which field moves."""
    source = inspect.getsource(cls.from_env)
    spelled = set(re.findall(r'"([A-Z][A-Z_]+)"', source))
    # the names of the loops that read ARCHIVIST_<NAME> into field <name>
    spelled |= {n.upper() for n in re.findall(r'^\s+"([a-z][a-z_]+)",$', source, re.M)}
    spelled |= {n.upper() for n in re.findall(r'\("([a-z][a-z_]+)", (?:int|float)\)', source)}
    for names in re.findall(r"for name in \(([^)]*)\):", source):
        spelled |= {n.upper() for n in re.findall(r'"([a-z][a-z_]+)"', names)}
    base = read({})
    out: dict[str, str] = {}
    for name in sorted(spelled):
        env = f"ARCHIVIST_{name}"
        probes = ("7", "0.5", "true", "rules", "manual", "oldest_wins", "thread", "upstream")
        for probe in (*probes, "x", "t:" + "k" * 16):
            try:
                got = read({env: probe})
            except Exception:  # noqa: BLE001 - a value this setting refuses; try another
                continue
            moved = [
                f.name
                for f in dataclasses.fields(cls)
                if getattr(got, f.name) != getattr(base, f.name) and f.name != "memory"
            ]
            for field in moved:
                out.setdefault(field, env)
            if moved:
                break
    for f in dataclasses.fields(cls):  # one no probe could set alone (store=postgres needs a DSN)
        if f.name not in out and f.name.upper() in spelled:
            out[f.name] = f"ARCHIVIST_{f.name.upper()}"
    return out


def _default(value: object) -> str:
    if value in ("", (), None):
        return "—"
    return f"`{value}`"


def _table(cls: type, read, skip: tuple[str, ...] = ()) -> list[str]:
    notes, envs = _field_notes(cls), _env_names(cls, read)
    rows = ["| setting | environment | default | what it is |", "|---|---|---|---|"]
    for f in dataclasses.fields(cls):
        if f.name in skip:
            continue
        default = f.default if f.default is not dataclasses.MISSING else "—"
        env = f"`{envs[f.name]}`" if f.name in envs else "—"
        note = notes.get(f.name, "").replace("|", "\\|")
        rows.append(f"| `{f.name}` | {env} | {_default(default)} | {note} |")
    return rows


def configuration_page() -> str:
    from archivist.config import Settings
    from archivist.server.settings import ServerSettings

    lines = [
        "# Configuration",
        "",
        "Every setting with its environment variable and default. Library code takes a",
        "`Settings` object (`archivist.config.Settings`) and reads no environment;",
        "`Settings.from_env()` (what the CLI and `Memory()` use) reads the `ARCHIVIST_*`",
        "variables below, and `OPENAI_API_KEY` stands in for an empty `*_API_KEY`. The",
        "defaults need no network: a SQLite file, the bundled embedder, no LLM.",
        "This page is generated from the code (`python scripts/gen_reference.py`); a test",
        "fails when it drifts.",
        "",
        "## Memory (`Settings`)",
        "",
        *_table(Settings, lambda env: Settings.from_env(env)),
        "",
        "## Server and proxy (`ServerSettings`)",
        "",
        "What `archivist serve` and `archivist ui` add; their command-line options set",
        "the same fields ([CLI reference](cli.md#archivist-serve)). `memory` is the",
        "`Settings` above, which every tenant's store starts from.",
        "",
        *_table(ServerSettings, lambda env: ServerSettings.from_env(env), skip=("memory",)),
        "",
    ]
    return "\n".join(lines)


def _copied(name: str, links: dict[str, str]) -> str:
    """A root document as a docs page (its links to other root documents pointed at
    their pages): the repository keeps one text, the site shows it."""
    text = (ROOT / name).read_text(encoding="utf-8").rstrip("\n")
    for old, new in links.items():
        text = text.replace(old, new)
    note = f"<!-- generated from {name} by scripts/gen_reference.py: edit {name} -->"
    return f"{note}\n{text}"


PAGES = {
    "cli.md": cli_page,
    "configuration.md": configuration_page,
    "security.md": lambda: _copied("SECURITY.md", {}),
    "changelog.md": lambda: _copied("CHANGELOG.md", {"](SECURITY.md)": "](security.md)"}),
}


def _pages() -> dict:
    """The pages above, those rendered from result files (scripts/results_page.py), and
    the README, whose figure blocks are rendered from them too."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from results_page import RenderError, pages, with_fragments

    readme = ROOT / "README.md"
    made = {
        **pages(DOCS),
        "../README.md": lambda: with_fragments(
            readme.read_text(encoding="utf-8"), DOCS / "results"
        ).rstrip("\n"),
    }
    rendered = {}
    for name, make in made.items():

        def guarded(make=make, name=name) -> str:
            try:
                return make()
            except RenderError as e:
                raise SystemExit(f"docs/{name}: {e}") from None

        rendered[name] = guarded
    return {**PAGES, **rendered}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail when a page drifted")
    args = parser.parse_args(argv)
    stale = []
    for name, make in _pages().items():
        text = make() + "\n"
        path = DOCS / name
        if args.check:
            if not path.is_file() or path.read_text(encoding="utf-8") != text:
                stale.append(name)
                old = path.read_text(encoding="utf-8") if path.is_file() else ""
                diff = difflib.unified_diff(old.splitlines(), text.splitlines(), lineterm="")
                print("\n".join(list(diff)[:40]))
        else:
            path.write_text(text, encoding="utf-8")
    if stale:
        print(f"stale: docs/{', docs/'.join(stale)}: run python scripts/gen_reference.py")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
