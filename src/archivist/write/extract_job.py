"""The ``extract`` job: read a conversation's new messages, then queue consolidation.

A server queues one per conversation that grew, keyed by its size, and a
worker runs it away from requests (its own process by default: see
``archivist.server.worker``). Extraction skips sessions already read, so a
job queued for a size an earlier job already covered costs two reads. With
an LLM archivist a new tail shorter than ``extract_min_tail`` waits for more
turns; a delayed job reads it once the chat has been quiet ``extract_idle_s``.
"""

from __future__ import annotations

from ..core import Core
from ..jobs import enqueue_extract, queue_consolidation
from .archivist import Archivist
from .extract import default_archivist, extract
from .index_text import DEFAULT_INDEX, IndexOptions


def run_extract(
    core: Core,
    payload: dict,
    *,
    archivist: Archivist | None = None,
    index: IndexOptions = DEFAULT_INDEX,
) -> dict:
    """Extract ``payload["conversation"]`` and queue a round if it is due (not run it here:
    the runner that runs this job takes the round next, in order).

    ``archivist``: the memory's (MemoryService hands its own in); default: the one
    the core's LLM settings give.
    """
    cid = payload["conversation"]
    store = core.store
    if not store.existing_hashes(cid):
        return {"skipped": "the conversation is gone (deleted since it was queued)"}
    # A live chat's short new tail waits for more turns (LLM archivist), and a check is
    # queued for when the chat goes quiet; that check reads whatever is left.
    report = extract(
        core,
        archivist or default_archivist(core),
        [cid],
        hold_short_tails=not payload.get("idle"),
        index=index,
    )
    size = len(store.existing_hashes(cid))
    if not size:
        # Deleted while it was being read: what was just saved must go too.
        store.clear_derived(cid)
        return {"skipped": "the conversation was deleted while it was read"}
    if report.sessions_waiting:
        idle_at = core.clock().timestamp() + core.settings.extract_idle_s
        enqueue_extract(store, cid, size, idle_at)
    queued = queue_consolidation(core, [cid])
    return {**vars(report), "round_queued": queued}
