"""The memory browser's changes: log in, correct or forget a claim, forget a message or a
conversation, merge or split people.

Each is a POST from a form carrying the page's token (web.check_token); each
waits for the tenant's queued background work first (as REST deletes do, so
an extraction never races the change) and redirects to the page that shows
the result, with a line saying what was done.
"""

from __future__ import annotations

from typing import Annotated
from urllib.parse import quote

from fastapi import APIRouter, Form, Request
from fastapi.responses import RedirectResponse, Response

from .web import COOKIE, PageRoute, UiTenant, back, check_token, need, render

router = APIRouter(route_class=PageRoute, include_in_schema=False)
Token = Annotated[str, Form()]
Text = Annotated[str, Form()]


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
    request: Request, tenant: UiTenant, claim_id: int, token: Token, text: Text = ""
) -> Response:
    """A correction supersedes the claim and is logged as a conflict of kind ``correction``."""
    check_token(request, token)
    tenant.drain(30.0)
    new = tenant.memory.update(claim_id, need(text, "the corrected text"))
    return back(f"/claims/{new.id}", f"corrected: claim {claim_id} is history now")


@router.post("/claims/{claim_id}/forget")
def forget_claim(request: Request, tenant: UiTenant, claim_id: int, token: Token) -> Response:
    check_token(request, token)
    claim = tenant.memory.store.claims_by_id([claim_id]).get(claim_id)
    tenant.drain(30.0)
    tenant.memory.forget_claim(claim_id)
    where = f"/conversations/{quote(claim.conversation, safe='')}" if claim else "/"
    return back(where, f"forgot claim {claim_id}")


@router.post("/conversations/{conversation}/messages/{message_id}/forget")
def forget_message(
    request: Request, tenant: UiTenant, conversation: str, message_id: str, token: Token
) -> Response:
    """The message leaves every index, and the claims only it supported go with it."""
    check_token(request, token)
    tenant.drain(30.0)
    with tenant.lock(conversation):
        tenant.memory.forget_message(conversation, message_id)
    return back(f"/conversations/{quote(conversation, safe='')}", f"forgot message {message_id}")


@router.post("/conversations/{conversation}/forget")
def forget_conversation(
    request: Request, tenant: UiTenant, conversation: str, token: Token
) -> Response:
    check_token(request, token)
    n = tenant.delete(conversation=conversation)
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


@router.post("/people/{person_id}/split")
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
