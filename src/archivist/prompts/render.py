"""Shared rendering of messages for prompts: short integer aliases, never raw ids."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ..model import Message


def numbered(lines: Iterable[str]) -> str:
    """``[1] …`` per line: the short integer aliases a model cites items by."""
    return "\n".join(f"[{n}] {line}" for n, line in enumerate(lines, start=1))


def render_messages(messages: Sequence[Message], *, aliases: bool = True) -> str:
    """One line per message: ``[alias] (date time) Speaker → Addressees: text [image: …]``;
    ``aliases=False`` leaves the ``[alias]`` out (messages shown but not to be cited)."""
    lines = []
    for alias, m in enumerate(messages, start=1):
        to = f" → {', '.join(m.addressees)}" if m.addressees else ""
        extra = "".join(f" [{a.kind}: {a.caption}]" for a in m.attachments if a.caption)
        role = f" ({m.role})" if m.role != "user" else ""
        tag = f"[{alias}] " if aliases else ""
        lines.append(
            f"{tag}({m.timestamp:%a %d %b %Y %H:%M}) {m.speaker}{role}{to}: {m.text}{extra}"
        )
    return "\n".join(lines)
