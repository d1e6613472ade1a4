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

from .index_text import DEFAULT_INDEX, IndexOptions, index_rows, text_hash

if TYPE_CHECKING:
    from ..core import Core
    from ..model import Message

log = logging.getLogger("archivist.write")


def embed_pending(
    core: Core, cid: str, msgs: Sequence[Message], index: IndexOptions = DEFAULT_INDEX
) -> int:
    """Embed the messages of conversation ``cid`` (its log: ``msgs``, as extraction read
    it) stored without a vector; how many got one."""
    missing = core.store.messages_without_vectors(cid)
    if not missing:
        return 0
    texts = dict(zip((m.id for m in msgs), index_rows(list(msgs), index), strict=True))
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
    vectors, _ = core.embed_missing(wanted)
    return core.store.fill_message_vectors(cid, core.embedder.name, vectors)
