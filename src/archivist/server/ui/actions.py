"""The memory browser's changes: log in, correct or forget a claim, forget a message or a
conversation, merge or split people.

Each is a POST from a form carrying the page's token (web.check_token); a forget
first shows a page saying what goes and acts only on its ``confirm=yes``; each
waits for the tenant's queued background work first (as REST deletes do, so
an extraction never races the change) and redirects to the page that shows
the result, with a line saying what was done.
"""

from __future__ import annotations

from typing import Annotated
from urllib.parse import quote

from fastapi import APIRouter, Form, Request
from fastapi import Path as PathParam
from fastapi.responses import RedirectResponse, Response

from ...errors import InputError, NotFound
from ...model import MAX_ID
from .web import COOKIE, PageRoute, UiTenant, back, check_token, need, render

router = APIRouter(route_class=PageRoute, include_in_schema=False)
Token = Annotated[str, Form()]
Text = Annotated[str, Form()]
ClaimId = Annotated[int, PathParam(ge=1, le=MAX_ID)]
ACTOR = {"actor": "browser"}  # who the audit log names for the browser's deletions


@router.post("/login")
def login(request: Request, key: Text = "", next: Annotated[str, Form()] = "/") -> Response:
    """Check the key once, then keep it in an HttpOnly cookie the pages read."""
    registry = request.app.state.registry
    failures = request.app.state.auth_failures
    client = request.client.host if request.client else "unknown"
    failures.check(client)
    who = registry.authenticate(key.strip())
    if who is None:
        failures.failed(client)
        return render(request, "login.html", 401, next=next, failed=1)
    # only a page of this site: "//host" and "/\\host" are other sites to a browser
    target = next if next.startswith("/") and next[1:2] not in ("/", "\\") else "/"
    response = RedirectResponse(target, status_code=303)
    response.set_cookie(
        COOKIE,
        key.strip(),
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )
    return response


@router.post("/claims/{claim_id}/correct")
def correct_claim(
    request: Request,
    tenant: UiTenant,
    claim_id: Annotated[int, PathParam(ge=1, le=MAX_ID)],
    token: Token,
    text: Text = "",
    subject: Text = "",
    kind: Text = "",
    valid_from: Text = "",
    valid_to: Text = "",
) -> Response:
    """A correction supersedes the claim and is logged as a conflict of kind ``correction``;
    the form shows every field as it is, so only what was changed is corrected."""
    check_token(request, token)
    tenant.drain(30.0)
    memory = tenant.memory
    old = memory.memory(claim_id)
    text = need(text, "the corrected text")
    day = lambda when: when.date().isoformat() if when else ""  # noqa: E731
    changed = {
        "text": text if " ".join(text.split()) != old.text else None,
        "subject": subject if subject.strip() and subject.strip() != old.subject else None,
        "kind": kind if kind and kind != old.kind else None,
        "valid_from": valid_from.strip() if valid_from.strip() != day(old.valid_from) else None,
        "valid_to": valid_to.strip() if valid_to.strip() != day(old.valid_to) else None,
    }
    if all(v is None for v in changed.values()):
        return back(f"/claims/{claim_id}", "nothing changed: the claim is as it was")
    new = memory.update(claim_id, **changed)
    return back(f"/claims/{new.id}", f"corrected: claim {claim_id} is history now")


Confirm = Annotated[str, Form()]


def _ask_first(request: Request, what: str, action: str, cancel: str, goes, quote="") -> Response:
    """The page a destructive action shows before it acts: what goes, and a button."""
    return render(
        request, "confirm.html", what=what, action=action, cancel=cancel, goes=goes, quote=quote
    )


def _claim_goes(tenant, claim_id: int) -> tuple:
    """What forgetting a claim removes: the claim and its wordings (its messages stay)."""
    claim = tenant.memory.memory(claim_id)
    chain = len(tenant.memory.history(claim_id))
    goes = [f"claim {claim_id}, about {claim.subject or 'no one'}, with every wording it had"]
    if chain:
        goes.append(f"its history ({chain} event{'s' * (chain != 1)})")
    goes.append("its evidence messages stay; extracting them again does not bring it back")
    return claim, goes


@router.get("/claims/{claim_id}/forget")
def forget_claim_page(request: Request, tenant: UiTenant, claim_id: ClaimId) -> Response:
    claim, goes = _claim_goes(tenant, claim_id)
    here = f"/claims/{claim_id}"
    return _ask_first(request, f"claim {claim_id}", f"{here}/forget", here, goes, claim.text)


@router.post("/claims/{claim_id}/forget")
def forget_claim(
    request: Request, tenant: UiTenant, claim_id: ClaimId, token: Token, confirm: Confirm = ""
) -> Response:
    check_token(request, token)
    if confirm != "yes":
        return forget_claim_page(request, tenant, claim_id)
    claim = tenant.memory.store.claims_by_id([claim_id]).get(claim_id)
    tenant.drain(30.0)
    tenant.memory.forget_claim(claim_id, **ACTOR)
    where = f"/conversations/{quote(claim.conversation, safe='')}" if claim else "/"
    return back(where, f"forgot claim {claim_id}")


@router.post("/memories/add")
def add_memory(
    request: Request,
    tenant: UiTenant,
    token: Token,
    person: Text = "",
    text: Text = "",
    when: Text = "",
) -> Response:
    """A memory added by hand: what ``person`` said (or what is known of them), stored as
    their message in their ``notes:<person>`` conversation and read like any other, so
    it has evidence, a date and a history like the rest."""
    from ...model import parse_at

    check_token(request, token)
    who, said = need(person, "whose memory"), need(text, "what to remember")
    at = parse_at(when.strip() or None) if when.strip() else None
    conversation = f"notes:{who}"
    tenant.drain(30.0)
    with tenant.lock(conversation):
        results = tenant.memory.add(
            [{"role": "user", "content": said}],
            user_id=who,
            conversation=conversation,
            timestamp=at,
        )
    keys = [(r.conversation, mid) for r in results for mid in r.added_ids]
    drawn = sum(len(cs) for cs in tenant.memory.store.claims_for_message_ids(keys).values())
    done = (
        f"added {drawn} memor{'ies' if drawn != 1 else 'y'} for {who}"
        if drawn
        else f"stored what {who} said; no memory was drawn from it"
    )
    return back(f"/memories?person={quote(who)}", done)


MAX_BULK = 500  # memories one bulk forget takes


@router.post("/memories/forget")
def forget_memories(
    request: Request,
    tenant: UiTenant,
    token: Token,
    ids: Annotated[list[int], Form()] = [],  # noqa: B006 - FastAPI reads the default
    confirm: Confirm = "",
    back_to: Annotated[str, Form(alias="back")] = "/memories",
) -> Response:
    """Forget the memories selected on the memories list: first a page naming them, then,
    on ``confirm=yes``, each claim with every wording it had (its messages stay)."""
    check_token(request, token)
    chosen = sorted({i for i in ids if 1 <= i <= MAX_ID})
    target = back_to if back_to.startswith("/memories") else "/memories"
    if not chosen:
        return back(target, "nothing selected")
    if len(chosen) > MAX_BULK:
        raise InputError(f"at most {MAX_BULK} memories at once; {len(chosen)} were selected")
    found = tenant.memory.store.claims_by_id(chosen)
    if confirm != "yes":
        goes = [f"claim {i}: {found[i].text}" for i in chosen if i in found]
        goes.append("with every wording each had; their evidence messages stay")
        what = f"{len(found)} memor{'ies' if len(found) != 1 else 'y'}"
        hidden = [("ids", str(i)) for i in chosen] + [("back", target)]
        return render(
            request,
            "confirm.html",
            what=what,
            action="/memories/forget",
            cancel=target,
            goes=goes,
            quote="",
            hidden=hidden,
        )
    tenant.drain(30.0)
    gone = 0
    for i in chosen:
        try:
            gone += bool(tenant.memory.forget_claim(i, **ACTOR))
        except NotFound:
            continue  # forgotten meanwhile, or a correction of one forgotten just before
    return back(target, f"forgot {gone} memor{'ies' if gone != 1 else 'y'}")


def _message_goes(tenant, conversation: str, message_id: str) -> tuple:
    """What forgetting a message removes, counted before anything goes."""
    message = tenant.memory.get(conversation, message_id)
    found = tenant.memory.store.claims_for_message_ids([(conversation, message_id)])
    claims = found.get((conversation, message_id), [])
    only = [c for c in claims if set(c.evidence) <= {message_id}]
    goes = [
        f"message {message_id} of conversation {conversation}, from every index",
        f"{len(only)} claim{'s' * (len(only) != 1)} that only it supported",
        "its session is extracted again from what remains; summaries and key info of the "
        "conversation are rebuilt",
    ]
    return message, goes


@router.get("/conversations/{conversation:path}/messages/{message_id}/forget")
def forget_message_page(
    request: Request, tenant: UiTenant, conversation: str, message_id: str
) -> Response:
    message, goes = _message_goes(tenant, conversation, message_id)
    here = f"/conversations/{quote(conversation, safe='')}"
    action = f"{here}/messages/{quote(message_id, safe='')}/forget"
    return _ask_first(request, f"message {message_id}", action, here, goes, message.text)


@router.post("/conversations/{conversation:path}/messages/{message_id}/forget")
def forget_message(
    request: Request,
    tenant: UiTenant,
    conversation: str,
    message_id: str,
    token: Token,
    confirm: Confirm = "",
) -> Response:
    """The message leaves every index, and the claims only it supported go with it."""
    check_token(request, token)
    if confirm != "yes":
        return forget_message_page(request, tenant, conversation, message_id)
    tenant.drain(30.0)
    with tenant.lock(conversation):
        tenant.memory.forget_message(conversation, message_id, **ACTOR)
    return back(f"/conversations/{quote(conversation, safe='')}", f"forgot message {message_id}")


def _conversation_goes(tenant, conversation: str) -> list[str]:
    found = {c["id"]: c for c in tenant.memory.conversations()}.get(conversation)
    if found is None:
        raise NotFound(f"no conversation {conversation!r}")
    claims = len(tenant.memory.claims(conversation=conversation, limit=1_000_000))
    n = found.get("messages", 0)
    return [
        f"{n} message{'s' * (n != 1)} of conversation {conversation}",
        f"{claims} claim{'s' * (claims != 1)} drawn from it, with their history and conflicts",
        "its episodes, summaries and scenes; the people in it keep what other "
        "conversations say of them",
    ]


@router.get("/conversations/{conversation:path}/forget")
def forget_conversation_page(request: Request, tenant: UiTenant, conversation: str) -> Response:
    goes = _conversation_goes(tenant, conversation)
    here = f"/conversations/{quote(conversation, safe='')}"
    return _ask_first(request, f"conversation {conversation}", f"{here}/forget", here, goes)


@router.post("/conversations/{conversation:path}/forget")
def forget_conversation(
    request: Request, tenant: UiTenant, conversation: str, token: Token, confirm: Confirm = ""
) -> Response:
    check_token(request, token)
    if confirm != "yes":
        return forget_conversation_page(request, tenant, conversation)
    n = tenant.delete(conversation=conversation, **ACTOR)
    return back("/", f"forgot conversation {conversation} ({n} messages)")


@router.post("/people/merge")
def merge_people(
    request: Request,
    tenant: UiTenant,
    token: Token,
    keep: Text = "",
    drop: Text = "",
    reason: Text = "",
) -> Response:
    """Two persons are one: the user's decision, logged with its reason."""
    check_token(request, token)
    tenant.drain(30.0)
    kept = tenant.memory.merge_people(
        need(keep, "the person to keep"), need(drop, "the person to merge"), reason=reason
    )
    return back(f"/people/{quote(kept.id, safe='')}", f"merged {drop} into {kept.name}")


@router.post("/people/{person_id:path}/split")
def split_person(
    request: Request,
    tenant: UiTenant,
    person_id: str,
    token: Token,
    identity: Text = "",
    reason: Text = "",
) -> Response:
    """One (conversation, name) identity is someone else: it becomes its own person."""
    check_token(request, token)
    conversation, _, name = need(identity, "the identity to split off").partition("/")
    tenant.drain(30.0)
    new = tenant.memory.split_person(person_id, conversation, name, reason=reason)
    return back(f"/people/{quote(new.id, safe='')}", f"split {name} in {conversation} off")
