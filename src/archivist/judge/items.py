"""Labelled judge items: read from the bench format or the training files, checked.

A bench file is ``{"items": [...]}``; a training file is JSON lines of the same
items. Relation items: ``{"id", "task": "relation", "speaker", "older",
"newer", "older_at", "newer_at", "label"}``; support items: ``{"id", "task":
"support", "speaker", "question", "sentence", "said_at", "label"}``; kind
items: ``{"id", "task": "kind", "speaker", "role", "sentence", "said_at",
"label"}``; when items: ``{"id", "task": "when", "speaker", "sentence", "time",
"said_at", "label"}`` (``time`` is a part of ``sentence``); serves items:
``{"id", "task": "serves", "speaker", "goal", "item", "label"}``. Extra
fields (``area``, ``group``, ``hard``, ``family``) are kept for reports.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from ..errors import InputError
from .base import LABELS, GoalPair, RelationPair, Statement, SupportPair, TimeMention


@dataclass(frozen=True)
class Item:
    """One labelled pair of either task."""

    id: str
    task: str
    pair: RelationPair | SupportPair | Statement | TimeMention | GoalPair
    label: str
    extra: dict = field(default_factory=dict)


def _when(value: object, where: str) -> datetime | None:
    if value in (None, ""):
        return None
    try:
        when = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        raise InputError(f"{where}: not an ISO date or time: {value!r}") from None
    return when if when.tzinfo else when.replace(tzinfo=UTC)  # a bare date is a UTC day


def _text(raw: dict, key: str, where: str, required: bool = True) -> str:
    value = raw.get(key, "")
    if not isinstance(value, str) or (required and not value.strip()):
        raise InputError(f"{where}: {key!r} must be a non-empty string")
    return value


def parse_item(raw: object, where: str) -> Item:
    """One item from its JSON form; InputError naming ``where`` when it is malformed."""
    if not isinstance(raw, dict):
        raise InputError(f"{where}: an item must be a JSON object")
    task = raw.get("task")
    if task not in LABELS:
        raise InputError(f"{where}: 'task' must be one of {', '.join(LABELS)}, got {task!r}")
    label = raw.get("label")
    if label not in LABELS[task]:
        raise InputError(f"{where}: a {task} label is one of {', '.join(LABELS[task])}")
    speaker = _text(raw, "speaker", where, required=False)
    if task == "relation":
        pair: RelationPair | SupportPair | Statement | TimeMention | GoalPair = RelationPair(
            speaker,
            _text(raw, "older", where),
            _text(raw, "newer", where),
            _when(raw.get("older_at"), where),
            _when(raw.get("newer_at"), where),
        )
    elif task == "kind":
        role = raw.get("role") or "user"
        if role not in ("user", "assistant"):
            raise InputError(f"{where}: 'role' is user or assistant, got {role!r}")
        pair = Statement(
            _text(raw, "sentence", where), speaker, role, _when(raw.get("said_at"), where)
        )
    elif task == "when":
        sentence, time = _text(raw, "sentence", where), _text(raw, "time", where)
        if time.casefold() not in sentence.casefold():
            raise InputError(f"{where}: 'time' must be a part of 'sentence'")
        pair = TimeMention(sentence, time, speaker, _when(raw.get("said_at"), where))
    elif task == "serves":
        pair = GoalPair(_text(raw, "goal", where), _text(raw, "item", where), speaker)
    else:
        pair = SupportPair(
            _text(raw, "question", where),
            _text(raw, "sentence", where),
            speaker,
            _when(raw.get("said_at"), where),
        )
    known = {"id", "task", "label", "speaker", "older", "newer", "older_at", "newer_at"}
    known |= {"question", "sentence", "said_at", "role", "time", "goal", "item"}
    extra = {k: v for k, v in raw.items() if k not in known}
    return Item(str(raw.get("id", where)), task, pair, label, extra)


def read_items(path: Path) -> list[Item]:
    """Every item of a bench file (``{"items": [...]}``) or a JSON-lines training file."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(f"cannot read {path}: {e}") from None
    if path.suffix == ".jsonl":
        rows = []
        for n, line in enumerate(text.splitlines(), 1):
            if line.strip():
                try:
                    rows.append((json.loads(line), f"{path.name}:{n}"))
                except ValueError as e:
                    raise InputError(f"{path.name}:{n}: not JSON ({e})") from None
    else:
        try:
            data = json.loads(text)
        except ValueError as e:
            raise InputError(f"{path}: not JSON ({e})") from None
        if not isinstance(data, dict) or not isinstance(data.get("items"), list):
            raise InputError(f'{path}: expected {{"items": [...]}}')
        rows = [(raw, f"{path.name} item {i}") for i, raw in enumerate(data["items"], 1)]
    return [parse_item(raw, where) for raw, where in rows]
