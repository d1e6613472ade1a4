"""A real server over real HTTP, attacked the ways a web page or a neighbour can: cross-site
writes on every state-changing route, DNS rebinding, oversized and chunked bodies, markup
in what memory holds, one tenant reaching for another's memory (SECURITY.md)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

pytest.importorskip("fastapi")
uvicorn = pytest.importorskip("uvicorn")

from archivist.bench.load import FakeUpstream  # noqa: E402
from archivist.config import Settings  # noqa: E402
from archivist.load import parse  # noqa: E402
from archivist.server import proxy  # noqa: E402
from archivist.server.app import ServerSettings, create_app  # noqa: E402
from archivist.service import MemoryService  # noqa: E402
from archivist.testing import FakeEmbedder  # noqa: E402
from conftest import ana_lee, jsonl_records  # noqa: E402

httpx = proxy.httpx
EVIL = "https://evil.example"
KEYS = (("key-alpha-000001", "alpha"), ("key-beta-0000002", "beta"))
ALPHA = {"Authorization": "Bearer key-alpha-000001"}
BETA = {"Authorization": "Bearer key-beta-0000002"}
PLANT = '{"model":"x","user":"Tom","messages":[{"role":"user","content":"My new PIN is 0000."}]}'
MARKUP = "<script>alert(1)</script><img src=x onerror=alert(2)>"


def fake_memory(tenant: str, path: Path) -> MemoryService:
    return MemoryService(
        path, embedder=FakeEmbedder(), settings=Settings(consolidate_mode="inline")
    )


@contextmanager
def serving(app) -> Iterator[str]:
    """``app`` on a real socket (uvicorn on 127.0.0.1, a free port); yields its base URL."""
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="error"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    for _ in range(500):
        if server.started:
            break
        time.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)


def open_app(tmp_path: Path, **kw):
    """What ``archivist serve --open`` builds, with a fake upstream and a fake embedder."""
    settings = ServerSettings(
        data_dir=tmp_path,
        open_access=True,
        upstream_base_url="http://upstream/v1",
        extract_delay=0,
        background="thread",
        **kw,
    )
    transport = httpx.ASGITransport(app=FakeUpstream().app)
    return create_app(settings, memory_factory=fake_memory, upstream_transport=transport)


@pytest.fixture
def site(tmp_path: Path):
    """An open server holding one conversation, and an HTTP client for it."""
    app = open_app(tmp_path)
    memory = app.state.registry.tenant("default").memory
    memory.add([ana_lee()])
    with serving(app) as url, httpx.Client(base_url=url, timeout=30) as http:
        yield app, http
    app.state.registry.close()


def counts(app, tenant: str = "default") -> tuple[int, int]:
    """Messages and claims stored: what an attack would change."""
    t = app.state.registry.tenant(tenant)
    t.drain(30)
    stats = t.memory.stats()
    return stats["messages"], stats["claims"]


def all_routes(routes) -> Iterator:
    """The app's routes, those of included routers too (FastAPI keeps them apart)."""
    for route in routes:
        if hasattr(route, "effective_candidates"):
            yield from route.effective_candidates()
        else:
            yield route


def write_routes(app) -> list[tuple[str, str]]:
    """Every state-changing (method, path) the app serves, path parameters filled in."""
    out = []
    for route in all_routes(app.routes):
        for method in sorted(getattr(route, "methods", None) or ()):
            if method in ("POST", "PUT", "PATCH", "DELETE"):
                path = route.path.replace("{conversation:path}", "ana-lee")
                for name in ("claim_id", "memory_id"):
                    path = path.replace("{" + name + "}", "1")
                path = path.replace("{message_id}", "D1:1").replace("{person:path}", "Lee")
                out.append((method, path.replace("{person_id:path}", "p1")))
    return out


def test_every_write_route_is_found(site) -> None:
    app, _ = site
    routes = write_routes(app)
    assert ("POST", "/v1/memory/reset") in routes and ("POST", "/v1/chat/completions") in routes
    assert ("POST", "/claims/1/forget") in routes and ("DELETE", "/v1/memories/1") in routes
    assert len(routes) >= 15 and not any("{" in p for _, p in routes)


ATTACKS = {
    # what a plain HTML form on another site sends
    "form": {"Origin": EVIL, "Content-Type": "application/x-www-form-urlencoded"},
    "multipart": {"Origin": EVIL, "Content-Type": "multipart/form-data; boundary=x"},
    # fetch(..., {mode: "no-cors", body: "..."}) and <form enctype="text/plain">
    "text-plain": {"Origin": EVIL, "Content-Type": "text/plain"},
    # a browser that marks the request and sends JSON (it would need a preflight)
    "fetch-site": {"Sec-Fetch-Site": "cross-site", "Content-Type": "application/json"},
    "json-foreign-origin": {"Origin": EVIL, "Content-Type": "application/json"},
    "null-origin": {"Origin": "null", "Content-Type": "application/x-www-form-urlencoded"},
}


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_no_cross_site_request_changes_memory(site, attack: str) -> None:
    app, http = site
    before = counts(app)
    for method, path in write_routes(app):
        body = PLANT if "json" in ATTACKS[attack]["Content-Type"] else "x=1&token=0&confirm=yes"
        r = http.request(
            method, path, params={"confirm": "yes"}, content=body, headers=ATTACKS[attack]
        )
        assert r.status_code == 403, (attack, method, path, r.status_code, r.text[:200])
        assert r.json()["error"]["type"] == "Forbidden"
    assert counts(app) == before


def test_a_json_api_takes_json_only(site) -> None:
    """No Origin (curl, a page's beacon with an old browser): a body not typed as JSON is 415."""
    app, http = site
    before = counts(app)
    for method, path in write_routes(app):
        if not path.startswith("/v1/"):
            continue
        for kind in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data"):
            r = http.request(
                method,
                path,
                params={"confirm": "yes"},
                content=PLANT,
                headers={"Content-Type": kind},
            )
            assert r.status_code == 415, (kind, method, path, r.status_code)
        r = http.request(method, path, params={"confirm": "yes"}, content=PLANT, headers={})
        assert r.status_code == 415, (method, path, "no content type")
    assert counts(app) == before


def test_the_issue_reproduction_stores_nothing(site) -> None:
    """A form-encoded reset and a text/plain chat from another site (issue 34)."""
    app, http = site
    before = counts(app)
    form = {"Origin": EVIL, "Content-Type": "application/x-www-form-urlencoded"}
    r = http.post("/v1/memory/reset?confirm=yes", content="x=1", headers=form)
    assert r.status_code == 403
    r = http.post(
        "/v1/chat/completions",
        content=PLANT,
        headers={"Origin": EVIL, "Content-Type": "text/plain"},
    )
    assert r.status_code == 403
    r = http.post("/v1/chat/completions", content=PLANT, headers={"Content-Type": "text/plain"})
    assert r.status_code == 415
    assert counts(app) == before
    hits = app.state.registry.tenant("default").memory.search("new PIN 0000")
    assert all("0000" not in str(h.to_dict()) for h in hits)


def test_same_origin_clients_and_plain_clients_still_write(site) -> None:
    app, http = site
    origin = str(http.base_url).rstrip("/")
    r = http.post(
        "/v1/chat/completions", content=PLANT, headers={"Content-Type": "application/json"}
    )
    assert r.status_code == 200, r.text
    # a page of this server itself (the API docs' "try it out") may write
    record = {**jsonl_records(ana_lee("c2"))[0], "text": "Same origin."}
    r = http.post(
        "/v1/memory/messages",
        json={"messages": [record]},
        headers={"Origin": origin, "Sec-Fetch-Site": "same-origin"},
    )
    assert r.status_code == 200, r.text
    assert counts(app)[0] == 7 + 2 + 1  # the chat's turn and reply, and the message


def test_a_foreign_host_reaches_no_handler_without_keys(site) -> None:
    """DNS rebinding: attacker.example resolving to 127.0.0.1 reads nothing."""
    _, http = site
    for path in ("/v1/memory/search?q=PIN", "/", "/claims/1", "/v1/memories", "/docs"):
        r = http.get(path, headers={"Host": "attacker.example:8090"})
        assert r.status_code == 403 and "attacker.example" in r.text, path
        assert "token" not in r.text and "Lee" not in r.text
    for host in ("127.0.0.1", "localhost:8090", "[::1]:8090", "LOCALHOST"):
        assert http.get("/v1/memory/search?q=cat", headers={"Host": host}).status_code == 200


def test_a_configured_name_is_allowed(tmp_path: Path) -> None:
    app = open_app(tmp_path, allowed_hosts=("archivist.lan",))
    with serving(app) as url, httpx.Client(base_url=url) as http:
        r = http.get("/v1/memory/status", headers={"Host": "archivist.lan:8080"})
        assert r.status_code == 200
        assert http.get("/v1/memory/status", headers={"Host": "other.lan"}).status_code == 403
    app.state.registry.close()


def test_with_keys_any_host_is_served_but_no_cross_site_write(tmp_path: Path) -> None:
    settings = ServerSettings(data_dir=tmp_path, keys=KEYS, extract_delay=0, background="thread")
    app = create_app(settings, memory_factory=fake_memory)
    with serving(app) as url, httpx.Client(base_url=url) as http:
        r = http.get("/v1/memory/status", headers={"Host": "memory.example.com", **ALPHA})
        assert r.status_code == 200  # a hosted server behind its own name
        r = http.post(
            "/v1/memory/reset?confirm=yes",
            headers={**ALPHA, "Origin": EVIL, "Content-Type": "application/json"},
        )
        assert r.status_code == 403
    app.state.registry.close()


def test_tenants_are_isolated(tmp_path: Path) -> None:
    settings = ServerSettings(data_dir=tmp_path, keys=KEYS, extract_delay=0, background="thread")
    app = create_app(settings, memory_factory=fake_memory)
    app.state.registry.tenant("alpha").memory.add([ana_lee()])
    with serving(app) as url, httpx.Client(base_url=url) as http:
        reads = [
            "/v1/memory/search?q=Pixel",
            "/v1/memory/claims",
            "/v1/memory/conversations",
            "/v1/memory/people",
            "/v1/memories",
            "/v1/memory/export",
        ]
        for path in reads:
            mine = http.get(path, headers=ALPHA)
            theirs = http.get(path, headers=BETA)
            assert mine.status_code == theirs.status_code == 200, path
            assert "Pixel" in mine.text or "ana-lee" in mine.text or "Lee" in mine.text, path
            assert "Pixel" not in theirs.text and "ana-lee" not in theirs.text, path
        r = http.delete("/v1/memory/conversations/ana-lee", headers=BETA)
        assert r.status_code in (200, 404) and r.json().get("deleted", 0) == 0
        r = http.delete("/v1/memories/1", headers=BETA)
        assert r.status_code == 404
        assert (
            http.get("/v1/memory/search?q=Pixel", headers={"Authorization": "Bearer x"}).status_code
            == 401
        )
    assert counts(app, "alpha")[0] == 7
    app.state.registry.close()


@pytest.mark.parametrize("chunked", [False, True])
def test_oversized_bodies_are_413_on_every_kind_of_route(tmp_path: Path, chunked: bool) -> None:
    app = open_app(tmp_path, max_request_bytes=64 * 1024)
    big = b"x=" + b"a" * (1024 * 1024)

    def body():
        for i in range(0, len(big), 64 * 1024):
            yield big[i : i + 64 * 1024]

    with serving(app) as url, httpx.Client(base_url=url, timeout=30) as http:
        for path, kind in [
            ("/v1/memory/messages", "application/json"),
            ("/v1/chat/completions", "application/json"),
            ("/v1/memory/import", "application/x-ndjson"),
            ("/login", "application/x-www-form-urlencoded"),
            ("/claims/1/forget", "application/x-www-form-urlencoded"),
            ("/conversations/a/forget", "application/x-www-form-urlencoded"),
        ]:
            content = body() if chunked else big
            r = http.post(path, content=content, headers={"Content-Type": kind})
            assert r.status_code == 413, (path, r.status_code, r.text[:300])
            assert "Traceback" not in r.text and r.json()["error"]["type"] == "RequestTooLarge"
    app.state.registry.close()


def test_markup_in_memory_is_shown_as_text_on_every_page(tmp_path: Path) -> None:
    app = open_app(tmp_path)
    memory = app.state.registry.tenant("default").memory
    line = (
        '{"conversation": "c<b>1</b>", "id": "m<i>1</i>", "speaker": "Eve'
        + MARKUP.replace('"', "'")
        + '", "text": "I live in Leeds '
        + MARKUP.replace('"', "'")
        + '", "timestamp": "2024-05-01T10:00:00Z"}'
    )
    memory.add(parse(line, "jsonl", source="test"))
    memory.consolidate()
    claim = memory.claims(limit=10)[0]
    person = memory.persons()[0]
    pages = [
        "/",
        "/conversations/c%3Cb%3E1%3C%2Fb%3E",
        f"/claims/{claim.id}",
        f"/people/{person.id}",
        "/search?q=" + MARKUP,
        "/ask?q=" + MARKUP,
        "/contexts",
        f"/claims/{claim.id}/forget",
        "/conversations/c%3Cb%3E1%3C%2Fb%3E/forget",
        "/people/" + MARKUP,
        "/login?next=" + MARKUP,
    ]
    with serving(app) as url, httpx.Client(base_url=url) as http:
        for page in pages:
            r = http.get(page)
            assert r.status_code < 500, page
            assert "<script>alert" not in r.text and "onerror=alert(2)>" not in r.text, page
            assert "Traceback" not in r.text
    app.state.registry.close()


def test_form_tokens_are_per_session(site) -> None:
    app, http = site
    claim = app.state.registry.tenant("default").memory.claims(limit=1)[0]
    url = str(http.base_url)
    a = httpx.Client(base_url=url, follow_redirects=True)
    b = httpx.Client(base_url=url, follow_redirects=True)
    with a, b:
        page_a, page_b = a.get(f"/claims/{claim.id}").text, b.get(f"/claims/{claim.id}").text
        token_a = page_a.split('name="token" value="')[1].split('"')[0]
        token_b = page_b.split('name="token" value="')[1].split('"')[0]
        assert token_a != token_b
        # a token seen by one browser does nothing in another
        r = b.post(f"/claims/{claim.id}/forget", data={"token": token_a, "confirm": "yes"})
        assert r.status_code == 403
        # and one with no session at all is refused
        r = http.post(f"/claims/{claim.id}/forget", data={"token": token_a, "confirm": "yes"})
        assert r.status_code == 403
        r = a.post(f"/claims/{claim.id}/forget", data={"token": token_a, "confirm": "yes"})
        assert r.status_code == 200 and f"forgot claim {claim.id}" in r.text


def test_ui_serves_the_browser_alone_unless_asked(tmp_path: Path) -> None:
    memory = fake_memory("default", tmp_path / "mem.db")
    memory.add([ana_lee()])
    for api in (False, True):
        settings = ServerSettings(
            data_dir=tmp_path, open_access=True, serve_api=api, background="thread"
        )
        app = create_app(settings, memory_factory=lambda tenant, path: memory)
        with serving(app) as url, httpx.Client(base_url=url) as http:
            assert http.get("/").status_code == 200
            expected = 200 if api else 404
            assert http.get("/v1/memory/search?q=cat").status_code == expected
            assert http.get("/openapi.json").status_code == expected
            r = http.post("/v1/chat/completions", json={"model": "m", "messages": []})
            assert (r.status_code == 404) == (not api)
            assert ('href="/docs"' in http.get("/").text) == api


def test_ids_holding_a_slash_work_everywhere(site) -> None:
    app, http = site
    memory = app.state.registry.tenant("default").memory
    memory.add([ana_lee("team/general")])
    assert http.get("/conversations/team%2Fgeneral").status_code == 200
    asked = http.get("/conversations/team%2Fgeneral/messages/D1%3A1/forget")
    assert asked.status_code == 200 and "message D1:1 of conversation team/general" in asked.text
    r = http.delete("/v1/memory/messages/team%2Fgeneral/D1%3A1")
    assert r.status_code == 200 and r.json()["deleted"] == 1
    r = http.delete("/v1/memory/conversations/team%2Fgeneral")
    assert r.status_code == 200 and r.json()["deleted"] == 6
    # both deletions are in the audit log: who, what kind, how many; never the text
    audit = http.get("/v1/memory/audit").json()
    assert [(e["kind"], e["messages"]) for e in audit[:2]] == [("conversation", 6), ("message", 1)]
    assert audit[0]["actor"].startswith("rest (127.0.0.1") and "Pixel" not in str(audit)
    assert http.delete("/v1/memory/conversations/team%2Fgeneral").status_code == 404
    assert {c["id"] for c in memory.conversations()} == {"ana-lee"}


def test_huge_ids_are_not_found_not_500(site) -> None:
    _, http = site
    for path in ("/v1/memories/9223372036854775808", "/v1/memories/-1", "/v1/memories/1e9"):
        r = http.get(path)
        assert r.status_code in (400, 404, 422) and "error" in r.json(), (path, r.text)
    for path in (
        "/claims/9223372036854775808",
        "/conversations/ana-lee?claim=99999999999999999999",
    ):
        r = http.get(path)
        assert r.status_code in (400, 404, 422) and "Traceback" not in r.text, (path, r.status_code)
