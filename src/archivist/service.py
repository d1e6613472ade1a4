"""MemoryService: the one core every front end (Python API, CLI, later servers) calls.

It wires a Store, an Embedder and the retrieval presets together; it holds no
SQL and no provider names of its own.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from .config import Settings
from .embed.base import Embedder
from .errors import (
    ConfigError,
    EmbeddingError,
    EmbeddingMismatch,
    InputError,
    NotFound,
    StaleExtraction,
)
from .llm.accounting import Accounting
from .llm.base import ChatModel
from .llm.structured import run_parallel
from .model import (
    Claim,
    Conversation,
    Hit,
    Job,
    Message,
    content_hash,
)
from .read.route import Recall, Route
from .read.search import VECTOR_RANKERS, SearchConfig, SearchTrace, get_preset, search
from .service_views import MemoryViews
from .store.base import AddResult, IndexedClaim, IndexedEpisode, IndexedMessage, Store
from .store.sql import Filters
from .write.archivist import Archivist, HeuristicArchivist, SessionResult
from .write.extract_plan import ExtractReport, SessionPlan, plan_session, waits
from .write.index_text import (
    DEFAULT_INDEX,
    IndexOptions,
    claim_embed_text,
    claim_search_text,
    episode_embed_text,
    episode_search_text,
    index_rows,
    text_hash,
)
from .write.pending import embed_pending

Progress = Callable[[int], None]


class StoreResponseCache:
    """The store's llm_cache table as an llm.cache.ResponseCache."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def get(self, key: str) -> str | None:
        return self.store.llm_cache_get(key)

    def put(self, key: str, task: str, model: str, value: str) -> None:
        self.store.llm_cache_put(key, task, model, value)


def _continue_numbering(conv: Conversation, stored: Sequence[Message]) -> Conversation:
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


def _by_session(messages: Sequence[Message]) -> dict[int, list[Message]]:
    out: dict[int, list[Message]] = {}
    for m in sorted(messages, key=lambda m: m.seq):
        out.setdefault(m.session, []).append(m)
    return out


def open_store(settings: Settings) -> Store:
    """The configured backend: a SQLite file (default) or a PostgreSQL schema."""
    if settings.store == "postgres":
        try:
            from .store.postgres import PostgresStore
        except ImportError as e:  # psycopg is optional
            raise ConfigError(
                "store 'postgres' needs psycopg: pip install 'archivist[postgres]'"
            ) from e
        return PostgresStore(settings.pg_dsn, schema=settings.pg_schema)
    from .store.sqlite import SQLiteStore

    return SQLiteStore(settings.resolved_db_path())


class MemoryService(MemoryViews):
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
    ) -> None:
        self.settings = settings or Settings()
        if path is not None:
            self.settings = self.settings.with_(db_path=Path(path))
        if store is None:
            store = open_store(self.settings)
        self.store = store
        self._embedder = embedder
        self.index_options = index_options
        self._people: list[str] | None = None
        self._archivist: Archivist | None = archivist
        self._llm = llm
        self.llm_ledger = Accounting()
        self._llm_limiter = threading.BoundedSemaphore(self.settings.llm_concurrency)
        from .jobs import JobRunner

        self.jobs = JobRunner(self)

    # -- lifecycle ------------------------------------------------------------------

    @property
    def embedder(self) -> Embedder:
        """The configured embedder, created on first use (the local model loads lazily)."""
        if self._embedder is None:
            from .embed import get_embedder

            self._embedder = get_embedder(self.settings)
        return self._embedder

    def close(self) -> None:
        self.jobs.stop()
        self.store.close()

    def __enter__(self) -> MemoryService:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- writes ---------------------------------------------------------------------

    def add(
        self,
        data: Conversation | Iterable[Conversation] | str | Path,
        *,
        format: str | None = None,
        progress: Progress | None = None,
        extract: bool = True,
        embed: bool = True,
    ) -> list[AddResult]:
        """Store conversations (objects, or a file path to load); only new messages are written.

        Each conversation is one transaction: an interrupted run leaves whole
        conversations or nothing, and re-running it completes the rest.
        ``embed=False`` stores messages without vectors (keyword search finds
        them at once); the next ``extract`` of their conversation embeds them.
        """
        if isinstance(data, (str, Path)):
            from .load import load_file

            convs: list[Conversation] = load_file(data, format)
        elif isinstance(data, Conversation):
            convs = [data]
        else:
            convs = list(data)
            if not all(isinstance(c, Conversation) for c in convs):
                raise InputError("add() takes Conversation objects or a file path")
        self._check_embed_model(self.embedder)
        results = [self._add_one(c, progress, embed) for c in convs]
        self._people = None
        if written := [r.conversation for r in results if r.added]:
            self.store.ensure_identities(written)  # new speakers are persons at once
        if extract:
            self.extract([c.id for c in convs])
            self.schedule_consolidation([c.id for c in convs])
        return results

    def _add_one(self, conv: Conversation, progress: Progress | None, embed: bool) -> AddResult:
        if not conv.id:
            raise InputError("a conversation needs an id")
        existing = self.store.existing_hashes(conv.id)
        fresh = [m for m in conv.messages if existing.get(m.id) != m.hash]
        if not fresh:
            if progress:
                progress(len(conv.messages))
            return AddResult(conversation=conv.id, unchanged=len(conv.messages))
        context = list(conv.messages)
        if existing:  # earlier turns stored before: they are this batch's context
            stored = [m for _, m in self.store.conversation_messages(conv.id)]
            conv = _continue_numbering(conv, stored)
            batch_ids = {m.id for m in conv.messages}
            context = [m for m in stored if m.id not in batch_ids] + list(conv.messages)
            fresh = [m for m in conv.messages if existing.get(m.id) != m.hash]
        texts = dict(
            zip((m.id for m in context), index_rows(context, self.index_options), strict=True)
        )
        rows = [IndexedMessage(m, texts[m.id][0], text_hash(texts[m.id][1])) for m in conv.messages]
        fresh_ids = {m.id for m in fresh}
        wanted = {r.embed_hash: texts[r.message.id][1] for r in rows if r.message.id in fresh_ids}
        if embed:
            vectors, embedded = self._embed_missing(wanted, progress)
        else:  # vectors later (write/pending.py); reuse what is already computed
            vectors, embedded = self.store.cached_vectors(self.embedder.name, wanted), 0
        result = self.store.add_conversation(conv, rows, self.embedder.name, vectors)
        if progress:
            progress(len(conv.messages) - embedded)
        return result

    def _embed_missing(
        self, texts: dict[str, str], progress: Progress | None
    ) -> tuple[dict[str, np.ndarray], int]:
        """Vectors for text hashes, reusing the store's cache; only misses hit the model."""
        model = self.embedder.name
        have = self.store.cached_vectors(model, texts)
        todo = [(h, t) for h, t in texts.items() if h not in have]
        out = dict(have)
        step = 512  # the embedder sorts each call by length, so bigger calls pad less
        for i in range(0, len(todo), step):
            chunk = todo[i : i + step]
            vecs = self.embedder.embed_batch([t for _, t in chunk])
            if vecs.shape[0] != len(chunk):
                raise EmbeddingError(
                    f"{model} returned {vecs.shape[0]} vectors for {len(chunk)} texts"
                )
            out.update(zip((h for h, _ in chunk), vecs, strict=True))
            if progress:
                progress(len(chunk))
        return out, len(todo)

    # -- the archivist: episodes and claims -------------------------------------------

    @property
    def llm(self) -> ChatModel | None:
        """The configured chat model, or None (heuristic mode)."""
        if self._llm is None and self.settings.llm not in ("", "none"):
            from .llm import get_chat_model

            self._llm = get_chat_model(self.settings)
        return self._llm

    @property
    def archivist(self) -> Archivist:
        """The configured archivist: the LLM one when a model is configured, else heuristic."""
        if self._archivist is None:
            if self.llm is not None:
                from .write.llm_archivist import LLMArchivist  # pydantic only when used

                self._archivist = LLMArchivist(
                    self.llm,
                    cache=StoreResponseCache(self.store),
                    ledger=self.llm_ledger,
                    concurrency=self.settings.llm_concurrency,
                )
            else:
                self._archivist = HeuristicArchivist()
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
        report = ExtractReport(method=self.archivist.name)
        hold = hold_short_tails and self.llm is not None
        now = datetime.now(UTC)
        ids = (
            list(conversations)
            if conversations is not None
            else [c["id"] for c in self.store.conversations()]
        )
        todo: list[SessionPlan] = []
        for cid in ids:
            marks = self.store.extraction_marks(cid)
            msgs = [m for _, m in self.store.conversation_messages(cid)]
            embed_pending(self, cid, msgs)  # messages stored with embed=False: vectors first
            people = sorted({m.speaker for m in msgs} | {a for m in msgs for a in m.addressees})
            for session, group in _by_session(msgs).items():
                plan = plan_session(
                    cid, session, group, people, marks.get(session), self.archivist.name
                )
                if plan is None:
                    report.sessions_skipped += 1
                elif hold and waits(
                    plan, self.settings.extract_min_tail, self.settings.extract_idle_s, now
                ):
                    report.sessions_waiting += 1
                else:
                    todo.append(plan)
        # Sessions run in parallel batches (LLM calls overlap within the concurrency
        # limit); each finished session is saved in order by this thread alone.
        before = self.llm_ledger.summary()
        try:
            self._extract_sessions(todo, report, progress)
        finally:  # what was spent is recorded even when the run is interrupted
            self._persist_llm_usage(before)
        return report

    def _persist_llm_usage(self, before: dict[str, dict]) -> None:
        if self.llm is None:
            return
        delta = {
            task: {k: v - before.get(task, {}).get(k, 0) for k, v in row.items()}
            for task, row in self.llm_ledger.summary().items()
        }
        delta = {t: row for t, row in delta.items() if any(row.values())}
        if delta:
            self.store.add_llm_usage(self.llm.name, delta)

    def _extract_sessions(
        self, todo: list[SessionPlan], report: ExtractReport, progress: Progress | None
    ) -> None:
        width = getattr(self.archivist, "concurrency", 1)
        for i in range(0, len(todo), max(1, width * 2)):
            batch = todo[i : i + max(1, width * 2)]
            results = run_parallel(
                lambda p: self.archivist.process_session(
                    p.messages, p.participants, context=p.context
                ),
                batch,
                max(1, width),
            )
            for plan, result in zip(batch, results, strict=True):
                if isinstance(result, Exception):
                    raise result
                try:
                    self._save_session(plan, result)
                except StaleExtraction:  # another process appended first; it is up to date
                    report.sessions_skipped += 1
                    continue
                report.add(result, plan)
                if progress:
                    progress(len(plan.messages))

    def _save_session(self, plan: SessionPlan, result: SessionResult) -> None:
        rows = [
            IndexedClaim(c, ep, claim_search_text(c), text_hash(claim_embed_text(c)))
            for ep, c in result.claims
        ]
        episodes = [
            IndexedEpisode(e, episode_search_text(e), text_hash(episode_embed_text(e)))
            for e in result.episodes
        ]
        wanted = {r.embed_hash: claim_embed_text(r.claim) for r in rows}
        wanted |= {e.embed_hash: episode_embed_text(e.episode) for e in episodes}
        vectors, _ = self._embed_missing(wanted, None)
        self.store.save_extraction(
            plan.conversation,
            plan.session,
            episodes,
            rows,
            self.embedder.name,
            vectors,
            n_messages=plan.n_messages,
            method=result.method,
            rejected=result.rejected,
            last_message=plan.last_message,
            append_after=plan.append_after,
        )

    def rebuild(self, conversations: Sequence[str] | None = None) -> ExtractReport:
        """Forget derived memory and re-derive it from the message log."""
        for cid in conversations or [None]:
            self.store.clear_derived(cid)
        return self.extract(conversations)

    def delete(self, *, conversation: str | None = None, person: str | None = None) -> int:
        """Remove a conversation or everything a person sent or received, from every index."""
        if (conversation is None) == (person is None):
            raise InputError("delete() takes exactly one of conversation= or person=")
        n = (
            self.store.delete_conversation(conversation)
            if conversation is not None
            else self.store.delete_person(person)  # type: ignore[arg-type]
        )
        self.store.ensure_identities()  # identities whose speaker is gone go too
        self._people = None
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
        messages, and nothing else (a job handler's way: it runs inside the runner)."""
        due: dict[str, int] = {}
        for cid in dict.fromkeys(conversations):
            n = len(self.store.existing_hashes(cid))  # this conversation only, not the store
            mark = int(self.store.meta(f"consolidated:{cid}") or 0)
            if n - mark >= self.settings.consolidate_every:
                due[cid] = n
                self.store.set_meta(f"consolidated:{cid}", str(n))
        if due:
            # The round's name covers which conversations at which size: a later round of
            # other conversations must not collide with it (its global jobs would be lost).
            tag = content_hash(*(f"{c}:{n}" for c, n in sorted(due.items())))[:16]
            self.jobs.enqueue_round(list(due), f"m{tag}")
        return bool(due)

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
        from .llm.structured import call_structured

        if self.llm is None:
            raise InputError(f"{prompt.NAME} needs an LLM and none is configured")
        before = self.llm_ledger.summary()
        try:
            return call_structured(
                self.llm,
                task=prompt.NAME,
                version=prompt.VERSION,
                messages=messages,
                output_type=output_type,
                cache=StoreResponseCache(self.store),
                ledger=self.llm_ledger,
                limiter=self._llm_limiter,
                max_attempts=max_attempts,
                backoff=backoff,
            )
        finally:
            self._persist_llm_usage(before)

    # -- recall: routing, time, re-ranking (issue 5) -----------------------------------

    def route(self, question: str, *, at: datetime | None = None) -> Route:
        """Who, which conversation and which period ``question`` is about, as of ``at``."""
        from .read.route import route

        now = at or datetime.now(UTC)
        found = route(question, self.people(), self.conversations(), now)
        if found.intent is None:  # "before the wedding": date the event within the route
            found = route(
                question, self.people(), self.conversations(), now, self._locator(found.filters())
            )
        return found

    def _locator(self, filters: Filters) -> Callable[[str], datetime | None]:
        """Find when an event was talked about ("the wedding"): its best keyword match's time."""

        def locate(event: str) -> datetime | None:
            found = self.store.keyword_search(event, filters, 1)
            msgs = self.store.messages_by_rowid(r for r, _ in found)
            return next((m.timestamp for m in msgs.values()), None)

        return locate

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
        from .read.route import Recall

        at = at or datetime.now(UTC)
        trace = SearchTrace()
        args = dict(person=person, conversation=conversation, at=at, k=k, preset=preset)
        hits = self.search(question, route=True, trace=trace, **args)
        result = Recall(hits=hits, route=trace.route, queries=(question,))
        if self.llm is None or rewrite is False:
            return result
        return self._rewrite(question, result, args)

    def _rewrite(self, question: str, first: Recall, args: dict) -> Recall:
        """The sufficiency check and up to 3 rewritten queries, fused with the first by RRF."""
        from .llm.base import LLMError
        from .prompts import rewrite as prompt
        from .read.fusion import rrf

        found = [f"{h.message.speaker}: {h.message.text}" for h in first.hits]
        try:
            messages = prompt.build(question, found, args["at"])
            out = self.llm_call(prompt, messages, prompt.RewriteOut)
        except LLMError:
            return first
        queries = [q.strip() for q in out.queries if q.strip()][: prompt.MAX_QUERIES]
        if out.sufficient or not queries:
            return replace(first, sufficient=True if out.sufficient else None)
        runs = {question: first.hits}
        for q in queries:
            runs[q] = self.search(q, route=True, **args)
        key = lambda h: (h.message.conversation, h.message.id)  # noqa: E731
        by_key = {key(h): h for hits in runs.values() for h in hits}
        fused = rrf({q: [key(h) for h in hits] for q, hits in runs.items()}, k=20)
        top = sorted(fused.items(), key=lambda kv: -kv[1])[: args["k"]]
        hits = [replace(by_key[c], score=s) for c, s in top]
        return replace(first, hits=hits, queries=(question, *queries), sufficient=False)

    # -- selection and context assembly (issue 5) ----------------------------------------

    def select(
        self,
        person: str,
        view="all_involving",
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
            self,
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
    ):
        """Memory context for an assistant turn within ``budget_tokens`` (read.context).

        Returns a Context: its text and the items shown; pass
        ``ctx.records()`` and the reply to ``record_context`` afterwards.
        """
        from .read.context import assemble_context

        return assemble_context(
            self,
            question_or_turn,
            person=person,
            conversation=conversation,
            budget_tokens=budget_tokens,
            previous=previous,
            at=at,
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
        named person abstains and says whose it was. Returns a read.answer.Answer.
        """
        from .read.answer import answer_question

        if not isinstance(question, str) or not question.strip():
            raise InputError("ask() needs a non-empty question")
        return answer_question(self, question, person=person, conversation=conversation, at=at, k=k)

    # -- reads ----------------------------------------------------------------------

    def people(self) -> list[str]:
        if self._people is None:
            self._people = [p for p, _ in self.store.people()]
        return self._people

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
        if not isinstance(query, str) or not query.strip():
            raise InputError("search query must be a non-empty string")
        if not isinstance(k, int) or not 1 <= k <= 1000:
            raise InputError(f"k must be an integer between 1 and 1000; got {k!r}")
        for name, when in (("since", since), ("until", until), ("at", at)):
            if when is not None and when.tzinfo is None:
                raise InputError(f"{name} must be timezone-aware")
        config = (
            preset
            if isinstance(preset, SearchConfig)
            else get_preset(preset or self.settings.search_preset)
        )
        conv = (
            conversation
            if conversation is None or isinstance(conversation, str)
            else tuple(conversation)
        )
        filters = Filters(conv, person, speaker, session, since, until)
        trace = trace if trace is not None else SearchTrace()
        intent = None
        if route:
            trace.route = self.route(query, at=at)
            intent = trace.route.intent
            if conv is None and person is None:
                filters = trace.route.filters(filters)
        embedder = self.embedder if VECTOR_RANKERS & set(config.rankers) else None
        if embedder is not None:
            self._check_embed_model(embedder)
        return search(
            self.store,
            embedder,
            query,
            filters,
            k,
            config,
            self.people(),
            trace,
            intent=intent,
            at=at,
        )

    def _check_embed_model(self, embedder: Embedder) -> None:
        """Refuse to query one model's index with another model's vectors."""
        stored = self.store.embed_model()
        if stored is not None and stored != embedder.name:
            raise EmbeddingMismatch(
                f"this store's vectors were made by {stored!r} but the embedder is "
                f"{embedder.name!r}; use the same embedder or a new store"
            )

    def get(self, conversation: str, message_id: str) -> Message:
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

        return export_lines(self, conversation)

    def import_jsonl(self, lines: Iterable[str] | str, source: str = "import") -> dict:
        """Store an export (all messages or none), declare its identities, re-derive the rest."""
        from .transfer import import_lines

        return import_lines(self, lines, source)

    def conversations(self) -> list[dict]:
        return self.store.conversations()

    def stats(self) -> dict:
        return self.store.stats()


Memory = MemoryService
