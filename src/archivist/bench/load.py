"""Load benchmark of the proxy: N concurrent chats on loopback, latency added and messages kept.

A fake OpenAI-style upstream (fixed latency, deterministic replies, optional
failure rate) and the proxy each run under uvicorn in a thread on 127.0.0.1.
Every chat sends each turn twice, directly to the upstream and through the
proxy (re-sending its whole history, as chat clients do); the proxy's added
latency is the paired difference. Failed calls (upstream errors, a proxy
restarting) are retried. At the end the stored log of every chat is compared
with the history its client ended with: nothing lost, nothing duplicated.
"""

from __future__ import annotations

import asyncio
import functools
import random
import socket
import ssl
import statistics
import threading
import time
from collections.abc import Callable
from contextlib import closing
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..model import content_hash

try:
    import httpx2 as httpx
except ImportError:  # pragma: no cover - the classic package where httpx2 is absent
    import httpx  # type: ignore[no-redef]

KEY = "bench-key-000001"
TENANT = "bench"
_WORDS = (
    "garden lisbon violin marathon nurse pottery sister kayak recipe tomato cargo "
    "pilot novel chess museum hiking puppy bakery concert python harbor winter"
).split()


# -- the fake upstream ---------------------------------------------------------------------


def reply_for(messages: list) -> str:
    """A deterministic reply: retries of the same request get the same words."""
    users = [m for m in messages if isinstance(m, dict) and m.get("role") == "user"]
    last = users[-1].get("content", "") if users else ""
    last = last if isinstance(last, str) else ""
    # as a real model would: it never answers with text that is not valid Unicode
    last = last.encode("utf-8", "replace").decode("utf-8")
    return f"Noted ({len(users)}): " + " ".join(last.split()[:12])


def completion(model: str, text: str) -> dict:
    """An OpenAI chat.completion object."""
    return {
        "id": "chatcmpl-" + content_hash(text)[:12],
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }


def chunks(model: str, text: str) -> list[str]:
    """The same reply as OpenAI server-sent events, a word per chunk, then [DONE]."""
    base = {"id": "chatcmpl-s", "object": "chat.completion.chunk", "created": 0, "model": model}
    import json

    deltas = [{"role": "assistant", "content": ""}] + [
        {"content": w} for w in text.split(" ") for w in ([w + " "] if w else [])
    ]
    if deltas[1:]:
        deltas[-1]["content"] = deltas[-1]["content"].rstrip(" ")
    events = [
        {**base, "choices": [{"index": 0, "delta": d, "finish_reason": None}]} for d in deltas
    ]
    events.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    return [f"data: {json.dumps(e)}\n\n" for e in events] + ["data: [DONE]\n\n"]


def context_checks(messages: list[dict]) -> dict[str, int] | None:
    """What the proxy injected into one request, checked: its items, items that repeat a
    message of the request itself, and items shown twice; None when nothing was injected.

    An item repeats the request when its quoted words are one of the request's
    messages, or hold every content word of one that has at least three (a turn
    restated as a claim). Pure, so a test and the load run count the same way.
    """
    import json

    from ..lang.text import query_terms
    from ..read.context_lines import same_text
    from ..server.proxy import MEMORY_HEADER

    messages = [m for m in messages if isinstance(m, dict)]  # a client may send anything
    memory = next(
        (m["content"] for m in messages if str(m.get("content", "")).startswith(MEMORY_HEADER)),
        None,
    )
    if memory is None:
        return None
    items = [line[2:] for line in memory.splitlines() if line.startswith("- ")]
    said = [
        str(m.get("content", ""))
        for m in messages
        if m.get("role") in ("user", "assistant") and isinstance(m.get("content"), str)
    ]
    texts = {same_text(s) for s in said}
    terms = [t for s in said if len(t := set(query_terms(s))) >= 3]
    repeated = 0
    for item in items:
        head, sep, quoted = item.partition(": ")
        try:
            words = json.loads(quoted) if sep else json.loads(item)
        except ValueError:
            words = quoted or item
        mine = set(query_terms(str(words)))
        if same_text(str(words)) in texts or any(t <= mine for t in terms):
            repeated += 1
    return {"items": len(items), "repeated": repeated, "duplicates": len(items) - len(set(items))}


class FakeUpstream:
    """An OpenAI-like chat endpoint: records requests; latency, failures and errors on demand.

    Each request the proxy injected memory into is checked as it arrives
    (``context_checks``); the totals are in ``context`` and at GET /stats."""

    def __init__(self, latency_s: float = 0.0, fail_rate: float = 0.0, seed: int = 0) -> None:
        """``fail_rate``: each call fails with 500 at that probability (seeded, so runs repeat).

        Independent draws, not "every fifth call": a fixed pattern can line up
        with one client's retries and fail it every time.
        """
        import random

        from starlette.applications import Starlette
        from starlette.routing import Route

        self.latency_s = latency_s
        self.fail_rate = fail_rate
        self._rng = random.Random(seed)
        self.received: list[dict] = []
        self.errors: list[tuple[int, dict]] = []  # tests: the next responses, as (status, body)
        self.calls = 0
        self.failed = 0
        self.context = {"requests": 0, "items": 0, "repeated": 0, "duplicates": 0}
        self.app = Starlette(
            routes=[
                Route("/v1/chat/completions", self.chat, methods=["POST"]),
                Route("/v1/models", self.models),
                Route("/stats", self.stats),
            ]
        )

    async def chat(self, request: Any) -> Any:
        from starlette.responses import JSONResponse, StreamingResponse

        body = await request.json()
        self.received.append(body)
        self.calls += 1
        if (checked := context_checks(body.get("messages", []))) is not None:
            self.context["requests"] += 1
            for key, n in checked.items():
                self.context[key] += n
        if self.latency_s:
            await asyncio.sleep(self.latency_s)
        if self.errors:
            status, error = self.errors.pop(0)
            return JSONResponse(error, status_code=status)
        if self.fail_rate and self._rng.random() < self.fail_rate:
            self.failed += 1
            error = {"error": {"message": "injected failure", "type": "server_error"}}
            return JSONResponse(error, status_code=500)
        text = reply_for(body.get("messages", []))
        model = body.get("model", "fake")
        if body.get("stream"):
            return StreamingResponse(iter(chunks(model, text)), media_type="text/event-stream")
        return JSONResponse(completion(model, text))

    async def stats(self, request: Any) -> Any:
        """Calls and injected failures so far (read when the upstream runs in another process)."""
        from starlette.responses import JSONResponse

        return JSONResponse({"calls": self.calls, "failed": self.failed, "context": self.context})

    async def models(self, request: Any) -> Any:
        from starlette.responses import JSONResponse

        return JSONResponse(
            {"object": "list", "data": [{"id": "fake", "object": "model", "owned_by": "bench"}]}
        )


# -- servers on loopback -------------------------------------------------------------------


class LoopbackServer:
    """An ASGI app under uvicorn in a thread, on 127.0.0.1 (a free port, or the one given)."""

    def __init__(self, app: Any, port: int = 0) -> None:
        import uvicorn

        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        # Accepted connections inherit this: without it each request whose body follows
        # its headers in a second write waits out a 40 ms delayed ACK (measured).
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock.bind(("127.0.0.1", port))
        self.port = self.sock.getsockname()[1]
        config = uvicorn.Config(app, log_level="error", lifespan="on", timeout_keep_alive=30)
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]})

    def start(self) -> LoopbackServer:
        self.thread.start()
        while not self.server.started:
            if not self.thread.is_alive():
                raise RuntimeError("the loopback server failed to start")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        """Graceful: in-flight requests finish, then the app's lifespan closes it."""
        self.server.should_exit = True
        self.thread.join(30)
        self.sock.close()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"


def _serve_proxy(settings: Any, port: int, ready: Any) -> None:
    """Child process: the proxy app under uvicorn on 127.0.0.1:port until terminated."""
    from ..server.app import create_app

    _serve(create_app(settings), port, ready)


def _serve_proxy_workers(settings: Any, workers: int, port: int, ready: Any) -> None:
    """Child process: ``archivist serve --workers N``'s server on 127.0.0.1:port (uvicorn's
    supervisor and its N processes); ready once each of them has answered a status
    request (the first chats would otherwise find the others still starting)."""
    import threading

    from ..server.workers import serve_workers

    def announce() -> None:
        deadline = time.monotonic() + 120
        answered: set[int] = set()
        url = f"http://127.0.0.1:{port}/v1/memory/status"
        while time.monotonic() < deadline and len(answered) < workers:
            try:  # a new connection each time: the kernel hands it to a waiting process
                r = httpx.get(url, headers={"Authorization": f"Bearer {KEY}"}, timeout=5)
                if r.is_success:
                    answered.add(r.json()["process"])
                    continue
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
        if answered:  # else the start timed out
            ready.set()

    threading.Thread(target=announce, daemon=True).start()
    serve_workers(settings, "127.0.0.1", port, workers, "error")


def _serve_upstream(latency_s: float, fail_rate: float, seed: int, port: int, ready: Any) -> None:
    """Child process: the fake upstream (its counters at GET /stats). Its check of the
    injected memory imports the proxy's modules: done before it is ready, or its first
    request took 230 ms more, counted in the first turns' times, direct and proxied."""
    context_checks([])
    _serve(FakeUpstream(latency_s, fail_rate, seed).app, port, ready)


def _serve(app: Any, port: int, ready: Any) -> None:
    import signal

    server = LoopbackServer(app, port)
    signal.signal(signal.SIGTERM, lambda *_: setattr(server.server, "should_exit", True))
    server.start()
    ready.set()
    server.thread.join()


class ProcessServer:
    """The proxy in its own process: the chat clients and the fake upstream do not share its
    interpreter lock, so the latency it adds is its own. Stopped with SIGTERM (graceful)."""

    def __init__(self, settings: Any, port: int = 0, target: Any = None, args: tuple = ()) -> None:
        """``target(*args, port, ready)`` serves in the child; by default the proxy."""
        import multiprocessing

        if not port:
            with socket.socket() as probe:
                probe.bind(("127.0.0.1", 0))
                port = probe.getsockname()[1]
        self.port = port
        ctx = multiprocessing.get_context("spawn")
        self._ready = ctx.Event()
        target, args = (target, args) if target else (_serve_proxy, (settings,))
        self.process = ctx.Process(target=target, args=(*args, port, self._ready))

    def start(self) -> ProcessServer:
        self.process.start()
        if not self._ready.wait(120):
            self.process.kill()
            raise RuntimeError("the proxy process did not start")
        return self

    def stop(self) -> None:
        self.process.terminate()
        self.process.join(60)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"


# -- the run -------------------------------------------------------------------------------


@dataclass(frozen=True)
class LoadConfig:
    """What the load run does; counts and time are bounded."""

    chats: int = 20
    turns: int = 10
    latency_ms: float = 20.0  # the fake upstream's fixed latency
    # Mean pause before each user turn (exponential, seeded; the first is uniform, so
    # chats start apart). 0: every chat sends its next turn the moment it has a reply,
    # and with a fixed upstream latency the chats move in lockstep, all at once.
    think_ms: float = 0.0
    fail_rate: float = 0.0  # share of upstream calls that fail with 500
    restart: bool = False  # restart the proxy when half the turns are done
    stream: bool = False
    drift_guard: bool = False
    context_budget: int = 1500
    # chats per user: from 2 on, a user's other chats are earlier conversations the
    # proxy injects from (1: each chat its own user, so little or nothing to inject)
    chats_per_user: int = 1
    max_seconds: float = 300.0
    retries: int = 20
    seed: int = 0
    workers: int = 1  # proxy processes on the one port (archivist serve --workers)


@dataclass
class _Tally:
    first_overhead_ms: list[float] = field(default_factory=list)  # each chat's first turn
    later_overhead_ms: list[float] = field(default_factory=list)  # the turns after it
    direct_ms: list[float] = field(default_factory=list)
    proxy_ms: list[float] = field(default_factory=list)
    retries: int = 0
    turns_done: int = 0
    restarts: int = 0
    histories: dict[str, list[dict]] = field(default_factory=dict)


def percentile(values: list[float], q: float) -> float | None:
    """The q-th percentile (nearest rank), or None without values."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * len(ordered) + 0.5) - 1))]


def _user_text(chat: int, turn: int, rng: random.Random) -> str:
    words = rng.sample(_WORDS, 4)
    return (
        f"Chat {chat} turn {turn}: yesterday I talked about {words[0]} and {words[1]}; "
        f"my friend prefers {words[2]} over {words[3]}."
    )


async def _call(
    client: httpx.AsyncClient, url: str, body: dict, headers: dict, tally: _Tally, retries: int
) -> tuple[dict, float]:
    """POST until a 2xx (retrying errors and refused connections); the reply and its ms."""
    last = ""
    for attempt in range(retries + 1):
        started = time.perf_counter()
        try:
            resp = await client.post(url, json=body, headers=headers)
            if resp.is_success:
                ms = (time.perf_counter() - started) * 1000
                return _read(resp, body.get("stream", False)), ms
            last = f"HTTP {resp.status_code}: {resp.text[:200]}"
        except httpx.HTTPError as e:
            last = f"{type(e).__name__}: {e}"
        tally.retries += 1
        await asyncio.sleep(min(0.05 * 2**attempt, 1.0))
    raise RuntimeError(f"{url}: no success after {retries + 1} attempts; last: {last}")


def _read(resp: httpx.Response, stream: bool) -> dict:
    """The assistant message of a completion, or of a streamed one (from its SSE text)."""
    import json

    if not stream:
        return resp.json()["choices"][0]["message"]
    parts = []
    for line in resp.text.splitlines():
        if line.startswith("data:") and line[5:].strip() != "[DONE]":
            delta = json.loads(line[5:])["choices"][0]["delta"]
            parts.append(delta.get("content") or "")
    return {"role": "assistant", "content": "".join(parts)}


@functools.cache
def _tls() -> ssl.SSLContext:
    """One TLS context for every chat's client: each of its own read the CA bundle
    again (20 ms of this process's loop each, 1-2 s at the start of a 50-chat run,
    which showed up in the first turns' times, direct and proxied alike)."""
    return ssl.create_default_context()


async def _chat(
    n: int, cfg: LoadConfig, urls: dict[str, str], tally: _Tally, on_turn: Callable[[], Any]
) -> None:
    """One client: each turn direct, then through the proxy with the whole history."""
    rng = random.Random(cfg.seed * 1000 + n)
    cid = f"load-{n}"
    history: list[dict] = [{"role": "system", "content": "You are a helpful assistant."}]
    tally.histories[cid] = history
    proxy_headers = {"Authorization": f"Bearer {KEY}", "X-Archivist-Conversation": cid}
    from ..server.proxy import NO_DELAY

    transport = httpx.AsyncHTTPTransport(
        limits=httpx.Limits(max_connections=4), socket_options=NO_DELAY, verify=_tls()
    )
    async with httpx.AsyncClient(timeout=60.0, transport=transport) as client:
        for t in range(cfg.turns):
            if cfg.think_ms:
                mean = cfg.think_ms / 1000
                await asyncio.sleep(rng.uniform(0, mean) if t == 0 else rng.expovariate(1 / mean))
            history.append({"role": "user", "content": _user_text(n, t, rng)})
            user = f"user{n // cfg.chats_per_user}"
            body = {"model": "fake", "messages": history, "user": user, "stream": cfg.stream}
            _, direct = await _call(client, urls["direct"], body, {}, tally, cfg.retries)
            reply, through = await _call(
                client, urls["proxy"], body, proxy_headers, tally, cfg.retries
            )
            history.append({"role": "assistant", "content": reply["content"]})
            tally.direct_ms.append(direct)
            tally.proxy_ms.append(through)
            (tally.later_overhead_ms if t else tally.first_overhead_ms).append(through - direct)
            tally.turns_done += 1
            await on_turn()


def tenant_store(memory: Any, data_dir: Path) -> Any:
    """The bench tenant's store as the proxy opens it: ``<data_dir>/bench.db``, or its
    PostgreSQL schema when the ``memory`` settings name PostgreSQL."""
    from ..server.tenants import tenant_settings
    from ..store.registry import open_store

    return open_store(tenant_settings(memory, TENANT, Path(data_dir) / f"{TENANT}.db", "manual"))


def _count(store: Any, histories: dict[str, list[dict]]) -> dict:
    """Compare each chat's final history with its stored log: lost, extra, duplicated."""
    from collections import Counter

    sent = stored = lost = extra = duplicated = 0
    for cid, history in histories.items():
        want = Counter((m["role"], m["content"]) for m in history)
        rows = [m for _, m in store.conversation_messages(cid)]
        have = Counter((m.role, m.text) for m in rows)
        positions = [m.id.split("-", 1)[0] for m in rows]
        sent += sum(want.values())
        stored += len(rows)
        lost += sum((want - have).values())
        extra += sum((have - want).values())
        duplicated += len(positions) - len(set(positions))
    return {"sent": sent, "stored": stored, "lost": lost, "extra": extra, "duplicated": duplicated}


def _latency(tally: _Tally) -> dict:
    overhead = tally.first_overhead_ms + tally.later_overhead_ms

    def q(values: list[float], p: float) -> float | None:
        v = percentile(values, p)
        return None if v is None else round(v, 2)

    return {
        "direct_p50": q(tally.direct_ms, 50),
        "direct_p95": q(tally.direct_ms, 95),
        "proxy_p50": q(tally.proxy_ms, 50),
        "proxy_p95": q(tally.proxy_ms, 95),
        "overhead_p50": q(overhead, 50),
        "overhead_p95": q(overhead, 95),
        "overhead_mean": round(statistics.fmean(overhead), 2) if overhead else None,
        # a chat's first turn (a new conversation, its user declared; in a run's first
        # second, every chat's) apart from the turns after it
        "first_turn_overhead_p95": q(tally.first_overhead_ms, 95),
        "later_turns_overhead_p95": q(tally.later_overhead_ms, 95),
    }


def _timings(status: dict) -> dict:
    """The proxy's own times from a tenant's status: context assembly and log write."""
    return {"context": status.get("turn_memory_ms", {}), "store": status.get("turn_store_ms", {})}


class _Proxy:
    """The proxy under test: started, stopped gracefully (its counters kept), restarted on
    the same port; in its own process or in a thread of this one."""

    def __init__(
        self, settings: Any, memory_factory: Any, own_process: bool, workers: int = 1
    ) -> None:
        from collections import Counter

        self.settings, self.memory_factory, self.own_process = settings, memory_factory, own_process
        self.workers = workers  # from 2 on: several processes, the status is one of theirs
        self.counters: Counter[str] = Counter()
        self.turn_ms: list[dict] = []  # the proxy's own memory time per run (restarts split it)
        self.server = self._start()

    def _start(self, port: int = 0) -> Any:
        if self.own_process and self.workers > 1:
            spec = (self.settings, self.workers)
            return ProcessServer(None, port, target=_serve_proxy_workers, args=spec).start()
        if self.own_process:
            return ProcessServer(self.settings, port).start()
        from ..server.app import create_app

        app = create_app(self.settings, memory_factory=self.memory_factory)
        return LoopbackServer(app, port).start()

    def stop(self) -> None:
        """Graceful: in-flight turns finish and queued replies are stored first."""
        if self.own_process:
            status = httpx.get(
                self.server.url + "/memory/status", headers={"Authorization": f"Bearer {KEY}"}
            )
            body = status.json() if status.is_success else {}
            self.counters.update(body.get("counters", {}))
            self.turn_ms.append(_timings(body))
            self.server.stop()  # SIGTERM
            return
        app = self.server.server.config.app
        tenants = app.state.registry.opened()
        self.server.stop()
        for counters in app.state.proxy_counters.values():
            self.counters.update(counters)
        for t in tenants:
            self.counters.update(t.counters)
            self.turn_ms.append(_timings(t.status()))

    def restart(self) -> None:
        port = self.server.port
        self.stop()
        self.server = self._start(port)


def run_load(
    cfg: LoadConfig,
    data_dir: Path,
    *,
    memory_settings: Any = None,
    memory_factory: Any = None,
    separate_process: bool = False,
) -> dict:
    """Run the load benchmark; returns figures as a dict (see ``load_table``).

    ``separate_process``: the proxy and the fake upstream run in their own
    processes (what the CLI does); otherwise in threads of this one, sharing
    its interpreter lock with the clients (tests, and ``memory_factory``).
    """
    from ..config import Settings
    from ..server.app import ServerSettings

    own_process = separate_process and memory_factory is None
    if cfg.workers > 1 and not own_process:
        raise ConfigError("several proxy processes need the proxy in its own process")
    memory = memory_settings or Settings()
    with closing(tenant_store(memory, data_dir)) as store:  # before any process starts
        if store.stats()["messages"]:
            raise ConfigError(f"the bench tenant's store ({store.path}) is not empty")
    upstream = FakeUpstream(cfg.latency_ms / 1000, cfg.fail_rate, cfg.seed)
    if own_process:  # the clients' process does nothing but send
        spec = (cfg.latency_ms / 1000, cfg.fail_rate, cfg.seed)
        up: Any = ProcessServer(None, target=_serve_upstream, args=spec).start()
    else:
        up = LoopbackServer(upstream.app).start()
    try:
        settings = ServerSettings(
            data_dir=data_dir,
            keys=((KEY, TENANT),),
            upstream_base_url=up.url,
            context_budget=cfg.context_budget,
            drift_guard=cfg.drift_guard,
            memory=memory,
        )
        proxy = _Proxy(settings, memory_factory, own_process, cfg.workers)
    except BaseException:
        up.stop()  # a child left running would keep this process from exiting
        raise
    tally = _Tally()
    urls = {"direct": up.url + "/chat/completions", "proxy": proxy.server.url + "/chat/completions"}
    half = cfg.chats * cfg.turns // 2

    async def on_turn() -> None:
        if cfg.restart and not tally.restarts and tally.turns_done >= half:
            tally.restarts = 1
            await asyncio.to_thread(proxy.restart)

    async def main() -> bool:
        runs = [_chat(n, cfg, urls, tally, on_turn) for n in range(cfg.chats)]
        try:
            await asyncio.wait_for(asyncio.gather(*runs), cfg.max_seconds)
        except TimeoutError:
            return False
        return True

    started = time.perf_counter()
    try:
        completed = asyncio.run(main())
    finally:
        proxy.stop()
        if own_process:
            stats = httpx.get(up.url.removesuffix("/v1") + "/stats").json()
            upstream.calls, upstream.failed = stats["calls"], stats["failed"]
            upstream.context = stats["context"]
        up.stop()
    with closing(tenant_store(memory, data_dir)) as store:
        messages = _count(store, tally.histories)
    return {
        "config": asdict(cfg),
        "completed": completed,
        "wall_s": round(time.perf_counter() - started, 2),
        "turns": {"done": tally.turns_done, "planned": cfg.chats * cfg.turns},
        "retries": tally.retries,
        "restarts": tally.restarts,
        "latency_ms": _latency(tally),
        "messages": messages,
        "upstream": {"calls": upstream.calls, "failed": upstream.failed},
        # what the proxy injected, as the upstream received it: items that repeat the
        # request's own messages, and items shown twice in one context (both should be 0)
        "context": upstream.context,
        "proxy": {k: round(v, 2) for k, v in sorted(proxy.counters.items())},
        "turn_memory_ms": proxy.turn_ms,
    }


def load_table(result: dict) -> str:
    """The load run as a small text table."""
    lat, msgs, cfg = result["latency_ms"], result["messages"], result["config"]
    ctx = result.get("context") or {"items": 0, "requests": 0, "repeated": 0, "duplicates": 0}
    mem = result["turn_memory_ms"]  # one entry per proxy run (a restart starts another)
    rows = [
        ("chats x turns", f"{cfg['chats']} x {cfg['turns']} ({result['turns']['done']} done)"),
        (
            "proxy processes",
            str(cfg.get("workers", 1))
            + (" (timings: one of them)" if cfg.get("workers", 1) > 1 else ""),
        ),
        ("upstream latency", f"{cfg['latency_ms']} ms, fail rate {cfg['fail_rate']:.0%}"),
        ("user think time", f"{cfg['think_ms']} ms mean" if cfg["think_ms"] else "none (lockstep)"),
        ("direct p50 / p95", f"{lat['direct_p50']} / {lat['direct_p95']} ms"),
        ("proxy p50 / p95", f"{lat['proxy_p50']} / {lat['proxy_p95']} ms"),
        ("overhead p50 / p95", f"{lat['overhead_p50']} / {lat['overhead_p95']} ms"),
        (
            "overhead p95 first / later",
            f"{lat.get('first_turn_overhead_p95')} / {lat.get('later_turns_overhead_p95')} ms",
        ),
        (
            "context in proxy p50 / p95",
            ", ".join(f"{m['context'].get('p50')} / {m['context'].get('p95')} ms" for m in mem),
        ),
        (
            "log write (beside upstream)",
            ", ".join(f"{m['store'].get('p50')} / {m['store'].get('p95')} ms" for m in mem),
        ),
        ("messages sent / stored", f"{msgs['sent']} / {msgs['stored']}"),
        ("lost / extra / duplicated", f"{msgs['lost']} / {msgs['extra']} / {msgs['duplicated']}"),
        (
            "context items / repeated / twice",
            f"{ctx['items']} in {ctx['requests']} requests / {ctx['repeated']} / "
            f"{ctx['duplicates']}",
        ),
        ("retries / restarts", f"{result['retries']} / {result['restarts']}"),
        ("memory failures", str(result["proxy"].get("memory_failures", 0))),
        ("wall", f"{result['wall_s']} s{'' if result['completed'] else ' (time limit hit)'}"),
    ]
    if cfg["drift_guard"]:
        p = result["proxy"]
        rows.append(
            (
                "drift regenerated",
                f"{p.get('drift_regenerated', 0)} of {p.get('drift_checked', 0)} replies, "
                f"+{p.get('drift_extra_ms', 0)} ms in all",
            )
        )
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k:<{width}}  {v}" for k, v in rows)
