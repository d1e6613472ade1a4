"""Every install hint names an extra that exists, both from an index and from a clone.

``pip install 'archivist[server]'`` works only once the package is on an index, so each
hint also gives the command a clone needs (``pip install '.[server]'``). That each extra
installs alone and its command starts is checked by scripts/check-extras (CI).
"""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src" / "archivist"
FROM_INDEX = re.compile(r"""pip install ['"]archivist\[([a-z_,-]+)\]['"]""")


def extras() -> set[str]:
    with (ROOT / "pyproject.toml").open("rb") as f:
        return set(tomllib.load(f)["project"]["optional-dependencies"])


def strings(tree: ast.AST) -> list[tuple[int, str, bool]]:
    """Each string literal with its line and whether it is a docstring; an f-string's
    literal parts joined."""
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    found: list[tuple[int, str, bool]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            text = "".join(v.value for v in node.values if isinstance(v, ast.Constant))
            found.append((node.lineno, text, False))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            found.append((node.lineno, node.value, id(node) in docstrings))
    return found


def hints() -> list[tuple[str, str, str, bool]]:
    """(where, extra, the string, docstring?) for each ``pip install 'archivist[...]'``."""
    found = []
    for path in sorted(SRC.rglob("*.py")):
        for line, text, doc in strings(ast.parse(path.read_text(), str(path))):
            for extra in FROM_INDEX.findall(text):
                found.append((f"{path.relative_to(ROOT)}:{line}", extra, text, doc))
    return found


def test_every_hint_names_a_real_extra_and_the_command_from_a_clone() -> None:
    found = hints()
    assert {extra for _, extra, _, _ in found} >= {"server", "mcp", "openai", "postgres", "local"}
    known = extras()
    for where, extra, text, _ in found:
        assert extra in known, f"{where}: no extra {extra!r} in pyproject.toml"
        assert re.search(rf"""pip install ['"]\.\[{extra}\]['"]""", text), (
            f"{where}: names 'archivist[{extra}]' (an index) but not '.[{extra}]' (a clone)"
        )


def test_hints_in_messages_are_one_line() -> None:
    messages = [(where, text) for where, _, text, doc in hints() if not doc]
    assert messages
    for where, text in messages:
        assert "\n" not in text, f"{where}: an install hint over several lines"
