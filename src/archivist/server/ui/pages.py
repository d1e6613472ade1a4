"""The memory browser's pages: overview, people, conversations, claims, search, ask, context.

Each handler gathers what one page shows from the tenant's MemoryService and
hands it to its template; no page changes memory (actions.py does).
"""

from __future__ import annotations

from typing import Annotated
from urllib.parse import urlencode

from fastapi import APIRouter, Path, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse

from ...errors import NotFound
from ...lang.text import person_key
from ...model import CLAIM_KINDS, MAX_ID, Claim, Person, parse_at
from .web import COOKIE, PageRoute, UiTenant, render

router = APIRouter(route_class=PageRoute, include_in_schema=False)
PAGE = 200  # messages per page of a conversation


@router.get("/login")
def login_form(request: Request, next: str = "/", failed: int = 0) -> HTMLResponse:
    return render(request, "login.html", 401 if failed else 200, next=next, failed=failed)


@router.get("/")
def overview(request: Request, tenant: UiTenant) -> HTMLResponse:
    memory = tenant.memory
    counts = memory.store.identity_message_counts()
    people = [
        (p, sum(counts.get((c, person_key(n)), 0) for c, n in p.identities))
        for p in memory.persons()
    ]
    people.sort(key=lambda pn: (-pn[1], pn[0].name.casefold()))
    status = tenant.status()  # its stats and job counts, read once for the page
    return render(
        request,
        "overview.html",
        people=people,
        conversations=memory.conversations(),
        stats=status["stats"],
        conflicts=list(reversed(memory.conflicts()))[:10],
        jobs=status["jobs"],
        llm=memory.llm_summary(),
        status=status,
    )


def _decisions_of(memory, person: Person) -> list:
    """The identity decisions that name one of the person's (conversation, name) identities."""
    mine = {f"{c}/{n}".casefold() for c, n in person.identities}
    named = lambda d: {x.strip().casefold() for x in f"{d.a} + {d.b}".split(" + ")}  # noqa: E731
    return [d for d in memory.decisions() if named(d) & mine]


@router.get("/people/{person_id:path}")
def person_page(
    request: Request, tenant: UiTenant, person_id: str, at: str | None = None
) -> HTMLResponse:
    memory = tenant.memory
    person = memory.person(person_id)
    when = parse_at(at)
    try:
        profile = memory.profile(person.name, at=when)
    except NotFound:
        profile = None
    now = when or memory.core.clock()
    try:
        timeline = [(c, ev, not c.holds_at(now)) for c, ev in memory.timeline(person.name, at=when)]
    except NotFound:
        timeline = []
    return render(
        request,
        "person.html",
        person=person,
        profile=profile,
        timeline=timeline,
        at=at or "",
        conflicts=memory.conflicts(subject=person.name),
        decisions=_decisions_of(memory, person),
        others=[p for p in memory.persons() if p.id != person.id],
    )


@router.get("/conversations/{conversation:path}")
def conversation_page(
    request: Request,
    tenant: UiTenant,
    conversation: str,
    page: Annotated[int, Query(ge=1)] = 1,
    claim: Annotated[int | None, Query(ge=1, le=MAX_ID)] = None,
) -> HTMLResponse:
    memory = tenant.memory
    if conversation not in {c["id"] for c in memory.conversations()}:
        raise NotFound(f"no conversation {conversation!r}")
    rows = memory.store.conversation_messages(conversation)
    pages = max(1, -(-len(rows) // PAGE))
    marked: Claim | None = None
    if claim is not None:
        marked = _claim(memory, claim)
        if marked.conversation == conversation:  # open the page that holds its evidence
            first = next((i for i, (_, m) in enumerate(rows) if m.id in marked.evidence), 0)
            page = first // PAGE + 1 if "page" not in request.query_params else page
    shown = [m for _, m in rows[(page - 1) * PAGE : page * PAGE]]
    claims = memory.store.claims_for_message_ids((conversation, m.id) for m in shown)
    return render(
        request,
        "conversation.html",
        conversation=conversation,
        messages=[(m, claims.get((conversation, m.id), [])) for m in shown],
        page=page,
        pages=pages,
        total=len(rows),
        marked=marked,
        evidence=set(marked.evidence) if marked else set(),
    )


def _claim(memory, claim_id: int) -> Claim:
    found = memory.store.claims_by_id([claim_id]).get(claim_id)
    if found is None:
        raise NotFound(f"no claim {claim_id}")
    return found


@router.get("/claims/{claim_id}")
def claim_page(
    request: Request, tenant: UiTenant, claim_id: Annotated[int, Path(ge=1, le=MAX_ID)]
) -> HTMLResponse:
    memory = tenant.memory
    claim = _claim(memory, claim_id)
    history = memory.claim_history(claim_id)
    related = {e.other for e in history if e.other is not None}
    if claim.replaced_by is not None:
        related.add(claim.replaced_by)
    conflicts = [
        c
        for c in memory.conflicts(conversation=claim.conversation)
        if claim_id in (c.old_claim, c.new_claim)
    ]
    related |= {c.old_claim for c in conflicts} | {c.new_claim for c in conflicts}
    related.discard(claim_id)
    evidence = [memory.store.get_message(claim.conversation, mid) for mid in claim.evidence]
    return render(
        request,
        "claim.html",
        claim=claim,
        history=history,
        conflicts=conflicts,
        others=memory.store.claims_by_id(sorted(related)),
        evidence=[m for m in evidence if m is not None],
        kinds=CLAIM_KINDS,
    )


MEMORIES_PAGE = 50  # claims per page of the memories list


def _paged(path: str, query: dict[str, str], page: int, total: int, per: int) -> dict:
    """What _pages.html reads for a filtered list: its link (the filters as a query),
    this page and how many there are."""
    return {"link": f"{path}?{urlencode(query)}", "page": page, "pages": max(1, -(-total // per))}


@router.get("/memories")
def memories_page(
    request: Request,
    tenant: UiTenant,
    text: str = "",
    person: str = "",
    conversation: str = "",
    kind: str = "",
    status: str = "",
    page: Annotated[int, Query(ge=1, le=1_000_000)] = 1,
) -> HTMLResponse:
    """Every memory (claim), newest first, filtered by words, person, conversation, kind
    and status, a page at a time; the selected ones can be forgotten together."""
    from ...model import CLAIM_KINDS
    from ...store.sql import Filters

    memory = tenant.memory
    current = {"current": True, "history": False}.get(status)
    claims, total = memory.store.browse_claims(
        Filters(person=person or None, conversation=conversation or None),
        kind=kind if kind in CLAIM_KINDS else None,
        current=current,
        text=text,
        limit=MEMORIES_PAGE,
        offset=(page - 1) * MEMORIES_PAGE,
    )
    query = {"text": text, "person": person, "conversation": conversation}
    query |= {"kind": kind, "status": status}
    paged = _paged("/memories", query, page, total, MEMORIES_PAGE)
    return render(
        request,
        "memories.html",
        claims=claims,
        total=total,
        here=f"{paged['link']}&page={page}",
        **paged,
        people=sorted({p.name for p in memory.persons()}),
        conversations=[c["id"] for c in memory.conversations()],
        kinds=CLAIM_KINDS,
        **query,
    )


CONFLICTS_PAGE = 50


@router.get("/conflicts")
def conflicts_page(
    request: Request,
    tenant: UiTenant,
    subject: str = "",
    kind: str = "",
    page: Annotated[int, Query(ge=1, le=1_000_000)] = 1,
) -> HTMLResponse:
    """Every logged change of state, newest first, across people (filter by whom, kind)."""
    memory = tenant.memory
    found = list(reversed(memory.conflicts(subject=subject or None)))
    kinds = sorted({c.kind for c in found})
    if kind:
        found = [c for c in found if c.kind == kind]
    at = (page - 1) * CONFLICTS_PAGE
    return render(
        request,
        "conflicts.html",
        conflicts=found[at : at + CONFLICTS_PAGE],
        total=len(found),
        **_paged(
            "/conflicts", {"subject": subject, "kind": kind}, page, len(found), CONFLICTS_PAGE
        ),
        people=sorted({p.name for p in memory.persons()}),
        kinds=kinds or ["contradiction", "correction", "evolution"],
        subject=subject,
        kind=kind,
    )


@router.get("/search")
def search_page(
    request: Request, tenant: UiTenant, q: str = "", person: str = "", at: str = ""
) -> HTMLResponse:
    memory = tenant.memory
    hits = []
    names = sorted({p.name for p in memory.persons()})
    if q.strip():
        hits = memory.search(q, person=person or None, at=parse_at(at or None), k=10)
    return render(request, "search.html", q=q, person=person, at=at, hits=hits, people=names)


@router.get("/ask")
def ask_page(
    request: Request, tenant: UiTenant, q: str = "", person: str = "", at: str = ""
) -> HTMLResponse:
    memory = tenant.memory
    answer = None
    if q.strip():
        answer = memory.ask(q, person=person or None, at=parse_at(at or None))
    quotes = [memory.store.get_message(c, m) for c, m in (answer.evidence if answer else ())]
    return render(
        request,
        "ask.html",
        q=q,
        person=person,
        at=at,
        answer=answer,
        quotes=[m for m in quotes if m is not None],
        people=sorted({p.name for p in memory.persons()}),
    )


@router.get("/contexts")
def contexts_page(
    request: Request,
    tenant: UiTenant,
    conversation: str = "",
    page: Annotated[int, Query(ge=1)] = 1,
) -> HTMLResponse:
    """What the assistant saw: the context injected before each proxied turn."""
    memory = tenant.memory
    logs = memory.store.context_logs(conversation or None, limit=20, offset=(page - 1) * 20)
    for log in logs:  # the turn that asked, read from the log: a forgotten one is gone
        turn = log["turn_id"] and log["conversation"]
        found = memory.store.get_message(log["conversation"], log["turn_id"]) if turn else None
        log["turn"] = found
    useful: dict[tuple[str, str], float] = {}
    for kind in {x[0] for log in logs for x in log["items"]}:
        ids = {x[1] for log in logs for x in log["items"] if x[0] == kind}
        useful |= {(kind, str(i)): s for i, s in memory.usefulness(kind, ids).items()}
    return render(
        request,
        "contexts.html",
        logs=logs,
        useful=useful,
        conversation=conversation,
        page=page,
    )


@router.get("/logout")
def logout_redirect() -> RedirectResponse:
    response = RedirectResponse("/login", status_code=303)
    response.delete_cookie(COOKIE)
    return response
