"""The read path's entry points over a Core: checked, routed search and recall.

``search_memory`` checks a query, resolves its preset and, when asked,
routes it (read/route.py: who, which conversation, which period) before the
rankers run (read/search.py). ``recall`` adds the LLM's sufficiency check and
rewritten queries, fused by RRF. MemoryService.search / route / recall are
these; context assembly, selection and answers call them with the same Core.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import datetime

from ..core import Core
from ..errors import InputError
from ..model import Hit, text_problem
from ..store.base import Store
from ..store.sql import Filters
from .route import Recall, Route
from .route import route as find_route
from .search import VECTOR_RANKERS, SearchConfig, SearchTrace, get_preset, search


def locator(store: Store, filters: Filters) -> Callable[[str], datetime | None]:
    """Find when an event was talked about ("the wedding"): its best keyword match's time."""

    def locate(event: str) -> datetime | None:
        found = store.keyword_search(event, filters, 1)
        msgs = store.messages_by_rowid(r for r, _ in found)
        return next((m.timestamp for m in msgs.values()), None)

    return locate


def route_question(core: Core, question: str, *, at: datetime | None = None) -> Route:
    """Who, which conversation and which period ``question`` is about, as of ``at``."""
    now = at or core.clock()
    people, convs = core.people(), core.store.conversations()
    found = find_route(question, people, convs, now)
    if found.intent is None:  # "before the wedding": date the event within the route
        found = find_route(question, people, convs, now, locator(core.store, found.filters()))
    return found


MAX_K = 1000  # hits one search returns at most


def _checked(query: str, k: int, **times: datetime | None) -> None:
    if not isinstance(query, str) or not query.strip():
        raise InputError("search query must be a non-empty string")
    if problem := text_problem(query):
        raise InputError(f"search query {problem}")
    if not isinstance(k, int) or not 1 <= k <= MAX_K:
        raise InputError(f"k must be an integer between 1 and {MAX_K}; got {k!r}")
    for name, when in times.items():
        if when is not None and when.tzinfo is None:
            raise InputError(f"{name} must be timezone-aware")


def search_memory(
    core: Core,
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
    """The k messages that best answer ``query`` (MemoryService.search documents the rest)."""
    _checked(query, k, since=since, until=until, at=at)
    config = (
        preset
        if isinstance(preset, SearchConfig)
        else get_preset(preset or core.settings.search_preset)
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
        trace.route = route_question(core, query, at=at)
        intent = trace.route.intent
        if conv is None and person is None:
            filters = trace.route.filters(filters)
    embedder = core.embedder if VECTOR_RANKERS & set(config.rankers) else None
    if embedder is not None:
        core.check_embed_model(embedder)
    return search(
        core.store,
        embedder,
        query,
        filters,
        k,
        config,
        core.people(),
        trace,
        intent=intent,
        at=at,
    )


def recall(
    core: Core,
    question: str,
    *,
    person: str | None = None,
    conversation: str | Sequence[str] | None = None,
    at: datetime | None = None,
    k: int = 10,
    preset: str | SearchConfig | None = None,
    rewrite: bool | None = None,
) -> Recall:
    """Routed, time-aware search as of ``at`` (default now); with an LLM, rewrites if short."""
    at = at or core.clock()
    trace = SearchTrace()
    args = dict(person=person, conversation=conversation, at=at, k=k, preset=preset)
    hits = search_memory(core, question, route=True, trace=trace, **args)
    result = Recall(hits=hits, route=trace.route, queries=(question,))
    if core.llm is None or rewrite is False:
        return result
    return _rewrite(core, question, result, args)


def _rewrite(core: Core, question: str, first: Recall, args: dict) -> Recall:
    """The sufficiency check and up to 3 rewritten queries, fused with the first by RRF."""
    from ..llm.base import LLMError
    from ..prompts import rewrite as prompt
    from .fusion import rrf

    found = [f"{h.message.speaker}: {h.message.text}" for h in first.hits]
    try:
        messages = prompt.build(question, found, args["at"])
        out = core.llm_call(prompt, messages, prompt.RewriteOut)
    except LLMError:
        return first
    queries = [q.strip() for q in out.queries if q.strip()][: prompt.MAX_QUERIES]
    if out.sufficient or not queries:
        return replace(first, sufficient=True if out.sufficient else None)
    runs = {question: first.hits}
    for q in queries:
        runs[q] = search_memory(core, q, route=True, **args)
    key = lambda h: (h.message.conversation, h.message.id)  # noqa: E731
    by_key = {key(h): h for hits in runs.values() for h in hits}
    fused = rrf({q: [key(h) for h in hits] for q, hits in runs.items()}, k=20)
    top = sorted(fused.items(), key=lambda kv: -kv[1])[: args["k"]]
    hits = [replace(by_key[c], score=s) for c, s in top]
    return replace(first, hits=hits, queries=(question, *queries), sufficient=False)
