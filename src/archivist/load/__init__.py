"""File loaders: LoCoMo, LongMemEval, generic JSON Lines and OpenAI chat transcripts.

Every loader is all or nothing: it returns every conversation in the file or
raises :class:`~archivist.errors.LoadError` naming file, record and field.
Whatever the format, messages are then held to the store's bounds
(model.message_problem): dates within 1900..2200, sessions within
0..2**31-1, and text without NUL bytes or lone surrogates (refused, not
repaired, so both backends store the same thing).
"""

from __future__ import annotations

from datetime import UTC, datetime, tzinfo
from pathlib import Path
from typing import Any

from archivist.clock import system_clock
from archivist.errors import LoadError
from archivist.load import jsonl, locomo, longmemeval, openai_chat
from archivist.load._common import decode, load_json, read_text
from archivist.model import Conversation, message_problem, text_problem

__all__ = ["FORMATS", "detect_format", "load_file", "parse"]

FORMATS: tuple[str, ...] = ("locomo", "longmemeval", "jsonl", "openai")

_JSONL_SUFFIXES = (".jsonl", ".ndjson")


def load_file(
    path: str | Path,
    format: str | None = None,
    *,
    now: datetime | None = None,
    default_tz: tzinfo = UTC,
) -> list[Conversation]:
    """Read, detect and parse one file; ``now`` (default: the current time) dates OpenAI chats."""
    source = str(path)
    if format is not None and format not in FORMATS:
        raise _unknown_format(format, source)
    text = read_text(path)
    if format is None and Path(path).suffix.lower() in _JSONL_SUFFIXES:
        format = "jsonl"
    if format == "jsonl":
        return parse(text, "jsonl", source=source, now=now, default_tz=default_tz)
    data = load_json(text, source)
    if format is None:
        format = detect_format(path, data)
    return parse(data, format, source=source, now=now, default_tz=default_tz)


def detect_format(path: str | Path, data: Any) -> str:
    """Guess the format from the file name (.jsonl) or the shape of its decoded JSON."""
    if Path(path).suffix.lower() in _JSONL_SUFFIXES:
        return "jsonl"
    first = data[0] if isinstance(data, list) and data else data
    if isinstance(first, dict):
        if isinstance(data, list) and "conversation" in first and "qa" in first:
            return "locomo"
        if "haystack_sessions" in first:
            return "longmemeval"
        if isinstance(data, list) and "role" in first and "content" in first:
            return "openai"
        if data is first and isinstance(first.get("messages"), list):
            return "openai"
    raise LoadError(
        str(path),
        None,
        None,
        f"cannot tell the format; pass one of {', '.join(FORMATS)}",
    )


def parse(
    data: Any,
    format: str,
    *,
    source: str,
    now: datetime | None = None,
    default_tz: tzinfo = UTC,
) -> list[Conversation]:
    """Parse already-read data: JSONL as text, the others as decoded JSON (or its text)."""
    if format not in FORMATS:
        raise _unknown_format(format, source)
    if isinstance(data, bytes | bytearray):
        data = decode(bytes(data), source)
    if format == "jsonl":
        if not isinstance(data, str):
            raise LoadError(source, None, None, "JSON Lines data must be text")
        return _checked(jsonl.parse(data, source=source, default_tz=default_tz), source)
    if isinstance(data, str):
        data = load_json(data, source)
    if format == "locomo":
        return _checked(locomo.parse(data, source=source, default_tz=default_tz), source)
    if format == "longmemeval":
        return _checked(longmemeval.parse(data, source=source, default_tz=default_tz), source)
    now = now if now is not None else system_clock()
    return _checked(openai_chat.parse(data, source=source, now=now, default_tz=default_tz), source)


def _checked(convs: list[Conversation], source: str) -> list[Conversation]:
    """Refuse a file holding any message the store must not take (see the module docstring)."""
    for c in convs:
        for m in c.messages:
            if found := message_problem(m):
                field, problem = found
                raise LoadError(source, f"{c.id!r}/{m.id!r}", field, problem)
        for i, person in enumerate(c.participants):
            if problem := text_problem(person):
                raise LoadError(source, repr(c.id), f"participants[{i}]", problem)
    return convs


def _unknown_format(format: object, source: str) -> LoadError:
    """Name the accepted formats when the caller asks for another."""
    return LoadError(
        source, None, None, f"unknown format {format!r}; expected one of {', '.join(FORMATS)}"
    )
