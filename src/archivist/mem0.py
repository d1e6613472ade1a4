"""A mem0-compatible facade: ``from archivist.mem0 import Memory`` and a mem0 script's
calls work unchanged, on archivist's memory.

A mem0 "memory" is an archivist claim, said by or about ``user_id``; ``add``
stores the messages themselves (every word is kept, attributed to its speaker)
and returns the claims extracted from them. Results are the dicts mem0
documents: ``{"results": [...]}`` for add, search and get_all, a message dict
for update and delete, a list of ADD/UPDATE/DELETE entries for history. REST
``/v1/memories`` and the MCP memory tools answer with the same dicts (``item``,
``history``).

As in mem0: a memory keeps its id through ``update`` (the id is its first
claim's; a correction is a new claim in archivist, the id names the chain);
``history(id)`` lists that id's ADD, UPDATEs and, after a delete, DELETE;
``metadata`` given to ``add`` is stored with the messages, returned with every
memory drawn from them and matched by ``filters=`` in ``get_all`` and
``search`` (a value, or ``{"eq"|"ne"|"in"|"nin"|"gt"|"gte"|"lt"|"lte"|
"contains": ...}``, under ``AND``/``OR``/``NOT`` as mem0 writes them);
``search`` answers highest score first. What differs, on purpose: ids are
never reused, and a deleted memory's history keeps its ids and times but not
its words (forgetting is for good); ``infer=False`` is refused (memories are
always extracted: the messages themselves are kept and searched anyway).
Everything else is MemoryService (``.memory``).
"""

from __future__ import annotations

import hashlib
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
_OPS = ("eq", "ne", "in", "nin", "gt", "gte", "lt", "lte", "contains", "icontains")
_IDS = {"user_id", "agent_id", "run_id"}


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
        infer: bool = True,
        **_: Any,
    ) -> dict:
        """Store the messages for ``user_id`` (``run_id``: the conversation) with
        ``metadata``; the memories extracted from them as ``{"results": [{"id",
        "memory", "event": "ADD"}]}``. A string is one user message, never a file path."""
        if infer is not True:
            raise InputError(
                "infer=False is not supported: archivist keeps every message and extracts "
                "memories from them; call add() without infer"
            )
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
        claims = {
            c.id: c for cs in found.values() for c in cs if c.status == "current" and _memory(c)
        }
        ordered = sorted(claims.values(), key=lambda c: c.id or 0)
        return {
            "results": [
                {"id": str(c.id), "memory": c.text, "event": "ADD", "metadata": metadata}
                for c in ordered
            ]
        }

    def update(
        self,
        memory_id: MemoryId,
        data: str | None = None,
        *,
        kind: str | None = None,
        subject: str | None = None,
        valid_from: str | None = None,
        valid_to: str | None = None,
    ) -> dict:
        """Correct a memory (its history keeps the old wording); its id stays. NotFound
        when it is not stored (a deleted id stays deleted: ids are never reused).
        Beyond mem0: ``kind``, ``subject`` and the span it holds (ISO dates; "" clears
        one) can be corrected too."""
        self.memory.update(  # type: ignore[call-arg]
            self._head(memory_id).id,  # type: ignore[arg-type]
            data,
            kind=kind,
            subject=subject,
            valid_from=valid_from,
            valid_to=valid_to,
        )
        return {"message": "Memory updated successfully!"}

    def delete(self, memory_id: MemoryId, *, actor: str = ACTOR) -> dict:
        """Forget a memory for good, with every wording it had (NotFound when it is not
        stored); its history then ends with a DELETE entry. ``actor``: who asked, for
        the audit log (the REST and MCP front ends name themselves)."""
        self.memory.forget_claim(self._head(memory_id).id, actor=actor)  # type: ignore[arg-type]
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

    def forget_message(self, run_id: str, message_id: str) -> dict:
        """Forget one stored message (``run_id``: its conversation) and what was drawn from
        it alone (archivist's own call; mem0 has none)."""
        n = self.memory.forget_message(run_id, message_id, actor=ACTOR)
        return {"message": "Message deleted successfully!", "deleted": n}

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
        run_id: str | None = None,
        limit: SearchLimit = 100,
        filters: dict | None = None,
        threshold: float | None = None,
        **_: Any,
    ) -> dict:
        """The current memories best matching ``query``, highest ``score`` first; with
        ``filters`` only those whose metadata match, with ``threshold`` none below it."""
        who, run, match = _scope(user_id, agent_id, run_id, filters)
        wide = limit if match is None else max(limit * 5, 200)
        found = self.memory.search_memories(query, user_id=who, limit=wide, conversation=run)
        out = []
        for c, score in found:
            if (threshold is not None and score < threshold) or not _memory(c):
                continue
            it = self.item(c, score=score)
            if match is None or match(it["metadata"] or {}):
                out.append(it)
        return {"results": out[:limit]}

    def get_all(
        self,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
        filters: dict | None = None,
        limit: int = 100,
        **_: Any,
    ) -> dict:
        """The current memories of ``user_id`` (history stays out), oldest first; with
        ``filters`` only those whose metadata match."""
        who, run, match = _scope(user_id, agent_id, run_id, filters)
        wide = limit if match is None else max(limit * 5, 1000)
        found = self.memory.get_all(who, limit=wide, conversation=run)
        items = [self.item(c) for c in found if _memory(c)]
        if match is not None:
            items = [it for it in items if match(it["metadata"] or {})]
        return {"results": items[:limit]}

    def get(self, memory_id: MemoryId) -> dict | None:
        """A memory (its latest wording, under the id it was added with), or None when it
        is not stored."""
        try:
            return self.item(self._head(memory_id))
        except NotFound:
            return None

    def history(self, memory_id: MemoryId) -> list[dict]:
        """ADD, then one UPDATE per correction (old and new wording), oldest first, every
        entry under the memory's id; a deleted memory's entries end with DELETE, all
        without its words (they are gone)."""
        try:
            chain = self._chain(self._known(memory_id))
        except NotFound:
            gone = self.memory.store.deleted_claim_chain(claim_id(memory_id))
            if not gone:
                raise
            return _deleted_history(gone)
        first = chain[0]
        root = first.id  # type: ignore[assignment]
        out = [_entry(root, 0, "ADD", first.said_at.isoformat(), new=first.text)]
        for n, (old, new) in enumerate(zip(chain, chain[1:], strict=False), start=1):
            when = self._corrected_at(old, new)
            out.append(_entry(root, n, "UPDATE", when, old=old.text, new=new.text))
        return out

    # -- the shape every front end answers with -------------------------------------

    def item(self, c: Claim, *, score: float | None = None) -> dict:
        """One memory as mem0 shows it (``id``, ``memory``, ``hash``, ``metadata``,
        ``created_at``, ``updated_at``, ``user_id``, ``agent_id``, ``run_id``, and
        ``score`` from a search), with archivist's own fields beside them: who said it
        (``speaker``; ``role`` "assistant" when the assistant did), its ``kind``,
        ``status``, the time it holds (``valid_from``/``valid_to``) and its evidence."""
        chain = self._chain(c)
        first = chain[0]
        out: dict[str, Any] = {
            "id": str(first.id),
            "memory": c.text,
            "hash": hashlib.md5(c.text.encode("utf-8"), usedforsecurity=False).hexdigest(),
            "metadata": self._metadata(c),
            "created_at": first.said_at.isoformat(),
            "updated_at": self._corrected_at(chain[-2], c) if len(chain) > 1 else None,
            "user_id": c.subject,
            "agent_id": None,
            "run_id": c.conversation,
            "speaker": c.speaker,
            "role": "assistant" if c.source == "assistant_suggested" else "user",
            "kind": c.kind,
            "status": self._status(c),
            "valid_from": c.valid_from.isoformat() if c.valid_from else None,
            "valid_to": c.valid_to.isoformat() if c.valid_to else None,
            "evidence": list(c.evidence),
        }
        if score is not None:
            out["score"] = round(score, 4)
        return out

    # -- helpers --------------------------------------------------------------------

    def _status(self, c: Claim) -> str:
        """The claim's status, and ``expired`` for a current one whose time is up ("on
        antibiotics for 10 days", read a month later): never shown as holding now."""
        late = c.said_at <= (now := self.memory.core.clock()) and not c.holds_at(now)
        return "expired" if c.status == "current" and late else c.status

    def _metadata(self, c: Claim) -> dict | None:
        """The metadata of the messages a memory was drawn from (merged), or None."""
        merged: dict = {}
        for mid in c.evidence:
            m = self.memory.store.get_message(c.conversation, mid)
            if m is not None:
                merged.update(m.metadata)
        return merged or None

    def _corrected_at(self, old: Claim, new: Claim) -> str:
        """When ``new`` corrected ``old`` (its claim event's time)."""
        return next(
            (e.at.isoformat() for e in self.memory.history(old.id) if e.other == new.id),  # type: ignore[arg-type]
            new.said_at.isoformat(),
        )

    def _known(self, memory_id: MemoryId) -> Claim:
        return self.memory.memory(memory_id)

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


def _memory(c: Claim) -> bool:
    """Whether a claim is a memory as mem0 means it: not small talk the judge found
    nothing to remember in, nor an open question."""
    return c.kind not in ("chatter", "question")


def _scope(
    user_id: str | None, agent_id: str | None, run_id: str | None, filters: dict | None
) -> tuple[str | None, str | None, Any]:
    """(whose, which conversation, a metadata matcher or None) from mem0's arguments;
    ``filters`` may carry ``user_id``/``agent_id``/``run_id`` too, as mem0's do."""
    if filters is not None and not isinstance(filters, dict):
        raise InputError(f"filters must be a dict; got {type(filters).__name__}")
    rest = dict(filters or {})
    ids = {k: rest.pop(k) for k in list(rest) if k in _IDS}
    who = user_id or ids.get("user_id") or agent_id or ids.get("agent_id")
    run = run_id or ids.get("run_id")
    return who, run, (_matcher(rest) if rest else None)


def _matcher(filters: dict) -> Any:
    """A test of a memory's metadata against mem0-style ``filters`` (InputError when
    they are malformed, before anything is read)."""
    tests = []
    for key, want in filters.items():
        if key in ("AND", "OR"):
            if not isinstance(want, list) or not all(isinstance(f, dict) for f in want):
                raise InputError(f"filters: {key} takes a list of filter dicts")
            parts = [_matcher(f) for f in want]
            combine = all if key == "AND" else any
            tests.append(lambda meta, parts=parts, combine=combine: combine(p(meta) for p in parts))
        elif key == "NOT":
            if not isinstance(want, (dict, list)):
                raise InputError("filters: NOT takes a filter dict or a list of them")
            parts = [_matcher(f) for f in (want if isinstance(want, list) else [want])]
            tests.append(lambda meta, parts=parts: not any(p(meta) for p in parts))
        else:
            tests.append(_field_test(key, want))
    return lambda meta: all(t(meta) for t in tests)


def _field_test(key: str, want: Any) -> Any:
    if isinstance(want, dict):
        unknown = [op for op in want if op not in _OPS]
        if unknown:
            raise InputError(f"filters: unknown operator {unknown[0]!r}; use one of {_OPS}")
        for op in ("in", "nin"):
            if op in want and not isinstance(want[op], list):
                raise InputError(f"filters: {op!r} takes a list")
        return lambda meta: key in meta and all(_holds(op, meta[key], v) for op, v in want.items())
    if want == "*":
        return lambda meta: key in meta
    return lambda meta: key in meta and meta[key] == want


def _holds(op: str, have: Any, want: Any) -> bool:
    try:
        if op == "eq":
            return bool(have == want)
        if op == "ne":
            return bool(have != want)
        if op == "in":
            return have in want
        if op == "nin":
            return have not in want
        if op == "contains":
            return str(want) in str(have)
        if op == "icontains":
            return str(want).casefold() in str(have).casefold()
        return bool(
            {"gt": have > want, "gte": have >= want, "lt": have < want, "lte": have <= want}[op]
        )
    except TypeError:
        return False  # a number compared with a string matches nothing


def _entry(
    root: int, n: int, event: str, when: str, *, old: str | None = None, new: str | None = None
) -> dict:
    return {
        "id": f"{root}-{n}",
        "memory_id": str(root),
        "old_memory": old,
        "new_memory": new,
        "event": event,
        "created_at": when,
        "updated_at": when,
        "is_deleted": event == "DELETE",
    }


def _deleted_history(chain: list[DeletedClaim]) -> list[dict]:
    """ADD, UPDATE per correction, then DELETE, of a deleted memory: its id and times."""
    root = chain[0].id
    out = [_entry(root, 0, "ADD", chain[0].said_at.isoformat())]
    out += [_entry(root, n, "UPDATE", c.created_at.isoformat()) for n, c in enumerate(chain[1:], 1)]
    out.append(_entry(root, len(chain), "DELETE", chain[-1].deleted_at.isoformat()))
    return out
