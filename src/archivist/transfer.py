"""Export and import a memory as JSON Lines: the way between backends and machines.

What is exported is what cannot be re-derived: every message of the log (one
line each, in the documented ``jsonl`` input format plus ``session_start``),
and the identities the caller declared (lines with ``"record": "identity"``).
Everything else — episodes, claims, entities, conflicts, people decisions,
scenes, summaries — is derived from those and is rebuilt on import by the
archivist configured there (with an LLM whose answers are cached, a rebuild
costs nothing it has not paid before). Usefulness history is not carried: it
points at derived items whose ids are new after a rebuild.

A file written by ``export`` can also be given to ``archivist ingest``: the
jsonl loader skips the identity lines.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING

from .errors import LoadError
from .model import Conversation, Message

if TYPE_CHECKING:
    from .store.base import AddResult, Store

#: Stores conversations (MemoryService.add: messages, then extraction as configured).
Add = Callable[[list[Conversation]], Sequence["AddResult"]]
#: Declares that a name in a conversation is a user (MemoryService.declare_identity).
Declare = Callable[[str, str, str], object]

IDENTITY = "identity"


def message_record(m: Message) -> dict:
    """One stored message as a line of the jsonl input format (round trips exactly)."""
    record = {
        "conversation": m.conversation,
        "id": m.id,
        "session": m.session,
        "session_start": m.session_start.isoformat() if m.session_start else None,
        "speaker": m.speaker,
        "role": m.role,
        "addressees": list(m.addressees),
        "attachments": [a.to_dict() for a in m.attachments],
        "text": m.text,
        "timestamp": m.timestamp.isoformat(),
    }
    if m.metadata:
        record["metadata"] = m.metadata
    return record


def export_records(store: Store, conversation: str | None = None) -> Iterator[dict]:
    """Messages in conversation order, then declared identities (of the exported scope)."""
    ids = [conversation] if conversation else [c["id"] for c in store.conversations()]
    for cid in ids:
        for _, m in store.conversation_messages(cid):
            yield message_record(m)
    wanted = set(ids)
    for conv, name, user_id, _person in store.declared_identities():
        if conv in wanted:
            yield {"record": IDENTITY, "user_id": user_id, "conversation": conv, "name": name}


def export_lines(store: Store, conversation: str | None = None) -> Iterator[str]:
    for record in export_records(store, conversation):
        yield json.dumps(record, ensure_ascii=False) + "\n"


def import_lines(
    add: Add, declare: Declare, lines: Iterable[str] | str, source: str = "import"
) -> dict:
    """Store an export: all its messages (all or nothing), then its declared identities."""
    from .load import parse

    text = lines if isinstance(lines, str) else "".join(lines)
    identities = []
    for number, line in enumerate(text.split("\n"), start=1):
        if '"record"' not in line:
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError:
            continue  # the loader below reports it with its line number
        if isinstance(obj, dict) and obj.get("record") == IDENTITY:
            for key in ("user_id", "conversation", "name"):
                if not isinstance(obj.get(key), str) or not obj[key]:
                    raise LoadError(source, number, key, "expected a non-empty string")
            identities.append((obj["user_id"], obj["conversation"], obj["name"]))
    convs = parse(text, "jsonl", source=source)
    results = add(convs)
    for user_id, conv, name in identities:
        declare(user_id, conv, name)
    return {
        "conversations": len(results),
        "messages_added": sum(r.added for r in results),
        "messages_unchanged": sum(r.unchanged for r in results),
        "identities": len(identities),
    }
