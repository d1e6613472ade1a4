"""The ``extract`` job: read a conversation's new messages, then queue consolidation.

A server queues one per conversation that grew, keyed by its size, and a
worker runs it away from requests (its own process by default: see
``archivist.server.worker``). Extraction skips sessions already read, so a
job queued for a size an earlier job already covered costs two reads. With
an LLM archivist a new tail shorter than ``extract_min_tail`` waits for more
turns; a delayed job reads it once the chat has been quiet ``extract_idle_s``.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..service import MemoryService


def run_extract(memory: MemoryService, payload: dict) -> dict:
    """Extract ``payload["conversation"]`` and queue a round if it is due (not run it here:
    the runner that runs this job takes the round next, in order)."""
    cid = payload["conversation"]
    if not memory.store.existing_hashes(cid):
        return {"skipped": "the conversation is gone (deleted since it was queued)"}
    # A live chat's short new tail waits for more turns (LLM archivist), and a check is
    # queued for when the chat goes quiet; that check reads whatever is left.
    report = memory.extract([cid], hold_short_tails=not payload.get("idle"))
    size = len(memory.store.existing_hashes(cid))
    if not size:
        # Deleted while it was being read: what was just saved must go too.
        memory.store.clear_derived(cid)
        return {"skipped": "the conversation was deleted while it was read"}
    if report.sessions_waiting:
        memory.jobs.enqueue_extract(cid, size, time.time() + memory.settings.extract_idle_s)
    queued = memory.queue_consolidation([cid])
    return {**vars(report), "round_queued": queued}
