"""Vectors for messages stored without one.

A server stores each turn before the upstream answers and keeps embedding
(milliseconds of CPU per message with the bundled model) out of that
process: ``add(..., embed=False)`` stores the message, which keyword search
finds at once, and the worker gives it its vector before it extracts the
conversation. The text embedded is the message's index text, recomputed from
the log; a message whose text no longer hashes to what was stored (the log
around it changed since) keeps no vector and is counted.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from .index_text import index_rows, text_hash

if TYPE_CHECKING:
    from ..service import MemoryService

log = logging.getLogger("archivist.write")


def embed_pending(memory: MemoryService, conversations: Sequence[str]) -> int:
    """Embed the messages of ``conversations`` stored without a vector; how many got one."""
    filled = 0
    for cid in dict.fromkeys(conversations):
        missing = memory.store.messages_without_vectors(cid)
        if not missing:
            continue
        msgs = [m for _, m in memory.store.conversation_messages(cid)]
        texts = dict(zip((m.id for m in msgs), index_rows(msgs, memory.index_options), strict=True))
        wanted = {
            h: texts[mid][1]
            for mid, h in missing.items()
            if mid in texts and text_hash(texts[mid][1]) == h
        }
        if len(wanted) < len(set(missing.values())):
            log.warning(
                "%s: %d message(s) stored without a vector no longer match their index text",
                cid,
                len(set(missing.values())) - len(wanted),
            )
        vectors, _ = memory._embed_missing(wanted, None)
        filled += memory.store.fill_message_vectors(cid, memory.embedder.name, vectors)
    return filled
