"""Storing a conversation: only its new messages, numbered after the stored ones, one transaction.

Each message is stored with its index text (write/index_text.py) and, unless
``embed=False``, its vector (from the store's cache when the same text was
embedded before). Loaders number each file from 0, so a file of follow-up
turns is renumbered to continue the stored log instead of colliding with it.
That numbering is read before the write lock, so the store settles it again
inside its transaction (store/log.py): a concurrent append cannot share a position.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from ..core import Core, Progress
from ..errors import InputError
from ..model import Conversation, Message
from ..store.base import AddResult, IndexedMessage
from .index_text import DEFAULT_INDEX, IndexOptions, index_rows, text_hash


def continue_numbering(conv: Conversation, stored: Sequence[Message]) -> Conversation:
    """New turns of a stored conversation are numbered after the stored ones.

    Loaders number each file from 0; a file of follow-up turns must not
    collide with (or sort before) what is already in the log.
    """
    known = {m.id: m.seq for m in stored}
    top = max(known.values(), default=-1)
    msgs = []
    for m in sorted(conv.messages, key=lambda m: m.seq):
        if m.id in known:
            msgs.append(replace(m, seq=known[m.id]))
        else:
            top += 1
            msgs.append(replace(m, seq=top))
    return replace(conv, messages=tuple(msgs))


def near_batch(context: list[Message], batch: set[str], before: int) -> list[Message]:
    """The batch's messages and the ``before`` messages preceding each: all their index
    texts read. An append to a long conversation then indexes a handful of messages,
    not all of them again (it was a fifth of the time of adding one message)."""
    ordered = sorted(context, key=lambda m: m.seq)
    keep: set[int] = set()
    for i, m in enumerate(ordered):
        if m.id in batch:
            keep.update(range(max(0, i - before), i + 1))
    return [m for i, m in enumerate(ordered) if i in keep]


def stored_context(
    core: Core, conv: Conversation, existing: dict[str, str], before: int
) -> list[Message]:
    """The stored messages ``conv`` is numbered and indexed after. New turns only (a live
    chat's add): its last ``before`` messages, at least one (the numbering continues
    from it), which is all ``near_batch`` keeps of the log; else the whole log."""
    if any(m.id in existing for m in conv.messages):
        return [m for _, m in core.store.conversation_messages(conv.id)]
    return [m for _, m in core.store.last_messages(conv.id, max(1, before))]


def add_conversation(
    core: Core,
    conv: Conversation,
    *,
    index: IndexOptions = DEFAULT_INDEX,
    progress: Progress | None = None,
    embed: bool = True,
    existing: dict[str, str] | None = None,
) -> AddResult:
    """Store ``conv``'s new or changed messages (all of them or none). ``existing``: the
    conversation's stored message hashes, when the caller has just read them (the write
    checks them again in its transaction)."""
    if not conv.id:
        raise InputError("a conversation needs an id")
    store = core.store
    if existing is None:
        existing = store.existing_hashes(conv.id)
    fresh = [m for m in conv.messages if existing.get(m.id) != m.hash]
    if not fresh:
        if progress:
            progress(len(conv.messages))
        return AddResult(conversation=conv.id, unchanged=len(conv.messages))
    context = list(conv.messages)
    if existing:  # earlier turns stored before: they are this batch's context
        stored = stored_context(core, conv, existing, index.embed_context)
        conv = continue_numbering(conv, stored)
        batch_ids = {m.id for m in conv.messages}
        context = [m for m in stored if m.id not in batch_ids] + list(conv.messages)
        context = near_batch(context, batch_ids, index.embed_context)
        fresh = [m for m in conv.messages if existing.get(m.id) != m.hash]
    texts = dict(zip((m.id for m in context), index_rows(context, index), strict=True))
    rows = [IndexedMessage(m, texts[m.id][0], text_hash(texts[m.id][1])) for m in conv.messages]
    fresh_ids = {m.id for m in fresh}
    wanted = {r.embed_hash: texts[r.message.id][1] for r in rows if r.message.id in fresh_ids}
    if embed:
        vectors, embedded = core.embed_missing(wanted, progress)
    else:  # vectors later (write/pending.py); reuse what is already computed
        vectors, embedded = store.cached_vectors(core.embedder.name, wanted), 0
    result = store.add_conversation(conv, rows, core.embedder.name, vectors)
    if progress:
        progress(len(conv.messages) - embedded)
    return result
