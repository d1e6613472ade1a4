"""Issue 34: nothing lost on odd input. A seeded fuzz run across the loaders (and the CLI),
the Python API (MemoryService and archivist.mem0.Memory), REST and the chat proxy.

Every input is drawn from ``random.Random(seed)``, so a run repeats exactly
(``ARCHIVIST_FUZZ_SEED``, ``ARCHIVIST_FUZZ_N`` change the seed and the count).
What must hold, whatever the input:

- the Python API raises nothing but ArchivistError, with a one-line message;
- the CLI exits 0 or with a one-line ``error:``, never a traceback;
- no HTTP answer is a 5xx, and every 4xx says why;
- nothing is lost: a loaded file's messages are stored verbatim, a canary
  conversation no input names survives, and every user turn a chat client
  sent is stored (or its request got a 4xx naming why), the proxy counting
  no store failure.

Each failure is filed under a class (surface, operation, what went wrong) with
the first input that showed it, so the report is a list of distinct bugs with a
repro each. The full run (3,000 inputs) is slow-marked; the smoke run (200)
is not.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import random
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

pytest.importorskip("fastapi")

from fastapi.testclient import TestClient  # noqa: E402

from archivist.bench.load import FakeUpstream  # noqa: E402
from archivist.cli.main import main as cli_main  # noqa: E402
from archivist.config import Settings  # noqa: E402
from archivist.errors import ArchivistError  # noqa: E402
from archivist.load import FORMATS, load_file  # noqa: E402
from archivist.mem0 import Memory  # noqa: E402
from archivist.model import Conversation, Message  # noqa: E402
from archivist.server import proxy  # noqa: E402
from archivist.server.app import ServerSettings, create_app  # noqa: E402
from archivist.service import MemoryService  # noqa: E402
from archivist.testing import FakeEmbedder  # noqa: E402

SEED = int(os.environ.get("ARCHIVIST_FUZZ_SEED", "34"))
FULL = int(os.environ.get("ARCHIVIST_FUZZ_N", "3000"))
SMOKE = 200
# Share of the inputs each surface gets (the CLI runs a tenth of the loader inputs).
SHARES = {"loaders": 0.3, "api": 0.3, "rest": 0.25, "proxy": 0.15}
CANARY = "canary-conv-3e1f"  # a conversation no fuzz input names: it must survive all
HOST = "http://127.0.0.1"  # loopback: an open-access server refuses other Host names
BIG = 1_000_010  # characters: just over a message's 1 MB limit

# -- odd values -------------------------------------------------------------------------

ODD_TEXT = [
    "", " ", "\x00", "a\x00b", "\ud800", "x\udfffy", "é", "🙂", "\u202e", "\u2028", "\n",
    "/", "a/b", "team/general", "%2F", "a%2Fb", "..", "../etc/passwd", "?x=1", "#",
    "<script>alert(1)</script>", "'; DROP TABLE messages;--", "NaN", "null", "Ana", "ANA ",
    "1", "-1", "0", "9223372036854775808", "I moved to Lisbon and adopted a cat.",
    "x" * 255, "ab " * 100,
]  # fmt: skip
ODD_INTS = [0, -1, 1, 7, 2**31, 2**63 - 1, 2**63, -(2**63) - 1, 2**64, 10**30, True]
ODD_OTHER = [None, [], ["a"], [None], {}, {"a": 1}, 1.5, float("nan"), float("inf"), ("t",)]


def odd_text(rng: random.Random) -> str:
    if rng.random() < 0.01:
        return rng.choice(["x", "é", "🙂"]) * BIG
    return rng.choice(ODD_TEXT)


def odd(rng: random.Random) -> Any:
    """Any odd value: text mostly, else an integer out of range or a value of another type."""
    r = rng.random()
    if r < 0.6:
        return odd_text(rng)
    if r < 0.8:
        return rng.choice(ODD_INTS)
    return rng.choice(ODD_OTHER)


def maybe(rng: random.Random, good: Any = None) -> Any:
    """``good`` half the time, an odd value otherwise."""
    return good if rng.random() < 0.5 else odd(rng)


def short(value: Any) -> str:
    """``value`` for a report: long strings abbreviated, at most 300 characters."""

    def cut(v: Any) -> Any:
        if isinstance(v, str) and len(v) > 40:
            return f"<{v[:8]!r} * {len(v)} chars>"
        if isinstance(v, list | tuple):
            return [cut(x) for x in v[:6]]
        if isinstance(v, dict):
            return {cut(k): cut(x) for k, x in list(v.items())[:8]}
        return v

    return repr(cut(value))[:300]


# -- findings -----------------------------------------------------------------------------


@dataclass
class Findings:
    """Failure classes, each with how often it showed and the first input that did."""

    classes: dict[tuple[str, str, str], list] = field(default_factory=dict)
    inputs: Counter = field(default_factory=Counter)
    notes: dict[str, list] = field(default_factory=dict)  # warnings logged: shown, not failed

    def note(self, what: str, example: str) -> None:
        self.notes.setdefault(what, [0, example])[0] += 1

    def add(self, surface: str, what: str, kind: str, repro: str) -> None:
        key = (surface, what, kind)
        if key in self.classes:
            self.classes[key][0] += 1
        else:
            self.classes[key] = [1, repro]

    def report(self) -> str:
        lines = [f"inputs: {dict(self.inputs)}; failure classes: {len(self.classes)}"]
        for (surface, what, kind), (n, repro) in sorted(self.classes.items()):
            lines.append(f"- [{surface}] {what}: {kind} (x{n})\n    repro: {repro}")
        for what, (n, example) in sorted(self.notes.items()):
            lines.append(f"- note (not failed): {what} (x{n})\n    e.g. {example}")
        return "\n".join(lines)


def check_call(findings: Findings, surface: str, what: str, call: Callable, repro: str) -> Any:
    """Run ``call``: an ArchivistError with a one-line message is a clear answer; anything
    else raised is a finding. Returns the call's result, or None when it raised."""
    try:
        return call()
    except ArchivistError as e:
        if "\n" in str(e).strip():
            findings.add(surface, what, f"{type(e).__name__} message spans lines", repro)
        return None
    except Exception as e:  # noqa: BLE001 - the finding this fuzz run is for
        findings.add(surface, what, type(e).__name__, f"{repro} -> {str(e)[:120]!r}")
        return None


# -- loader inputs: a valid document of each format, then mutated ----------------------


def _valid(fmt: str, rng: random.Random, n: int) -> Any:
    """A small valid document of ``fmt`` whose conversation ids are unique to case ``n``."""
    texts = ["I moved to Lisbon.", "Ben works at Acme.", "We adopted a cat named Miso."]
    if fmt == "jsonl":
        return [
            {
                "conversation": f"j{n}",
                "id": f"m{i}",
                "speaker": ["Ana", "Ben"][i % 2],
                "text": texts[i % 3],
                "timestamp": f"2024-03-02T09:1{i}:00Z",
                "session": 1,
                "role": "user",
                "addressees": [["Ben", "Ana"][i % 2]],
                "attachments": [{"kind": "image", "caption": "a cat", "url": "https://x/c.png"}],
            }
            for i in range(rng.randint(1, 3))
        ]
    if fmt == "openai":
        msgs = [
            {"role": "user", "content": texts[0]},
            {"role": "assistant", "content": [{"type": "text", "text": texts[1]}]},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": texts[2]},
                    {"type": "image_url", "image_url": {"url": "https://x/c.png"}},
                ],
            },
        ]
        doc = {"conversation": f"o{n}", "user": "Ana", "assistant": "Bot", "messages": msgs}
        return doc | {"timestamp": "2024-03-02T09:00:00Z"} if rng.random() < 0.7 else msgs
    if fmt == "locomo":
        turns = [
            {"speaker": ["Ana", "Ben"][i % 2], "dia_id": f"D1:{i + 1}", "text": texts[i]}
            for i in range(3)
        ]
        turns[2] |= {"img_url": ["https://x/c.png"], "blip_caption": "a cat on a sofa"}
        conv = {
            "speaker_a": "Ana",
            "speaker_b": "Ben",
            "session_1": turns,
            "session_1_date_time": "1:56 pm on 8 May, 2023",
        }
        return [{"sample_id": f"l{n}", "conversation": conv, "qa": []}]
    return [
        {
            "question_id": f"q{n}",
            "question": "Where did I move?",
            "answer": "Lisbon",
            "haystack_session_ids": ["s1"],
            "haystack_dates": ["2023/05/20 (Sat) 02:21"],
            "haystack_sessions": [
                [{"role": "user", "content": texts[0]}, {"role": "assistant", "content": "Nice!"}]
            ],
        }
    ]


def _nodes(doc: Any) -> Iterator[tuple]:
    """Every (container, key) pair in a JSON document, depth first."""
    items = (
        doc.items() if isinstance(doc, dict) else enumerate(doc) if isinstance(doc, list) else ()
    )
    for k, v in items:
        yield (doc, k)
        yield from _nodes(v)


def mutate(doc: Any, rng: random.Random) -> Any:
    """One odd change: a value replaced, a key dropped or added, an item doubled."""
    nodes = list(_nodes(doc))
    if not nodes:
        return odd(rng)
    parent, key = rng.choice(nodes)
    action = rng.random()
    if action < 0.6:
        parent[key] = odd(rng)
    elif action < 0.75 and isinstance(parent, dict):
        del parent[key]
    elif action < 0.85 and isinstance(parent, dict):
        parent[odd_text(rng)[:20] or "k"] = odd(rng)
    elif isinstance(parent, list):
        parent.append(json.loads(json.dumps(parent[key], allow_nan=True)))
    else:
        parent[key] = [parent[key]]
    return doc


def loader_input(rng: random.Random, n: int) -> tuple[str | None, str, bytes]:
    """(format given or None, file suffix, file bytes) for case ``n``."""
    fmt = rng.choice(FORMATS)
    doc = _valid(fmt, rng, n)
    for _ in range(rng.choice([0, 1, 1, 2, 3])):
        doc = mutate(doc, rng)
    ascii_ = rng.random() < 0.5
    if fmt == "jsonl" and isinstance(doc, list):
        text = "\n".join(json.dumps(r, allow_nan=True, ensure_ascii=ascii_) for r in doc)
    else:
        text = json.dumps(doc, allow_nan=True, ensure_ascii=ascii_)
    raw = text.encode("utf-8", "surrogatepass")
    r = rng.random()
    if r < 0.05:
        raw = raw[: rng.randint(0, len(raw))]  # cut short
    elif r < 0.08:
        raw = b"\xef\xbb\xbf" + raw  # a BOM
    elif r < 0.11:
        raw = raw.replace(b"Lisbon", b"Lis\xffbon")  # not UTF-8
    suffix = ".jsonl" if fmt == "jsonl" else ".json"
    return (fmt if rng.random() < 0.7 else None), suffix, raw


def run_loaders(mem: MemoryService, tmp: Path, rng: random.Random, n: int, f: Findings) -> None:
    """Load each file, store what loaded, and read every message back verbatim."""
    for i in range(n):
        fmt, suffix, raw = loader_input(rng, i)
        path = tmp / f"in{i}{suffix}"
        path.write_bytes(raw)
        repro = f"load_file({path.name}, {fmt!r}) of {short(raw.decode('utf-8', 'replace'))}"
        f.inputs["loaders"] += 1
        load = lambda p=path, fm=fmt: load_file(p, fm)  # noqa: E731
        convs = check_call(f, "loader", f"load_file({fmt})", load, repro)
        if convs is not None:
            check_stored(mem, convs, f, repro)
        if i % 10 == 0:
            run_cli(tmp, path, fmt, f, repro)


def check_stored(mem: MemoryService, convs: list[Conversation], f: Findings, repro: str) -> None:
    """``convs`` added (or refused with a clear error); once added, each message reads back."""
    added = check_call(f, "loader", "MemoryService.add(loaded)", lambda: mem.add(convs), repro)
    if added is None:
        return
    f.inputs["loaded and stored"] += 1
    for conv in convs:
        for m in conv.messages:
            kept = check_call(
                f, "loader", "get(conversation, id)", lambda c=conv.id, i=m.id: mem.get(c, i), repro
            )
            if kept is None or kept.text != m.text:
                f.add("loader", "stored message", "lost or changed after add", repro)


def run_cli(tmp: Path, path: Path, fmt: str | None, f: Findings, repro: str) -> None:
    """``archivist ingest`` of the same file: exit 0 or a one-line ``error:``."""
    f.inputs["cli"] += 1
    argv = ["--db", str(tmp / "cli.db"), "--embedder", "fake", "ingest", str(path)]
    argv += ["--format", fmt] if fmt else []
    err, out = io.StringIO(), io.StringIO()
    code: Any = 0
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        try:
            cli_main(argv)
        except SystemExit as e:
            code = e.code
        except Exception as e:  # noqa: BLE001 - a traceback: the finding
            f.add("cli", "ingest", f"uncaught {type(e).__name__}: {str(e)[:80]}", repro)
            return
    text = err.getvalue().strip()
    if code not in (0, None) and (len(text.splitlines()) != 1 or "Traceback" in text):
        f.add("cli", "ingest", f"exit {code} without a one-line error", f"{repro}: {text[:200]}")


# -- the Python API ------------------------------------------------------------------------


class Maybe:
    """An argument that is ``good`` half the time and odd otherwise (see ``maybe``)."""

    def __init__(self, good: Any = None) -> None:
        self.good = good


ODD = object()  # an argument that is always odd
MSG = object()  # chat messages: a list of turns, one turn, a string, or odd
ONE = {"role": "user", "content": "I moved to Lisbon."}
WHICH = ("user_id", "agent_id", "run_id")

# (name, MemoryService or mem0 method name, positional args, keyword args)
API: list[tuple[str, str, tuple, dict]] = [
    ("add(messages)", "add", (MSG,), {"user_id": Maybe("Ana"), "conversation": Maybe(),
                                      "timestamp": Maybe(), "metadata": Maybe()}),
    ("add(path str)", "add", (ODD,), {"format": Maybe()}),
    ("search", "search", (ODD,), {"person": Maybe(), "conversation": Maybe(),
                                  "speaker": Maybe(), "session": Maybe(), "k": Maybe(5)}),
    ("recall", "recall", (ODD,), {"person": Maybe(), "k": Maybe(5)}),
    ("ask", "ask", (ODD,), {"person": Maybe(), "conversation": Maybe(), "k": Maybe(5)}),
    ("context", "context", (ODD,), {"person": Maybe(), "budget_tokens": Maybe(200)}),
    ("get(conversation, id)", "get", (ODD, ODD), {}),
    ("get(memory_id)", "get", (ODD,), {}),
    ("memory", "memory", (ODD,), {}),
    ("history", "history", (ODD,), {}),
    ("claim_history", "claim_history", (ODD,), {}),
    ("claims", "claims", (), {"person": Maybe(), "conversation": Maybe(), "limit": Maybe(5)}),
    ("entities", "entities", (), {"conversation": Maybe(), "owner": Maybe(), "name": Maybe(),
                                  "person": Maybe(), "limit": Maybe(5)}),
    ("timeline", "timeline", (ODD,), {"conversation": Maybe(), "owner": Maybe()}),
    ("profile", "profile", (ODD,), {}),
    ("person", "person", (ODD,), {}),
    ("conflicts", "conflicts", (), {"conversation": Maybe(), "subject": Maybe()}),
    ("decisions", "decisions", (Maybe(),), {}),
    ("summaries", "summaries", (Maybe(),), {"level": Maybe()}),
    ("scenes", "scenes", (Maybe(),), {}),
    ("dossier", "dossier", (ODD,), {}),
    ("key_info", "key_info", (ODD,), {}),
    ("select", "select", (ODD, Maybe("all_involving")),
     {"conversation": Maybe(), "at_most": Maybe()}),
    ("get_all", "get_all", (Maybe(),), {"limit": Maybe(5)}),
    ("search_memories", "search_memories", (ODD,), {"user_id": Maybe(), "limit": Maybe(5)}),
    ("update", "update", (ODD, ODD), {"reason": Maybe("")}),
    ("forget_claim", "forget_claim", (ODD,), {"reason": Maybe("")}),
    ("forget_message", "forget_message", (ODD, ODD), {}),
    ("delete(conversation)", "delete", (), {"conversation": ODD}),
    ("delete(person)", "delete", (), {"person": ODD, "received": Maybe(False)}),
    ("delete(memory_id)", "delete", (ODD,), {}),
    ("declare_identity", "declare_identity", (ODD, ODD, ODD), {}),
    ("merge_people", "merge_people", (ODD, ODD), {"reason": Maybe("")}),
    ("split_person", "split_person", (ODD, ODD, ODD), {}),
    ("export_jsonl", "export_jsonl", (Maybe(),), {}),
    ("import_jsonl", "import_jsonl", (ODD,), {}),
    ("usefulness", "usefulness", (ODD, Maybe([1])), {}),
    ("record_context", "record_context", (Maybe([("claim", 1, "x")]), ODD),
     {"person": Maybe(), "conversation": Maybe()}),
    ("route", "route", (ODD,), {}),
    ("mem0.add", "mem0.add", (MSG,), {"user_id": Maybe("Ana"), "agent_id": Maybe(),
                                      "run_id": Maybe(), "metadata": Maybe(),
                                      "timestamp": Maybe()}),
    ("mem0.search", "mem0.search", (ODD,), {"user_id": Maybe(), "limit": Maybe(5)}),
    ("mem0.get_all", "mem0.get_all", (),
     {"user_id": Maybe(), "agent_id": Maybe(), "limit": Maybe(5)}),
    ("mem0.get", "mem0.get", (ODD,), {}),
    ("mem0.update", "mem0.update", (ODD, ODD), {}),
    ("mem0.delete", "mem0.delete", (ODD,), {}),
    ("mem0.history", "mem0.history", (ODD,), {}),
    ("mem0.delete_all", "mem0.delete_all", (), {WHICH: ODD}),
]  # fmt: skip


def draw(spec: Any, rng: random.Random) -> Any:
    """An argument as ``spec`` says (ODD, MSG, Maybe(good)), or ``spec`` itself."""
    if spec is ODD:
        return odd(rng)
    if spec is MSG:
        return rng.choice([odd(rng), [ONE], dict(ONE), [ONE, odd(rng)], "We adopted a cat."])
    return maybe(rng, spec.good) if isinstance(spec, Maybe) else spec


def call_of(mem: MemoryService, m0: Memory, name: str) -> Callable:
    fn = getattr(m0, name[5:]) if name.startswith("mem0.") else getattr(mem, name)
    if name == "export_jsonl":
        return lambda *a, **kw: list(fn(*a, **kw))  # a generator: read it through
    return fn


def run_api(mem: MemoryService, rng: random.Random, n: int, f: Findings) -> None:
    """Each method with odd arguments: a result or an ArchivistError, and the canary stays."""
    m0 = Memory(mem)
    for i in range(n):
        name, method, arg_specs, kw_specs = API[i] if i < len(API) else rng.choice(API)
        fn = call_of(mem, m0, method)
        args = tuple(draw(a, rng) for a in arg_specs)
        kwargs = {
            (rng.choice(k) if isinstance(k, tuple) else k): draw(v, rng)
            for k, v in kw_specs.items()
        }
        repro = f"{method}(*{short(args)}, **{short(kwargs)})"
        f.inputs["api"] += 1
        if check_call(f, "api", name, lambda: fn(*args, **kwargs), repro) is not None:  # noqa: B023
            f.inputs["api answered"] += 1
    check_canary(mem, f, "api")


def add_canary(mem: MemoryService) -> None:
    from datetime import UTC, datetime

    at = datetime(2024, 1, 1, tzinfo=UTC)
    msgs = tuple(
        Message(f"c{i}", CANARY, 1, "Canary Q. Person", f"Canary fact number {i}.", at)
        for i in range(3)
    )
    mem.add(Conversation(CANARY, ("Canary Q. Person",), msgs))


def check_canary(mem: MemoryService, f: Findings, surface: str) -> None:
    kept = [m.text for _, m in mem.store.conversation_messages(CANARY)]
    if kept != [f"Canary fact number {i}." for i in range(3)]:
        f.add(surface, "canary conversation", "messages no input named were lost", str(kept))


# -- REST ---------------------------------------------------------------------------------


def q(value: Any) -> str:
    """``value`` in a URL: any text percent-encoded (a lone surrogate as its UTF-8 bytes),
    at most 8,000 characters (the test client sends no longer URL)."""
    return quote(str(value)[:8000], safe="", errors="surrogatepass")


def query(rng: random.Random, *names: str) -> str:
    """A query string giving some of ``names`` odd values."""
    parts = [f"{n}={q(odd(rng))}" for n in names if rng.random() < 0.7]
    return "?" + "&".join(parts) if parts else ""


def body_of(rng: random.Random, good: dict) -> tuple[bytes, str | None]:
    """(request body, content type): ``good`` with odd fields, odd JSON, or odd bytes."""
    doc: Any = json.loads(json.dumps(good))
    for _ in range(rng.choice([0, 1, 2])):
        doc = mutate(doc, rng)
    r = rng.random()
    if r < 0.05:
        return b'{"a": ' * 2000, "application/json"  # nested deeper than JSON parsers go
    if r < 0.1:
        return b"\xff\xfe{not json", "application/json"
    raw = json.dumps(doc, allow_nan=True).encode()
    ctype = rng.choice(
        ["application/json"] * 6
        + [
            "text/plain",
            "application/x-www-form-urlencoded",
            None,
            "application/json; charset=latin-1",
        ]
    )
    return raw, ctype


MSG_IN = {
    "conversation": "r1",
    "id": "m1",
    "speaker": "Ana",
    "text": "I moved.",
    "timestamp": "2024-03-02T09:00:00Z",
}
NDJSON = object()  # a body of one JSONL line with an odd conversation, as text

# (method, path with "{}" for odd path parts, query parameters, a good JSON body or None)
ROUTES: list[tuple[str, str, tuple[str, ...], Any]] = [
    ("POST", "/v1/memory/messages", (), {"messages": [MSG_IN]}),
    ("GET", "/v1/memory/search", ("q", "person", "conversation", "speaker", "k", "at"), None),
    ("POST", "/v1/memory/ask", (), {"question": "Where?", "person": "Ana", "k": 5}),
    ("POST", "/v1/memory/context", (), {"turn": "Hi", "person": "Ana", "budget_tokens": 100}),
    ("GET", "/v1/memory/profile", ("person", "at"), None),
    ("GET", "/v1/memory/claims", ("person", "conversation", "limit"), None),
    ("GET", "/v1/memory/entities", ("conversation", "person", "name", "limit"), None),
    ("GET", "/v1/memory/timeline", ("entity", "conversation", "at"), None),
    ("GET", "/v1/memory/conflicts", ("conversation", "subject"), None),
    ("GET", "/v1/memory/decisions", ("kind",), None),
    ("GET", "/v1/memory/people", (), None),
    ("GET", "/v1/memory/conversations", (), None),
    ("DELETE", "/v1/memory/conversations/{}", (), None),
    ("DELETE", "/v1/memory/people/{}", ("received",), None),
    ("GET", "/v1/memory/export", ("conversation",), None),
    ("POST", "/v1/memory/import", (), NDJSON),
    ("POST", "/v1/memory/consolidate", ("conversation",), None),
    ("GET", "/v1/memory/status", (), None),
    ("POST", "/v1/memory/reset", ("confirm",), None),
    ("POST", "/v1/memories", (),
     {"messages": [ONE], "user_id": "Ana", "run_id": None, "metadata": {}, "timestamp": None}),
    ("GET", "/v1/memories", ("user_id", "q", "limit"), None),
    ("GET", "/v1/memories/{}", (), None),
    ("PUT", "/v1/memories/{}", (), {"text": "Corrected."}),
    ("DELETE", "/v1/memories/{}", (), None),
    ("GET", "/v1/memories/{}/history", (), None),
    ("DELETE", "/v1/memory/messages/{}/{}", (), None),
    ("POST", "/v1/memory/people/merge", (), {"keep": "Ana", "drop": "Ben", "reason": ""}),
    ("POST", "/v1/memory/people/{}/split", (), {"conversation": "r1", "name": "Ana", "reason": ""}),
    ("GET", "/", ("q",), None),
    ("GET", "/people/{}", (), None),
    ("GET", "/conversations/{}", ("page",), None),
    ("GET", "/claims/{}", (), None),
    ("GET", "/search", ("q", "person"), None),
    ("GET", "/ask", ("q", "person"), None),
    ("GET", "/contexts", ("page",), None),
]  # fmt: skip


def rest_request(rng: random.Random, route: tuple) -> tuple[str, bytes | None, str | None]:
    """(path and query, body, content type) of one request to ``route``, odd throughout."""
    method, template, params, good = route
    path = template
    while "{}" in path:
        path = path.replace("{}", q(odd(rng)), 1)
    path += query(rng, *params)
    if good is NDJSON:
        line = json.dumps(MSG_IN | {"conversation": odd(rng)}, allow_nan=True)
        return path, line.encode(), rng.choice(["application/x-ndjson", "text/plain", None])
    if good is None:
        return path, None, None
    return (path, *body_of(rng, good))


class OpenAIShapedUpstream(FakeUpstream):
    """The fake upstream, answering a malformed chat request (a message that is not an
    object) with a 400 as OpenAI does: the bench's fake raises on one, and an exception
    raised by the proxy's in-process transport is the harness's 500, not the proxy's."""

    async def chat(self, request: Any) -> Any:
        from starlette.responses import JSONResponse

        body = await request.json()  # read once: FakeUpstream.chat reads the cached body
        msgs = body.get("messages") if isinstance(body, dict) else None
        if not isinstance(msgs, list) or not all(isinstance(m, dict) for m in msgs):
            error = {"message": "messages: each must be an object", "type": "invalid_request"}
            return JSONResponse({"error": error}, status_code=400)
        return await super().chat(request)


def open_app(tmp: Path, upstream: FakeUpstream):
    settings = ServerSettings(
        data_dir=tmp / "server",
        open_access=True,
        upstream_base_url="http://upstream/v1",
        extract_delay=0,
        background="thread",
    )

    def memory(tenant: str, path: Path) -> MemoryService:
        # Rounds run in the foreground at the end (``consolidate_all``): a background round
        # still running when the store closes is a crash of its own (see the report).
        return MemoryService(
            path, embedder=FakeEmbedder(), settings=Settings(consolidate_mode="manual")
        )

    transport = proxy.httpx.ASGITransport(app=upstream.app)
    return create_app(settings, memory_factory=memory, upstream_transport=transport)


def check_answer(
    f: Findings, surface: str, what: str, r: Any, repro: str, cause: Callable[[], str]
) -> None:
    """No 5xx (filed with the exception behind it: ``cause()`` sends the request again
    and names what the app raised); a 4xx says why (an error body)."""
    if r.status_code >= 500:
        why = cause() if r.text.strip() == "Internal Server Error" else r.text[:160]
        f.add(surface, what, f"HTTP {r.status_code}: {why.split(':')[0]}", f"{repro} -> {why}")
    elif r.status_code >= 400 and not r.text.strip():
        f.add(surface, what, f"HTTP {r.status_code} with an empty body", repro)
    if "Traceback" in r.text:
        f.add(surface, what, "traceback in the response body", repro)


def raised(client: TestClient, method: str, path: str, **kw: Any) -> str:
    """The exception behind a 500, by sending the request again through a client that
    lets it through."""
    strict = TestClient(client.app, base_url=HOST, raise_server_exceptions=True)
    try:
        strict.request(method, path, **kw)
    except Exception as e:  # noqa: BLE001 - what the app raised is the answer
        return f"{type(e).__name__}: {str(e)[:120]}"
    return "no exception the second time"


def run_rest(client: TestClient, rng: random.Random, n: int, f: Findings) -> None:
    for i in range(n):
        route = ROUTES[i % len(ROUTES)] if i < 2 * len(ROUTES) else rng.choice(ROUTES)
        method = route[0]
        path, body, ctype = rest_request(rng, route)
        headers = {"content-type": ctype} if ctype else {}
        sent = short((body or b"").decode("utf-8", "replace"))
        repro = f"{method} {path[:200]} body={sent} content-type={ctype}"
        f.inputs["rest"] += 1
        r = client.request(method, path, content=body, headers=headers)
        kw = {"content": body, "headers": headers}
        again = lambda m=method, p=path, kw=kw: raised(client, m, p, **kw)  # noqa: E731
        check_answer(f, "rest", f"{method} {route[1]}", r, repro, again)
        f.inputs[f"rest {r.status_code // 100}xx"] += 1


# -- the proxy ----------------------------------------------------------------------------


def odd_part(rng: random.Random) -> Any:
    kind = rng.random()
    if kind < 0.3:
        return {"type": "text", "text": maybe(rng, "And I got a dog.")}
    if kind < 0.45:
        return {
            "type": maybe(rng, "image_url"),
            "image_url": {"url": maybe(rng, "https://x/d.png")},
        }
    if kind < 0.55:
        return {"type": "file", "file": {"file_id": maybe(rng, "file-1"), "filename": maybe(rng)}}
    if kind < 0.65:
        return {
            "type": "input_audio",
            "input_audio": {"data": maybe(rng, "AAAA"), "format": maybe(rng, "wav")},
        }
    if kind < 0.75:
        return {"type": odd(rng)}
    return odd(rng)


def user_turn(rng: random.Random, k: int) -> dict:
    """A user message, its content text, a list of parts or an odd value."""
    r = rng.random()
    if r < 0.45:
        content: Any = rng.choice([f"Turn {k}: I moved to Lisbon.", odd_text(rng)])
    elif r < 0.85:
        content = [{"type": "text", "text": f"Turn {k}."}] + [
            odd_part(rng) for _ in range(rng.randint(0, 3))
        ]
    else:
        content = odd(rng)
    m: dict = {"role": "user", "content": content}
    if rng.random() < 0.2:
        m["name"] = odd(rng)
    return m


def chat_headers(rng: random.Random, n: int) -> dict:
    r = rng.random()
    if r < 0.7:
        return {"X-Archivist-Conversation": f"fz-{n}"}
    if r < 0.85:
        return {}
    value = odd_text(rng)[:200]
    return {"X-Archivist-Conversation": value.encode("utf-8", "surrogatepass")}


def run_proxy(client: TestClient, app: Any, rng: random.Random, n: int, f: Findings) -> None:
    """Chats of a few turns, each request re-sending the history plus a new odd turn, as a
    client does; after each 200 every user turn sent so far must be stored."""
    tenant = app.state.registry.tenant("default")
    sent = 0
    chat = 0
    while sent < n:
        chat += 1
        headers = chat_headers(rng, chat)
        history: list = [{"role": "system", "content": "Be brief."}] * rng.choice([0, 1])
        for turn in range(rng.randint(1, 4)):
            if sent >= n:
                break
            extra = [odd(rng)] if rng.random() < 0.05 else []  # a message that is no object
            history += [*extra, user_turn(rng, turn)]
            body: dict = {"model": "m", "messages": list(history)}
            if rng.random() < 0.3:
                body["user"] = maybe(rng, "Ana")
            if rng.random() < 0.2:
                body["stream"] = True
            sent += 1
            reply = proxy_turn(client, tenant, body, headers, f)
            if reply is None:
                break
            history.append({"role": "assistant", "content": reply})
    failures = client.get("/v1/memory/status").json()["proxy"]
    if failures.get("store_failures"):
        f.add("proxy", "status", "store_failures counted", short(failures.get("last_failure")))


def proxy_turn(
    client: TestClient, tenant: Any, body: dict, headers: dict, f: Findings
) -> str | None:
    """One request; the reply's text, or None when the chat cannot go on."""
    f.inputs["proxy"] += 1
    raw = json.dumps(body, allow_nan=True).encode()
    repro = f"POST /v1/chat/completions headers={short(headers)} body={short(body)}"
    sent = {**headers, "content-type": "application/json"}
    r = client.post("/v1/chat/completions", content=raw, headers=sent)
    url = "/v1/chat/completions"
    again = lambda: raised(client, "POST", url, content=raw, headers=sent)  # noqa: E731
    check_answer(f, "proxy", "chat", r, repro, again)
    if r.status_code != 200:
        return None
    f.inputs["proxy 200"] += 1
    if not tenant.drain(30):
        f.add("proxy", "chat", "background writes did not finish in 30 s", repro)
    missing = lost_user_turns(tenant, body, headers)
    if missing:
        f.add(
            "proxy",
            "user turns",
            "a user turn sent was not stored",
            f"{repro}; lost positions {missing}",
        )
    return reply_of(r.text, bool(body.get("stream")))


def lost_user_turns(tenant: Any, body: dict, headers: dict) -> list[int]:
    """Positions of user messages in ``body`` with no stored message at that position."""
    # The headers as the app reads them: Starlette's TestClient sends each value as httpx
    # decoded it, encoded again as UTF-8 (bytes that are not UTF-8 come through changed),
    # and the app decodes them as Latin-1.
    sent = proxy.httpx.Headers(headers)
    wire = {k.lower(): v.encode("utf-8").decode("latin-1") for k, v in sent.multi_items()}
    try:
        _, conv = proxy.identify(body, wire, "default")
    except Exception:  # noqa: BLE001 - an id the proxy cannot name: everything counts as lost
        conv = None
    stored = (
        {m.id.split("-", 1)[0] for _, m in tenant.memory.store.conversation_messages(conv)}
        if conv
        else set()
    )
    return [
        p
        for p, m in enumerate(body["messages"])
        if isinstance(m, dict)
        and m.get("role") == "user"
        and m.get("content") is not None
        and str(p) not in stored
    ]


def reply_of(text: str, stream: bool) -> str | None:
    if not stream:
        try:
            return json.loads(text)["choices"][0]["message"]["content"]
        except (ValueError, KeyError, IndexError, TypeError):
            return None
    parts = []
    for line in text.splitlines():
        if line.startswith("data: ") and line != "data: [DONE]":
            with contextlib.suppress(ValueError, KeyError, IndexError, TypeError):
                parts.append(json.loads(line[6:])["choices"][0]["delta"].get("content") or "")
    return "".join(parts)


def consolidate_all(mem: MemoryService, f: Findings) -> None:
    """Every queued job (extraction, people, scenes, summaries) over what the fuzz stored."""
    check_call(f, "jobs", "consolidate()", mem.consolidate, "consolidate() after the fuzz run")
    failed = [j for j in mem.store.list_jobs(limit=10_000) if j.status == "failed" or j.error]
    for job in failed:
        f.add("jobs", job.kind, f"job failed: {str(job.error)[:80]}", short(job.payload))


# -- the runs -----------------------------------------------------------------------------


class ErrorLogs(logging.Handler):
    """Errors and warnings archivist logged (with their exception types) during a run."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.seen: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.seen.append(record)


def fuzz(tmp: Path, total: int, seed: int = SEED) -> Findings:
    """``total`` inputs over the four surfaces, drawn from ``seed``; the findings."""
    rng = random.Random(seed)
    f = Findings()
    share = {k: max(1, int(total * v)) for k, v in SHARES.items()}
    settings = Settings(consolidate_mode="manual")
    with MemoryService(tmp / "fuzz.db", settings=settings, embedder=FakeEmbedder()) as mem:
        add_canary(mem)
        run_loaders(mem, tmp, rng, share["loaders"], f)
        run_api(mem, rng, share["api"], f)
        consolidate_all(mem, f)
        check_canary(mem, f, "loaders+api")
    app = open_app(tmp, OpenAIShapedUpstream())
    logs = ErrorLogs()
    logging.getLogger("archivist").addHandler(logs)
    try:
        with TestClient(app, base_url=HOST, raise_server_exceptions=False) as client:
            add_canary(app.state.registry.tenant("default").memory)
            run_rest(client, rng, share["rest"], f)
            run_proxy(client, app, rng, share["proxy"], f)
            tenant = app.state.registry.tenant("default")
            tenant.drain(30)
            consolidate_all(tenant.memory, f)
            check_canary(tenant.memory, f, "rest+proxy")
    finally:
        logging.getLogger("archivist").removeHandler(logs)
    for rec in logs.seen:
        kind = rec.exc_info[0].__name__ if rec.exc_info and rec.exc_info[0] else "no exception"
        if rec.levelno >= logging.ERROR:
            f.add("server log", rec.name, f"logged error: {kind}", rec.getMessage()[:200])
        else:
            f.note(f"{rec.name} warning: {rec.msg[:80]}", rec.getMessage()[:200])
    return f


def test_fuzz_smoke_odd_input_is_refused_clearly_and_nothing_is_lost(tmp_path: Path) -> None:
    found = fuzz(tmp_path, SMOKE)
    if found.classes:
        pytest.fail(found.report(), pytrace=False)


@pytest.mark.slow
def test_fuzz_3000_odd_inputs_are_refused_clearly_and_nothing_is_lost(tmp_path: Path) -> None:
    found = fuzz(tmp_path, FULL)
    assert sum(found.inputs.values()) >= 3000
    if found.classes:
        pytest.fail(found.report(), pytrace=False)
