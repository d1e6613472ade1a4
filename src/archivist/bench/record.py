"""Result files: a benchmark's JSON result kept with the command that produced it.

``archivist bench … --save docs/results/NAME.json`` writes one; the benchmark page
(docs/benchmarks.md) is rendered from them by scripts/gen_reference.py, so the page
cannot disagree with the figures a bench printed.
"""

from __future__ import annotations

import json
import os
import platform
import shlex
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click

from ..errors import InputError

FORMAT = 1


def machine() -> dict[str, Any]:
    """What the figures were measured on: cores, memory, CPU architecture, Python."""
    try:
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):  # not a POSIX host
        memory = 0
    return {
        "cores": os.cpu_count() or 0,
        "memory_gib": round(memory / 2**30, 1),
        "arch": platform.machine(),
        "python": platform.python_version(),
    }


def command_line(ctx: click.Context, skip: tuple[str, ...] = ("as_json", "save")) -> str:
    """The command that reproduces this run: the ``ARCHIVIST_…`` settings in the
    environment, ``archivist`` and every option given a value other than its default,
    rebuilt from click's parsed parameters (not ``sys.argv``)."""
    chain = []
    node: click.Context | None = ctx
    while node is not None:
        chain.append(node)
        node = node.parent
    words = [*_environment(), "archivist"]
    for node in reversed(chain):
        if node.parent is not None:
            words.append(node.info_name or "")
        words += _given(node, skip)
    return " ".join(words)


def _environment() -> list[str]:
    """``ARCHIVIST_…=value`` for each setting given by the environment, secrets left out."""
    secret = ("KEY", "TOKEN", "SECRET", "PASSWORD", "DSN")
    return [
        f"{name}={shlex.quote(value)}"
        for name, value in sorted(os.environ.items())
        if name.startswith("ARCHIVIST_") and not any(s in name for s in secret)
    ]


def _given(ctx: click.Context, skip: tuple[str, ...]) -> list[str]:
    """The options and arguments of one command level that differ from their defaults."""
    out: list[str] = []
    args: list[str] = []
    for param in ctx.command.params:
        name = param.name or ""
        value = ctx.params.get(name)
        if name in skip or value is None or value == param.default or value in ((), False):
            continue
        if isinstance(param, click.Argument):
            args.append(shlex.quote(str(value)))
            continue
        flag = max(param.opts, key=len)
        if isinstance(param, click.Option) and param.is_flag:
            out.append(flag)
            continue
        for one in value if isinstance(value, tuple) else (value,):
            out += [flag, shlex.quote(str(one))]
    return out + args


def save(result: dict, path: Path, command: str) -> None:
    """Write ``result`` to ``path`` with the command, the date and the machine."""
    record = {
        "format": FORMAT,
        "command": command,
        "measured": datetime.now(UTC).strftime("%Y-%m-%d"),
        "machine": machine(),
        "result": result,
    }
    text = json.dumps(record, indent=2, ensure_ascii=False, default=str)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text + "\n", encoding="utf-8")
    except OSError as e:
        raise InputError(f"cannot write the result file {path}: {e.strerror}") from None


def load(path: Path) -> dict[str, Any]:
    """A result file written by :func:`save`; a malformed one is an ``InputError``."""
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise InputError(f"{path}: not a readable result file ({e})") from None
    if not isinstance(record, dict) or record.get("format") != FORMAT:
        raise InputError(f"{path}: not a result file of format {FORMAT}")
    for key in ("command", "measured", "machine", "result"):
        if key not in record:
            raise InputError(f"{path}: result file lacks {key!r}")
    return record
