"""A mem0-compatible facade: ``from archivist.mem0 import Memory`` and a mem0 script's
common calls work unchanged, on archivist's memory.

A mem0 "memory" is an archivist claim (its id is the claim id, as text), said by or
about ``user_id``; ``add`` stores the messages themselves (every word is kept,
attributed to its speaker) and returns the claims extracted from them. Results are
the dicts mem0 documents: ``{"results": [...]}`` for add, search and get_all, a
message dict for update and delete, a list of ADD/UPDATE/DELETE entries for history.

What differs, on purpose: ``update`` keeps the old wording as history (a new claim
supersedes it); ``get``, ``update``, ``history`` and ``delete`` follow that
correction chain, so the id a caller holds keeps naming the memory. Ids are never
reused: a deleted id answers ``get`` with None, ``update``/``delete`` with NotFound,
and ``history`` with its entries and a final DELETE (without its words, which are
gone). ``metadata`` is accepted but not stored. Everything else is MemoryService
(``.memory``).
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

from .args import Checked, EpochSeconds
from .config import Settings
from .errors import InputError, NotFound
from .model import Claim, DeletedClaim
from .service import MemoryService
from .service_edits import MemoryId, SearchLimit, claim_id

__all__ = ["Memory"]
ACTOR = "mem0"  # who the audit log names for deletions through this facade


class Memory(Checked):
    """mem0's ``Memory`` API over a MemoryService (see the module docstring)."""

    def __init__(
        self, memory: MemoryService | None = None, *, path: str | Path | None = None, **kw: Any
    ) -> None:
        self.memory = memory or MemoryService(path, settings=Settings.from_env(), **kw)

    @classmethod
    def from_config(cls, config: dict | None = None) -> Memory:
        """A memory from a config dict: ``path`` (or mem0's ``history_db_path``) and
        ``embedder`` (a provider name, ``{"provider": name}`` or an Embedder object).

        mem0's ``llm`` and ``vector_store`` sections are ignored: the store is one
        file and the archivist's LLM comes from the ARCHIVIST_* settings.
        """
        if config is not None and not isinstance(config, dict):
            raise InputError(f"from_config takes a dict; got {config!r}")
        config = dict(config or {})
        path = config.get("path") or config.get("history_db_path")
        emb = config.get("embedder")
        if isinstance(emb, dict):
            emb = emb.get("provider")
        settings = Settings.from_env(embedder=emb if isinstance(emb, str) else None)
        given = None if isinstance(emb, str) or emb is None else emb
        return cls(MemoryService(path, settings=settings, embedder=given))

    # -- writes ---------------------------------------------------------------------

    def add(
        self,
        messages: str | dict | list[dict | str],
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
        metadata: dict | None = None,
        timestamp: datetime | str | EpochSeconds | None = None,
        **_: Any,
    ) -> dict:
        """Store the messages for ``user_id`` (``run_id``: the conversation); the memories
        extracted from them as ``{"results": [{"id", "memory", "event": "ADD"}]}``.

        A string is one user message, never a file path (as in mem0)."""
        results = self.memory.add(
            [messages] if isinstance(messages, str) else messages,
            user_id=user_id,
            agent_id=agent_id,
            conversation=run_id,
            metadata=metadata,
            timestamp=timestamp,
        )
        keys = [(r.conversation, mid) for r in results for mid in r.added_ids]
        found = self.memory.store.claims_for_message_ids(keys)
        claims = {c.id: c for cs in found.values() for c in cs if c.status == "current"}
        ordered = sorted(claims.values(), key=lambda c: c.id or 0)
        return {"results": [{"id": str(c.id), "memory": c.text, "event": "ADD"} for c in ordered]}

    def update(self, memory_id: MemoryId, data: str) -> dict:
        """Correct a memory (its history keeps the old wording); NotFound when it is not
        stored (a deleted id stays deleted: ids are never reused)."""
        self.memory.update(self._head(memory_id).id, data)  # type: ignore[arg-type]
        return {"message": "Memory updated successfully!"}

    def delete(self, memory_id: MemoryId) -> dict:
        """Forget a memory for good, with every wording it had (NotFound when it is not
        stored); its history then ends with a DELETE entry."""
        self.memory.forget_claim(self._known(memory_id).id, actor=ACTOR)  # type: ignore[arg-type]
        return {"message": "Memory deleted successfully!"}

    def delete_all(
        self, user_id: str | None = None, agent_id: str | None = None, run_id: str | None = None
    ) -> dict:
        """Forget everything of a user (what they said and every claim about them), an
        agent, or a run (a conversation)."""
        if run_id is not None:
            try:
                self.memory.delete(conversation=run_id, actor=ACTOR)
            except NotFound:
                pass  # as mem0: a run with nothing stored has nothing to delete
        elif user_id is not None or agent_id is not None:
            self.memory.delete(person=user_id or agent_id, actor=ACTOR)
        else:
            raise InputError("delete_all needs user_id, agent_id or run_id (reset() forgets all)")
        return {"message": "Memories deleted successfully!"}

    def reset(self) -> None:
        """Forget everything."""
        self.memory.reset(actor=ACTOR)

    # -- reads ----------------------------------------------------------------------

    def search(
        self,
        query: str,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        limit: SearchLimit = 100,
        **_: Any,
    ) -> dict:
        """The current memories best matching ``query``, each with its ``score``."""
        found = self.memory.search_memories(query, user_id=user_id or agent_id, limit=limit)
        return {"results": [{**self._item(c, user_id), "score": s} for c, s in found]}

    def get_all(
        self, *, user_id: str | None = None, agent_id: str | None = None, limit: int = 100, **_: Any
    ) -> dict:
        """The current memories of ``user_id`` (history stays out)."""
        found = self.memory.get_all(user_id or agent_id, limit=limit)
        return {"results": [self._item(c, user_id) for c in found]}

    def get(self, memory_id: MemoryId) -> dict | None:
        """A memory (its latest wording), or None when it is not stored."""
        try:
            return self._item(self._head(memory_id))
        except NotFound:
            return None

    def history(self, memory_id: MemoryId) -> list[dict]:
        """ADD, then one UPDATE per correction (old and new wording), oldest first; a
        deleted memory's entries end with DELETE, all without its words (they are gone)."""
        try:
            chain = self._chain(self._known(memory_id))
        except NotFound:
            gone = self.memory.store.deleted_claim_chain(claim_id(memory_id))
            if not gone:
                raise
            return self._deleted_history(gone)
        first = chain[0]
        out = [self._entry(first, None, first.text, "ADD", first.said_at.isoformat())]
        for old, new in zip(chain, chain[1:], strict=False):
            when = next(
                (e.at.isoformat() for e in self.memory.history(old.id) if e.other == new.id),  # type: ignore[arg-type]
                new.said_at.isoformat(),
            )
            out.append(self._entry(new, old.text, new.text, "UPDATE", when))
        return out

    # -- helpers --------------------------------------------------------------------

    def _known(self, memory_id: MemoryId) -> Claim:
        return self.memory.memory(memory_id)

    def _deleted_history(self, chain: list[DeletedClaim]) -> list[dict]:
        """ADD, UPDATE per correction, then DELETE, of a deleted memory: ids and times."""
        first, last = chain[0], chain[-1]
        out = [self._entry_of(first.id, "ADD", first.said_at.isoformat())]
        out += [self._entry_of(c.id, "UPDATE", c.created_at.isoformat()) for c in chain[1:]]
        out.append(self._entry_of(last.id, "DELETE", last.deleted_at.isoformat(), deleted=True))
        return out

    def _head(self, memory_id: MemoryId) -> Claim:
        """The latest wording of a memory: its user corrections followed to the end."""
        return self._chain(self._known(memory_id))[-1]

    def _chain(self, claim: Claim) -> list[Claim]:
        """The memory's wordings, oldest first, from the first one the user never corrected."""
        store, c = self.memory.store, claim
        while (origin := store.claim_edit_origin(c.id)) is not None:  # type: ignore[arg-type]
            c = store.claims_by_id([origin]).get(origin) or c
            if c.id != origin:
                break
        chain = [c]
        while c.status == "superseded" and c.replaced_by is not None:
            nxt = store.claims_by_id([c.replaced_by]).get(c.replaced_by)
            if nxt is None or nxt.method != "user-correction" or nxt in chain:
                break
            chain.append(c := nxt)
        return chain

    @staticmethod
    def _item(c: Claim, user_id: str | None = None) -> dict:
        when = c.said_at.isoformat()
        return {
            "id": str(c.id),
            "memory": c.text,
            "user_id": user_id or c.subject,
            "speaker": c.speaker,
            "conversation": c.conversation,
            "metadata": {"kind": c.kind, "evidence": list(c.evidence), "status": c.status},
            "created_at": when,
            "updated_at": when,
        }

    @staticmethod
    def _entry(c: Claim, old: str | None, new: str, event: str, when: str) -> dict:
        return Memory._entry_of(c.id, event, when, old=old, new=new)  # type: ignore[arg-type]

    @staticmethod
    def _entry_of(
        cid: int,
        event: str,
        when: str,
        *,
        old: str | None = None,
        new: str | None = None,
        deleted: bool = False,
    ) -> dict:
        return {
            "id": f"{cid}:{event.lower()}",
            "memory_id": str(cid),
            "old_memory": old,
            "new_memory": new,
            "event": event,
            "created_at": when,
            "updated_at": when,
            "is_deleted": deleted,
        }
