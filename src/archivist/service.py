"""MemoryService: the one entry every front end (Python API, CLI, servers) calls.

It composes the layers under it and holds no logic of its own beyond checking
arguments: a Core (core.py: store, settings, clock, models, LLM accounting) is
built once and handed down to the read path (read/), the write path (write/),
the job queue (jobs.py) and export/import (transfer.py); none of them knows
this class. It holds no SQL and no provider names.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime
from pathlib import Path
from typing import Annotated, overload

from .args import UNCHECKED, EpochSeconds
from .clock import Clock, system_clock
from .config import Settings
from .core import Core, Progress
from .embed.base import Embedder
from .errors import InputError, NotFound
from .jobs import JobRunner
from .judge import Judge
from .lang.text import person_key
from .llm.accounting import Accounting
from .llm.base import ChatModel
from .model import (
    MAX_SESSION,
    Claim,
    Conversation,
    Hit,
    Job,
    Message,
    checked_text,
    message_problem,
    metadata_problem,
)
from .read.recall import recall as routed_recall
from .read.recall import route_question, search_memory
from .read.route import Recall, Route
from .read.search import SearchConfig, SearchTrace
from .service_edits import MemoryEdits, MemoryId
from .service_views import MemoryViews
from .store.audit import check_actor
from .store.base import AddResult, Store
from .store.registry import open_store
from .store.sql import Filters
from .write.archivist import Archivist
from .write.extract import default_archivist
from .write.extract import extract as extract_sessions
from .write.extract_plan import ExtractReport
from .write.index_text import DEFAULT_INDEX, IndexOptions
from .write.ingest import add_conversation

__all__ = ["ExtractReport", "Memory", "MemoryService", "Progress", "open_store"]


class MemoryService(MemoryViews, MemoryEdits):
    """Long-term memory over a message log: add conversations, search them, delete them."""

    def __init__(
        self,
        path: str | Path | None = None,
        *,
        settings: Settings | None = None,
        store: Store | None = None,
        embedder: Embedder | None = None,
        index_options: IndexOptions = DEFAULT_INDEX,
        archivist: Archivist | None = None,
        llm: ChatModel | None = None,
        clock: Clock = system_clock,
        judge: Judge | None = None,
    ) -> None:
        settings = settings or Settings()
        if path is not None:
            settings = settings.with_(db_path=Path(path))
        self.core = Core.open(
            settings, store, clock=clock, given_embedder=embedder, given_llm=llm, given_judge=judge
        )
        self.index_options = index_options
        self._archivist: Archivist | None = archivist
        self._declared: set[tuple[str, str]] = set()  # (conversation, name) declared by add
        self.jobs = JobRunner(self.core, handlers={"extract": self._run_extract})

    @property
    def settings(self) -> Settings:
        return self.core.settings

    @property
    def store(self) -> Store:
        return self.core.store

    @property
    def llm_ledger(self) -> Accounting:
        """LLM calls, tokens and time per task in this process."""
        return self.core.ledger

    # -- lifecycle ------------------------------------------------------------------

    @property
    def embedder(self) -> Embedder:
        """The configured embedder, created on first use (the local model loads lazily)."""
        return self.core.embedder

    def close(self) -> None:
        self.jobs.close()  # stops the job thread, then closes the store (never under it)

    def __enter__(self) -> MemoryService:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- writes ---------------------------------------------------------------------

    def add(
        self,
        data: Conversation | Iterable[Conversation] | str | Path | dict | list[dict | str],
        *,
        format: str | None = None,
        progress: Progress | None = None,
        extract: bool = True,
        embed: bool = True,
        user_id: str | None = None,
        agent_id: str | None = None,
        conversation: str | None = None,
        timestamp: datetime | str | EpochSeconds | None = None,
        metadata: dict | None = None,
        identities: bool = True,
    ) -> list[AddResult]:
        """Store conversations (objects, or a file path to load) or mem0-style turns; only
        new messages are written.

        mem0-style: a string (one user message), a ``{"role", "content"}`` dict or
        a list of them, for ``user_id`` (the user's name as speaker) and/or
        ``agent_id`` (the assistant's; default "assistant"). They are appended to
        ``conversation`` (default ``user:<user_id>``, else ``agent:<agent_id>``)
        with ids ``m<n>`` continuing it, at ``timestamp`` (default: the clock);
        each call stores its turns again, since saying something twice is two
        messages. ``metadata`` (a JSON object) is stored with each of the turns; the
        memories drawn from them carry it (``archivist.mem0``).

        A ``Path`` is always a file. A ``str`` with any mem0 keyword is a message;
        without one it must name an existing file (else InputError saying to pass
        ``user_id``): a sentence is never read as a path, nor a mistyped path
        stored as a message.

        All or nothing as far as validation goes: every message is checked
        against the store's bounds (model.message_problem) and every
        conversation against what is stored (the same id with other content is
        refused) before any is written. Each conversation is then its own
        transaction, not one across conversations: an interrupted run leaves
        whole conversations or nothing, and re-running it completes the rest.
        ``embed=False`` stores messages without vectors (keyword search finds
        them at once); the next ``extract`` of their conversation embeds them.
        ``identities=False`` leaves giving new speakers an identity to the caller
        (``ensure_speakers``), as the proxy does after it answers.
        """
        mem0 = {"user_id": user_id, "agent_id": agent_id, "conversation": conversation}
        turns = any(v is not None for v in (*mem0.values(), timestamp, metadata)) or _turns(data)
        if turns:
            data = self._turns_conversation(data, timestamp, metadata, **mem0)
        if isinstance(data, str) and not _names_file(data):
            shown = data if len(data) <= 60 else data[:57] + "..."
            raise InputError(
                f"no file {shown!r}; to store it as a message pass user_id=, agent_id= "
                "or conversation="
            )
        if isinstance(data, (str, Path)):
            from .load import load_file

            convs: list[Conversation] = load_file(data, format, now=self.core.clock())
        elif isinstance(data, Conversation):
            convs = [data]
        else:
            convs = list(data)
            if not all(isinstance(c, Conversation) for c in convs):
                raise InputError("add() takes Conversation objects or a file path")
        stored = self.check_new(convs)
        self.core.check_embed_model(self.embedder)
        results = [
            add_conversation(
                self.core,
                c,
                index=self.index_options,
                progress=progress,
                embed=embed,
                existing=stored.pop(c.id, None),  # read once; again if the batch repeats it
            )
            for c in convs
        ]
        self.core.forget_people()
        if written := [r.conversation for r in results if r.added]:
            if identities:  # new speakers are persons at once
                self.ensure_speakers([c for c in convs if c.id in written])
            if turns:  # a user_id (an agent_id) is one person in every conversation
                self._declare_turn_speakers(convs[0], user_id, agent_id)
        if extract:
            self.extract([c.id for c in convs])
            self.schedule_consolidation([c.id for c in convs])
        return results

    def ensure_speakers(self, convs: Sequence[Conversation]) -> None:
        """Give each speaker of these stored conversations' messages an identity in its
        conversation, where one has none yet (``add`` does, unless told the caller
        will: the proxy, after its answer). A chat's later turns mostly bring no one
        new: one read each, not the write transaction that creates identities."""
        todo = list(dict.fromkeys(c.id for c in convs))
        if self._speakers_unknown(convs, todo):
            self.store.ensure_identities(todo)

    def _speakers_unknown(self, convs: Sequence[Conversation], written: list[str]) -> bool:
        """Whether a speaker of what was just written has no identity in its conversation
        yet."""
        todo = set(written)
        for c in convs:
            if c.id in todo:
                todo.discard(c.id)
                keys = {person_key(m.speaker) for m in c.messages if m.role != "system"}
                if not keys <= {person_key(n) for n in self.store.identity_names(c.id)}:
                    return True
        return False

    def ensure_declared(self, user_id: str, conversation: str, name: str) -> None:
        """``declare_identity``, once per process for each (conversation, name) unless a
        deletion since may have undone it: what a chat front end calls on every turn."""
        if (conversation, name) not in self._declared:
            from .write.people import record_declaration

            record_declaration(self.store, user_id, conversation, name)
            self._declared.add((conversation, name))

    def _declare_turn_speakers(
        self, conv: Conversation, user_id: str | None, agent_id: str | None
    ) -> None:
        said = {m.speaker for m in conv.messages}
        for name in (user_id, agent_id):
            if name and name in said:
                self.ensure_declared(name, conv.id, name)

    def _turns_conversation(self, data, timestamp, metadata, **ids) -> Conversation:
        """mem0-style turns as the next messages of their conversation (write/turns.py)."""
        from .write.turns import (
            default_conversation,
            read_timestamp,
            read_turns,
            turns_conversation,
        )

        if metadata is not None and (problem := metadata_problem(metadata)):
            raise InputError(f"metadata {problem}")
        for name, value in ids.items():
            if value is not None and (not isinstance(value, str) or not value.strip()):
                raise InputError(f"{name} must be a non-empty string; got {value!r}")
        turns = read_turns(data)
        cid = ids["conversation"] or default_conversation(ids["user_id"], ids["agent_id"])
        stored = [m for _, m in self.store.conversation_messages(cid)]
        at = read_timestamp(timestamp, self.core.clock())
        return turns_conversation(
            turns,
            stored,
            conversation=cid,
            at=at,
            user_id=ids["user_id"],
            agent_id=ids["agent_id"],
            metadata=metadata,
        )

    def check_new(self, convs: Sequence[Conversation]) -> dict[str, dict[str, str]]:
        """Refuse the whole batch (InputError) if any message is out of bounds or would
        rewrite the log; stores nothing. add() calls it; the CLI checks all files first.
        Returns the stored message hashes it read, by conversation."""
        out: dict[str, dict[str, str]] = {}
        for c in convs:
            if not isinstance(c.id, str) or not c.id:
                raise InputError("a conversation needs an id")
            for m in c.messages:
                if found := message_problem(m):
                    raise InputError(
                        f"conversation {c.id!r}, message {m.id!r}, field {found[0]!r}: {found[1]}"
                    )
            stored = out[c.id] = self.store.existing_hashes(c.id)
            changed = [m for m in c.messages if stored.get(m.id, m.hash) != m.hash]
            for m in changed:
                old = self.store.get_message(c.id, m.id)
                if old is None or not m.same_as_stored(stored[m.id], old.timestamp):
                    raise InputError(
                        f"conversation {c.id!r}, message {m.id!r}: already stored with "
                        "different content; the log is append-only (delete the conversation "
                        "to replace it); nothing was stored"
                    )
        return out

    # -- the archivist: episodes and claims -------------------------------------------

    @property
    def llm(self) -> ChatModel | None:
        """The configured chat model, or None (heuristic mode)."""
        return self.core.llm

    @property
    def archivist(self) -> Archivist:
        """The configured archivist: the LLM one when a model is configured, else heuristic."""
        if self._archivist is None:
            self._archivist = default_archivist(self.core)
        return self._archivist

    def extract(
        self,
        conversations: Sequence[str] | None = None,
        progress: Progress | None = None,
        *,
        hold_short_tails: bool = False,
    ) -> ExtractReport:
        """Run the archivist over sessions it has not processed (or that grew since).

        A session that only grew at its end is read from where the last run
        stopped and its new episodes and claims are added (write/extract_plan.py);
        one that changed otherwise is read again whole. Each session's episodes,
        claims and progress marker are written in one transaction, so an
        interrupted run resumes where it stopped. ``hold_short_tails`` (a server's
        live chats, LLM archivist only): see Settings.extract_min_tail.
        """
        return extract_sessions(
            self.core,
            self.archivist,
            conversations,
            progress,
            hold_short_tails=hold_short_tails,
            index=self.index_options,
        )

    def _run_extract(self, core: Core, payload: dict) -> dict:
        """The ``extract`` job handler of this memory's runner: with its archivist."""
        from .write.extract_job import run_extract

        return run_extract(core, payload, archivist=self.archivist, index=self.index_options)

    def rebuild(
        self, conversations: Sequence[str] | None = None, *, actor: str = "python"
    ) -> ExtractReport:
        """Forget derived memory and re-derive it from the message log. Claims come back
        with new ids (an old id answers NotFound); the audit log records the clearing,
        naming ``actor``."""
        check_actor(actor)
        self._known(conversations)
        for cid in conversations or [None]:
            self.store.clear_derived(cid, actor=actor)
        return self.extract(conversations)

    def delete(
        self,
        memory_id: MemoryId | None = None,
        *,
        conversation: str | None = None,
        person: str | None = None,
        received: bool = False,
        actor: str = "python",
    ) -> int:
        """Remove a memory (claim) by id, a conversation, or a person, from every index.

        ``person``: what they said and every claim about them (others' too);
        messages others sent them stay unless ``received``. Returns messages
        removed (claims, for a memory id). An unknown memory id or conversation is
        NotFound (a person is a name: nobody by it, 0 removed). The audit log gets a
        line naming ``actor`` (who asked: "cli", "mcp", "browser", ...) with the
        counts, never the text.
        """
        if sum(x is not None for x in (memory_id, conversation, person)) != 1:
            raise InputError("delete() takes exactly one of a memory id, conversation= or person=")
        check_actor(actor)
        if memory_id is not None:
            return self.forget_claim(memory_id, actor=actor)
        if conversation is not None and self.store.participants(conversation) is None:
            raise NotFound(f"no conversation {conversation!r} is stored")
        n = (
            self.store.delete_conversation(conversation, actor=actor)
            if conversation is not None
            else self.store.delete_person(person, received=received, actor=actor)  # type: ignore[arg-type]
        )
        self.store.ensure_identities()  # identities whose speaker is gone go too
        self.core.forget_people()
        self._declared.clear()  # a forgotten person is declared again
        return n

    # -- consolidation rounds on the durable job queue ---------------------------------

    def schedule_consolidation(self, conversations: Sequence[str]) -> list[Job]:
        """Queue a round for conversations with ``consolidate_every`` new messages; run it
        now (inline), wake the worker (background), or leave it queued (manual)."""
        self.queue_consolidation(conversations)
        mode = self.settings.consolidate_mode
        if mode == "inline":
            return self.jobs.run_pending()
        if mode == "background":
            self.jobs.start()
        return []

    def queue_consolidation(self, conversations: Sequence[str]) -> bool:
        """Queue a round for those of ``conversations`` with ``consolidate_every`` new
        messages, and nothing else (jobs.queue_consolidation)."""
        return self.jobs.queue_consolidation(conversations)

    def consolidate(self, conversation: str | None = None) -> list[Job]:
        """Run a consolidation round now (and anything already queued); returns the jobs run.

        Every job is idempotent: a round with nothing new changes nothing.
        """
        convs = [conversation] if conversation else [c["id"] for c in self.store.conversations()]
        if conversation and conversation not in {c["id"] for c in self.store.conversations()}:
            raise NotFound(f"no conversation {conversation!r}")
        self.jobs.enqueue_round(convs, f"manual-{time.time_ns()}")
        return self.jobs.run_pending()

    def job_counts(self) -> dict[str, int]:
        """Jobs on the durable queue by status (queued, running, done, skipped, failed)."""
        return self.store.job_counts()

    # -- the LLM, for every task (reconciliation, people, consolidation, answers) ------

    def llm_call(
        self,
        prompt,
        messages: list[dict],
        output_type,
        *,
        max_attempts: int = 3,
        backoff: float = 1.0,
    ):
        """One schema-constrained call for a prompt module, cached in the store and counted.

        Raises LLMError when the model fails after repair and retries; callers
        fall back to their heuristic. Usage is persisted to the store at once,
        so background jobs count in ``archivist stats`` too.
        """
        return self.core.llm_call(
            prompt, messages, output_type, max_attempts=max_attempts, backoff=backoff
        )

    # -- recall: routing, time, re-ranking (issue 5) -----------------------------------

    def route(self, question: str, *, at: datetime | None = None) -> Route:
        """Who, which conversation and which period ``question`` is about, as of ``at``."""
        return route_question(self.core, question, at=at)

    def recall(
        self,
        question: str,
        *,
        person: str | None = None,
        conversation: str | Sequence[str] | None = None,
        at: datetime | None = None,
        k: int = 10,
        preset: str | SearchConfig | None = None,
        rewrite: bool | None = None,
    ) -> Recall:
        """Routed, time-aware search as of ``at`` (default now); with an LLM, rewrites if short.

        The LLM (when configured, unless ``rewrite=False``) checks whether the
        hits answer the question and proposes up to 3 queries; their results
        are fused with the first by RRF. A failing LLM leaves the plain result.
        """
        return routed_recall(
            self.core,
            question,
            person=person,
            conversation=conversation,
            at=at,
            k=k,
            preset=preset,
            rewrite=rewrite,
        )

    # -- selection and context assembly (issue 5) ----------------------------------------

    def select(
        self,
        person: str,
        # a read.select.View or its name; checked there (importing View here would load
        # the LLM prompts' pydantic models with the package)
        view: Annotated[object, UNCHECKED] = "all_involving",
        *,
        conversation: str | None = None,
        memorize_to: str | None = None,
        at_most: int | None = None,
        llm: ChatModel | None = None,
    ):
        """The messages ``person``'s memory holds under a view (read.select), criteria and cap.

        ``view``: a ``read.select.View`` or its name (``goldfish`` = no memory).
        Criteria are judged by ``llm`` (default: the configured model), or by
        retrieval without one; the returned Selection says which.
        """
        from .read.select import select

        return select(
            self.core,
            person,
            view,
            conversation=conversation,
            memorize_to=memorize_to,
            at_most=at_most,
            llm=llm if llm is not None else self.llm,
        )

    def context(
        self,
        question_or_turn: str,
        *,
        person: str | None = None,
        conversation: str | None = None,
        budget_tokens: int = 1500,
        previous: Sequence = (),
        at: datetime | None = None,
        request: Sequence[Message] = (),
    ):
        """Memory context for an assistant turn within ``budget_tokens`` (read.context).

        Returns a Context: its text and the items shown; pass
        ``ctx.records()`` and the reply to ``record_context`` afterwards.
        ``request``: the messages the assistant already has in front of it (a chat
        request's history); nothing of theirs is shown again.
        """
        from .read.context import assemble_context

        return assemble_context(
            self.core,
            question_or_turn,
            person=person,
            conversation=conversation,
            budget_tokens=budget_tokens,
            previous=previous,
            at=at,
            request=request,
        )

    # -- answers with provenance (issue 5) -----------------------------------------------

    def ask(
        self,
        question: str,
        *,
        person: str | None = None,
        conversation: str | None = None,
        at: datetime | None = None,
        k: int = 10,
    ):
        """Answer from memory with evidence ids, speaker and confidence, or abstain.

        Uses the configured LLM when there is one (falling back to an extractive
        answer if it fails); a question that pins someone else's action on the
        named person abstains and says whose it was; one that names a past span
        ("in January 2025") is answered as memory stood at its end. Returns a
        read.answer.Answer.
        """
        from .read.answer import answer_from, retrieve
        from .read.extractive import asked_at

        if not isinstance(question, str) or not question.strip():
            raise InputError("ask() needs a non-empty question")
        # "Where did Tom work in January 2025?": memory as it stood at the end of January
        at = asked_at(question, at, self.core.clock())
        ev = retrieve(self.core, question, person=person, conversation=conversation, at=at, k=k)
        return answer_from(self.core, question, ev, at=at)

    # -- reads ----------------------------------------------------------------------

    def people(self) -> list[str]:
        """Everyone who sent or received a stored message."""
        return self.core.people()

    def search(
        self,
        query: str,
        *,
        person: str | None = None,
        conversation: str | Sequence[str] | None = None,
        speaker: str | None = None,
        session: int | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        k: int = 10,
        preset: str | SearchConfig | None = None,
        trace: SearchTrace | None = None,
        at: datetime | None = None,
        route: bool = False,
    ) -> list[Hit]:
        """The k messages that best answer ``query``, with scores and provenance.

        ``at``: search memory as it stood then (nothing said later; claims
        closed by then, such as expired foresights, do not count as current).
        ``route``: find the period the query asks about and, when neither a
        conversation nor a person is given, where to look (read/route.py).
        """
        if session is not None and (
            isinstance(session, bool)
            or not isinstance(session, int)
            or not 0 <= session <= MAX_SESSION
        ):
            raise InputError(f"session must be an integer in 0..{MAX_SESSION}; got {session!r}")
        return search_memory(
            self.core,
            query,
            person=person,
            conversation=conversation,
            speaker=speaker,
            session=session,
            since=since,
            until=until,
            k=k,
            preset=preset,
            trace=trace,
            at=at,
            route=route,
        )

    @overload
    def get(self, memory_id: MemoryId) -> Claim: ...
    @overload
    def get(self, conversation: str, message_id: str) -> Message: ...
    def get(self, conversation: MemoryId, message_id: str | None = None):
        """A memory (claim) by id, or with two arguments a message by conversation and id."""
        if message_id is None:
            return self.memory(conversation)
        checked_text("conversation", conversation, optional=False)  # not an id: a string
        m = self.store.get_message(conversation, message_id)
        if m is None:
            raise NotFound(f"no message {message_id!r} in conversation {conversation!r}")
        return m

    def claims(
        self,
        *,
        person: str | None = None,
        conversation: str | None = None,
        limit: int = 100,
    ) -> list[Claim]:
        """Stored claims (said by or about ``person``), oldest first."""
        return self.store.list_claims(
            Filters(conversation=conversation, person=person), limit=limit
        )

    def llm_summary(self) -> dict:
        """LLM calls, tokens and latency per prompt name in this process."""
        return {
            "model": self.llm.name if self.llm else None,
            "tasks": self.llm_ledger.summary(),
            "totals": self.llm_ledger.totals(),
            "lifetime": self.store.llm_usage(),
        }

    def export_jsonl(self, conversation: str | None = None) -> Iterator[str]:
        """The memory as JSON Lines: messages and declared identities (transfer.py)."""
        from .transfer import export_lines

        self._known([conversation] if conversation is not None else None)
        return export_lines(self.store, conversation)

    def import_jsonl(self, lines: Iterable[str] | str, source: str = "import") -> dict:
        """Store an export (all messages or none), declare its identities, re-derive the rest."""
        from .transfer import import_lines

        return import_lines(self.add, self.declare_identity, lines, source)

    def conversations(self) -> list[dict]:
        return self.store.conversations()

    def _known(self, conversations: Sequence[str] | None) -> None:
        """Refuse a conversation that is not stored, instead of doing nothing quietly."""
        if not conversations:
            return
        stored = {c["id"] for c in self.store.conversations()}
        if missing := [c for c in conversations if c not in stored]:
            raise NotFound(f"no conversation {missing[0]!r} is stored")

    def stats(self) -> dict:
        return self.store.stats()


def _names_file(text: str) -> bool:
    """Whether ``text`` names an existing file; a sentence too long (or too odd) to be a
    file name is not one, rather than an OSError."""
    try:
        return Path(text).is_file()
    except (OSError, ValueError):
        return False


def _turns(data: object) -> bool:
    """Whether ``data`` is mem0-style turns (a dict, or a list holding dicts or strings)."""
    if isinstance(data, dict):
        return True
    return isinstance(data, list) and bool(data) and not isinstance(data[0], Conversation)


Memory = MemoryService
