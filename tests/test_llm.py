"""The LLM layer: JSON repair, structured calls, cache, accounting, FakeLLM, the OpenAI client."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
import threading
import time
from types import SimpleNamespace

import pytest
from pydantic import BaseModel

from archivist.config import Settings
from archivist.errors import ArchivistError, ConfigError
from archivist.llm import (
    PROVIDERS,
    Accounting,
    ChatModel,
    Completion,
    LLMBadOutput,
    LLMError,
    LLMRateLimited,
    LLMRefused,
    LLMTimeout,
    MemoryResponseCache,
    ResponseCache,
    cache_key,
    call_structured,
    get_chat_model,
    get_limiter,
    parse_json,
    run_parallel,
)
from archivist.llm import structured as structured_module
from archivist.testing import FakeLLM


class Fact(BaseModel):
    subject: str
    year: int
    tags: list[str] = []


PROMPT = [
    {"role": "system", "content": "Extract facts."},
    {"role": "user", "content": "Ana moved in 2023"},
]
GOOD = {"subject": "Ana", "year": 2023}


def words(messages: list[dict]) -> int:
    """FakeLLM's token rule, so accounting can be checked exactly."""
    return sum(len(str(m["content"]).split()) for m in messages)


@pytest.fixture
def no_sleep(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Record the delays the retry loops ask for instead of waiting them out."""
    delays: list[float] = []
    monkeypatch.setattr(structured_module.time, "sleep", delays.append)
    return delays


# --- repair ----------------------------------------------------------------------------

REPAIRS = [
    ('{"a": 1}', {"a": 1}),
    ("[1, 2]", [1, 2]),
    ('```json\n{"a": 1}\n```', {"a": 1}),
    ('```\n{"a": [1, 2]}\n```\nDone.', {"a": [1, 2]}),
    ('Sure! Here is the JSON:\n{"a": "b"}\nLet me know if you need more.', {"a": "b"}),
    ('{"a": 1, "b": [1, 2,],}', {"a": 1, "b": [1, 2]}),
    ('{"a": {"b": 1,},\n}', {"a": {"b": 1}}),
    ("{'name': 'Bob', 'n': 2}", {"name": "Bob", "n": 2}),
    ("{'name': 'Bob's car', 'ok': 'yes'}", {"name": "Bob's car", "ok": "yes"}),
    ("{'quote': 'she said \"hi\"'}", {"quote": 'she said "hi"'}),
    ("{'a': True, 'b': False, 'c': None}", {"a": True, "b": False, "c": None}),
    ('{name: "x", age: 3}', {"name": "x", "age": 3}),
    ('{"a": 1 // the first\n, "b": 2 /* two */}', {"a": 1, "b": 2}),
    ('{"a": 1 "b": 2}', {"a": 1, "b": 2}),
    ('{"t": "he said "hi" to me", "n": 1}', {"t": 'he said "hi" to me', "n": 1}),
    ('{"t": "it\\\'s"}', {"t": "it's"}),
    ('{"t": "C:\\dir"}', {"t": "C:\\dir"}),
    ('{"t": "line one\nline two"}', {"t": "line one\nline two"}),
    ('{"t": "\\ud83d\\ude00"}', {"t": "\U0001f600"}),
    ('<think>maybe {x} or [y]</think>\n{"a": 1}', {"a": 1}),
    ('Pick from [1, 2]: {"choice": 1, "why": "it fits"}', {"choice": 1, "why": "it fits"}),
    ('See [the note] then {"a": 1,}', {"a": 1}),
    ('{"a": [1, 2}', {"a": [1, 2]}),
    ('{"a": 1}} trailing', {"a": 1}),
]

TRUNCATED = [
    ('{"a": "hel', {"a": "hel"}),
    ('{"a": 1, "b', {"a": 1}),
    ('{"a": 1, "b":', {"a": 1}),
    ('{"a": 1, "b": ', {"a": 1}),
    ('{"a": 1,', {"a": 1}),
    ("[1, 2, 3", [1, 2, 3]),
    ('{"a": tru', {}),
    ('{"a": 1, "b": 1.', {"a": 1}),
    ('{"a": 12', {"a": 12}),
    ('{"a": {"b": [1, {"c": "d', {"a": {"b": [1, {"c": "d"}]}}),
    ('{"a": "x\\', {"a": "x"}),
    ('{"a": "x\\u00', {"a": "x"}),
    ('```json\n{"items": ["a", "b"', {"items": ["a", "b"]}),
]


@pytest.mark.parametrize(("text", "expected"), REPAIRS)
def test_parse_json_repairs_common_mistakes(text, expected):
    assert parse_json(text) == expected


@pytest.mark.parametrize(("text", "expected"), TRUNCATED)
def test_parse_json_closes_truncated_output(text, expected):
    assert parse_json(text) == expected


def test_parse_json_leaves_valid_json_exactly_as_json_reads_it():
    doc = {"s": "a 'quoted' \"str\" with } and ]", "n": [1.5, -2e3, None, True], "u": "é"}
    text = json.dumps(doc, ensure_ascii=False)
    assert parse_json(text) == json.loads(text) == doc
    assert parse_json('"just a string"') == "just a string"
    assert parse_json("42") == 42


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("I cannot help with that.", "no JSON object or array found"),
        ("", "no JSON object or array found"),
        ("```\n```", "no JSON object or array found"),
        ("{{{{", "could not repair JSON"),
        ('{"a": [1, 2], "b": xyz}', "unexpected word 'xyz'"),  # no fragment passed off as it
        ("[see the note]", "unexpected word 'see'"),
        ('{"a": 1]', "unbalanced"),
        ("[" * 100_000, "nested too deeply"),
    ],
)
def test_parse_json_garbage_is_a_value_error_with_a_reason(text, reason):
    with pytest.raises(ValueError, match=reason):
        parse_json(text)


def test_parse_json_finds_the_answer_after_bracket_heavy_prose():
    text = "note [a] " * 2000 + '{"answer": [1, 2,]}'
    assert parse_json(text) == {"answer": [1, 2]}


def test_parse_json_needs_text():
    with pytest.raises(TypeError):
        parse_json(b'{"a": 1}')  # type: ignore[arg-type]


# --- FakeLLM ---------------------------------------------------------------------------


def test_fake_llm_is_a_chat_model_and_scripts_every_response_kind():
    fake = FakeLLM(name="fake-llm")
    assert isinstance(fake, ChatModel) and fake.name == "fake-llm"
    ready = Completion("ready", 1, 2, "m", "length")
    assert fake.enqueue("plain text", {"a": 1}, [1, 2], ready, LLMTimeout("slow")) is fake
    assert fake.complete(PROMPT).text == "plain text"
    assert json.loads(fake.complete(PROMPT).text) == {"a": 1}
    assert fake.complete(PROMPT).text == "[1, 2]"
    assert fake.complete(PROMPT) is ready
    with pytest.raises(LLMTimeout, match="slow"):
        fake.complete(PROMPT)
    assert fake.pending == 0


def test_fake_llm_records_calls_and_counts_words():
    fake = FakeLLM("one two three")
    messages = [{"role": "user", "content": "a b"}]
    completion = fake.complete(messages, schema={"type": "object"}, max_tokens=5)
    messages[0]["content"] = "changed later"
    assert fake.calls == [
        {
            "messages": [{"role": "user", "content": "a b"}],
            "schema": {"type": "object"},
            "temperature": 0.0,
            "max_tokens": 5,
        }
    ]
    assert (completion.input_tokens, completion.output_tokens) == (2, 3)
    assert (completion.model, completion.finish_reason) == ("fake-llm", "stop")


def test_fake_llm_responder_answers_when_the_queue_is_empty():
    seen = []

    def responder(messages, schema):
        seen.append(schema)
        return {"echo": messages[-1]["content"]}

    fake = FakeLLM("first", responder=responder)
    assert fake.complete(PROMPT).text == "first"
    assert json.loads(fake.complete(PROMPT, schema={"x": 1}).text) == {"echo": "Ana moved in 2023"}
    assert seen == [{"x": 1}]


def test_fake_llm_without_script_fails_clearly():
    fake = FakeLLM()
    with pytest.raises(RuntimeError, match="call 1 has no scripted response"):
        fake.complete(PROMPT)
    with pytest.raises(LLMRefused):
        FakeLLM(LLMRefused).complete(PROMPT)  # an exception class is raised too


# --- call_structured -------------------------------------------------------------------


def test_valid_answer_first_time():
    fake = FakeLLM(GOOD)
    fact = call_structured(fake, task="t", version="1", messages=PROMPT, output_type=Fact)
    assert fact == Fact(subject="Ana", year=2023)
    assert len(fake.calls) == 1
    assert fake.calls[0]["schema"] == Fact.model_json_schema()
    assert fake.calls[0]["messages"] == PROMPT


def test_invalid_json_then_valid_retries_with_the_error():
    fake = FakeLLM("Sorry, here it comes", GOOD)
    fact = call_structured(fake, task="t", version="1", messages=PROMPT, output_type=Fact)
    assert fact.subject == "Ana"
    assert len(fake.calls) == 2
    retry = fake.calls[1]["messages"]
    assert retry[:2] == PROMPT
    assert retry[2] == {"role": "assistant", "content": "Sorry, here it comes"}
    assert retry[3]["role"] == "user"
    note = retry[3]["content"]
    assert note.startswith("Your previous answer was invalid:")
    assert "no JSON object or array found" in note
    assert note.endswith("Reply with JSON only matching the schema.")
    assert PROMPT == [PROMPT[0], PROMPT[1]] and len(PROMPT) == 2  # caller's list untouched


def test_truncated_json_is_repaired_without_a_retry():
    fake = FakeLLM('```json\n{"subject": "Ana", "year": 2023, "tags": ["move", "ci')
    fact = call_structured(fake, task="t", version="1", messages=PROMPT, output_type=Fact)
    assert fact == Fact(subject="Ana", year=2023, tags=["move", "ci"])
    assert len(fake.calls) == 1


def test_wrong_types_until_the_budget_runs_out_is_bad_output():
    bad = [{"subject": "Ana", "year": f"year {i}"} for i in range(3)]
    fake = FakeLLM(*bad)
    ledger = Accounting()
    with pytest.raises(LLMBadOutput) as info:
        call_structured(
            fake, task="extract", version="1", messages=PROMPT, output_type=Fact, ledger=ledger
        )
    error = info.value
    assert isinstance(error, LLMError) and isinstance(error, ArchivistError)
    assert error.exit_code == 7
    assert error.raw_text == json.dumps(bad[2])
    assert error.attempts == 3 and error.task == "extract"
    assert any(line.startswith("year:") for line in error.errors)
    assert "extract" in str(error) and "year" in str(error)
    assert len(fake.calls) == 3
    assert "year: Input should be a valid integer" in fake.calls[1]["messages"][-1]["content"]
    stats = ledger.summary()["extract"]
    assert (stats["calls"], stats["retries"], stats["failures"]) == (3, 2, 1)


def test_missing_field_and_cut_off_answer_are_explained():
    cut = Completion('{"subject": "Ana"', 5, 3, "m", finish_reason="length")
    fake = FakeLLM(cut, GOOD)
    call_structured(fake, task="t", version="1", messages=PROMPT, output_type=Fact)
    note = fake.calls[1]["messages"][-1]["content"]
    assert "year: Field required" in note
    assert "cut off at the length limit" in note


def test_timeouts_and_rate_limits_are_retried_then_succeed(no_sleep):
    fake = FakeLLM(LLMTimeout("slow"), LLMRateLimited("busy"), GOOD)
    ledger = Accounting()
    fact = call_structured(
        fake, task="t", version="1", messages=PROMPT, output_type=Fact, ledger=ledger, backoff=0.5
    )
    assert fact.year == 2023
    assert len(fake.calls) == 3
    assert all(call["messages"] == PROMPT for call in fake.calls)  # nothing appended
    assert no_sleep == [0.5, 1.0]
    stats = ledger.summary()["t"]
    assert (stats["calls"], stats["retries"], stats["failures"]) == (3, 2, 0)


def test_rate_limit_retry_after_is_honoured_and_a_long_one_fails_now(no_sleep):
    fake = FakeLLM(LLMRateLimited("busy", retry_after=2.5), GOOD)
    call_structured(fake, task="t", version="1", messages=PROMPT, output_type=Fact)
    assert no_sleep == [2.5]
    fake = FakeLLM(LLMRateLimited("quota", retry_after=60.0), GOOD)
    with pytest.raises(LLMRateLimited, match="quota"):
        call_structured(fake, task="t", version="1", messages=PROMPT, output_type=Fact)
    assert len(fake.calls) == 1


def test_transient_errors_share_the_attempt_budget(no_sleep):
    fake = FakeLLM(LLMTimeout("1"), "not json", LLMTimeout("3"), GOOD)
    ledger = Accounting()
    with pytest.raises(LLMTimeout, match="3"):
        call_structured(
            fake, task="t", version="1", messages=PROMPT, output_type=Fact, ledger=ledger
        )
    assert len(fake.calls) == 3 and fake.pending == 1
    assert ledger.summary()["t"]["failures"] == 1


def test_refusal_is_raised_immediately():
    fake = FakeLLM(LLMRefused("I can't help with that"), GOOD)
    ledger = Accounting()
    with pytest.raises(LLMRefused):
        call_structured(
            fake, task="t", version="1", messages=PROMPT, output_type=Fact, ledger=ledger
        )
    assert len(fake.calls) == 1 and fake.pending == 1
    assert ledger.summary()["t"] == {
        "calls": 1,
        "cache_hits": 0,
        "input_tokens": 0,
        "output_tokens": 0,
        "seconds": pytest.approx(ledger.summary()["t"]["seconds"]),
        "failures": 1,
        "retries": 0,
    }


def test_other_llm_errors_are_not_retried():
    fake = FakeLLM(LLMError("HTTP 401"), GOOD)
    with pytest.raises(LLMError, match="401"):
        call_structured(fake, task="t", version="1", messages=PROMPT, output_type=Fact)
    assert len(fake.calls) == 1


def test_max_attempts_must_be_positive():
    with pytest.raises(ValueError):
        call_structured(
            FakeLLM(GOOD), task="t", version="1", messages=PROMPT, output_type=Fact, max_attempts=0
        )


def test_cache_hit_makes_no_call():
    cache, ledger = MemoryResponseCache(), Accounting()
    fake = FakeLLM('Here: {"subject": "Ana", "year": 2023,}')
    kwargs = dict(task="t", version="1", messages=PROMPT, output_type=Fact)
    first = call_structured(fake, cache=cache, ledger=ledger, **kwargs)
    second = call_structured(fake, cache=cache, ledger=ledger, **kwargs)
    assert first == second and len(fake.calls) == 1
    key = cache_key("fake-llm", "t", "1", PROMPT, Fact.model_json_schema())
    assert cache.entries[key] == ("t", "fake-llm", '{"subject":"Ana","year":2023,"tags":[]}')
    stats = ledger.summary()["t"]
    assert (stats["calls"], stats["cache_hits"]) == (1, 1)


def test_cache_misses_when_anything_that_shapes_the_answer_changes():
    cache = MemoryResponseCache()
    fake = FakeLLM(responder=lambda messages, schema: GOOD)
    base = dict(task="t", version="1", messages=PROMPT, output_type=Fact, cache=cache)
    call_structured(fake, **base)
    call_structured(fake, **{**base, "version": "2"})
    call_structured(fake, **{**base, "task": "other"})
    call_structured(fake, **{**base, "messages": [*PROMPT, {"role": "user", "content": "?"}]})
    call_structured(FakeLLM(GOOD, name="other-model"), **base)
    assert len(fake.calls) == 4 and len(cache) == 5


def test_a_cached_entry_that_no_longer_validates_is_a_miss():
    cache = MemoryResponseCache()
    key = cache_key("fake-llm", "t", "1", PROMPT, Fact.model_json_schema())
    cache.put(key, "t", "fake-llm", '{"subject": "Ana"}')
    fake = FakeLLM(GOOD)
    fact = call_structured(
        fake, task="t", version="1", messages=PROMPT, output_type=Fact, cache=cache
    )
    assert fact.year == 2023 and len(fake.calls) == 1
    assert json.loads(cache.get(key)) == {"subject": "Ana", "year": 2023, "tags": []}


def test_cache_key_is_canonical_and_covers_every_part():
    schema = Fact.model_json_schema()
    key = cache_key("m", "t", "1", PROMPT, schema)
    reordered = [{"content": m["content"], "role": m["role"]} for m in PROMPT]
    assert key == cache_key("m", "t", "1", reordered, dict(reversed(schema.items())))
    assert len(key) == 64 and int(key, 16) >= 0
    variants = [
        ("m2", "t", "1", PROMPT, schema),
        ("m", "t2", "1", PROMPT, schema),
        ("m", "t", "2", PROMPT, schema),
        ("m", "t", "1", PROMPT[:1], schema),
        ("m", "t", "1", PROMPT, {"type": "object"}),
    ]
    assert len({key, *(cache_key(*v) for v in variants)}) == 6


def test_accounting_numbers_are_exact():
    fake = FakeLLM("not json", GOOD, GOOD)
    ledger, cache = Accounting(), MemoryResponseCache()
    kwargs = dict(output_type=Fact, ledger=ledger, cache=cache)
    call_structured(fake, task="extract", version="1", messages=PROMPT, **kwargs)
    call_structured(fake, task="extract", version="1", messages=PROMPT, **kwargs)  # cached
    call_structured(fake, task="summarise", version="1", messages=PROMPT[1:], **kwargs)
    output_words = len("not json".split()) + 2 * len(json.dumps(GOOD).split())
    summary = ledger.summary()
    extract, summarise = summary["extract"], summary["summarise"]
    assert extract["calls"] == 2 and extract["cache_hits"] == 1 and extract["retries"] == 1
    assert extract["input_tokens"] == words(fake.calls[0]["messages"]) + words(
        fake.calls[1]["messages"]
    )
    assert summarise["calls"] == 1 and summarise["input_tokens"] == 4
    assert extract["output_tokens"] + summarise["output_tokens"] == output_words
    assert extract["failures"] == summarise["failures"] == 0
    totals = ledger.totals()
    assert (totals["calls"], totals["cache_hits"], totals["retries"]) == (3, 1, 1)
    assert totals["seconds"] == pytest.approx(extract["seconds"] + summarise["seconds"])


def test_limiter_bounds_concurrent_calls():
    active, peak, lock = [0], [0], threading.Lock()

    def responder(messages, schema):
        with lock:
            active[0] += 1
            peak[0] = max(peak[0], active[0])
        time.sleep(0.02)
        with lock:
            active[0] -= 1
        return GOOD

    fake = FakeLLM(responder=responder)
    limiter = threading.Semaphore(2)

    def one(i: int) -> Fact:
        messages = [{"role": "user", "content": f"item {i}"}]
        return call_structured(
            fake, task="t", version="1", messages=messages, output_type=Fact, limiter=limiter
        )

    results = run_parallel(one, range(8), limit=8)
    assert all(isinstance(r, Fact) for r in results)
    assert len(fake.calls) == 8 and peak[0] == 2


# --- run_parallel ----------------------------------------------------------------------


def test_run_parallel_keeps_order_and_returns_each_failure_in_place():
    def fn(x: int) -> int:
        if x % 3 == 0:
            raise ValueError(f"bad {x}")
        time.sleep(0.001 * (10 - x))  # later items finish first
        return x * 10

    results = run_parallel(fn, range(10), limit=4)
    for x, result in enumerate(results):
        if x % 3 == 0:
            assert isinstance(result, ValueError) and str(result) == f"bad {x}"
        else:
            assert result == x * 10
    assert run_parallel(fn, [1, 3], limit=1)[0] == 10
    assert isinstance(run_parallel(fn, [1, 3], limit=1)[1], ValueError)
    assert run_parallel(fn, [], limit=4) == []


def test_run_parallel_really_runs_concurrently():
    barrier = threading.Barrier(3, timeout=5)
    assert run_parallel(lambda _: barrier.wait() >= 0, range(3), limit=3) == [True] * 3


def test_run_parallel_rejects_a_zero_limit():
    with pytest.raises(ValueError):
        run_parallel(str, [1], limit=0)


# --- accounting and cache --------------------------------------------------------------


def test_accounting_record_totals_merge_and_round_trip():
    a = Accounting()
    a.record("x", input_tokens=10, output_tokens=2, seconds=0.5)
    a.record("x", input_tokens=20, output_tokens=4, seconds=1.0, retried=2, failed=True)
    a.record("x", input_tokens=0, output_tokens=0, seconds=0.0, cache_hit=True)
    b = Accounting()
    b.record("y", input_tokens=1, output_tokens=1, seconds=0.25)
    b.record("x", input_tokens=1, output_tokens=1, seconds=0.25)
    assert a.summary()["x"] == {
        "calls": 4,
        "cache_hits": 1,
        "input_tokens": 30,
        "output_tokens": 6,
        "seconds": 1.5,
        "failures": 1,
        "retries": 2,
    }
    assert a.merge(b) is a
    assert a.summary()["x"]["calls"] == 5 and a.summary()["y"]["calls"] == 1
    assert a.totals() == {
        "calls": 6,
        "cache_hits": 1,
        "input_tokens": 32,
        "output_tokens": 8,
        "seconds": 2.0,
        "failures": 1,
        "retries": 2,
    }
    data = json.loads(json.dumps(a.to_dict()))
    assert Accounting.from_dict(data).summary() == a.summary()
    with pytest.raises(ValueError, match="unknown counters"):
        Accounting.from_dict({"x": {"calls": 1, "dollars": 2}})
    with pytest.raises(ValueError):
        a.record("x", input_tokens=-1, output_tokens=0, seconds=0)
    assert Accounting().totals()["calls"] == 0


def test_accounting_is_thread_safe():
    ledger = Accounting()

    def work(_: int) -> None:
        for _ in range(200):
            ledger.record("t", input_tokens=1, output_tokens=2, seconds=0.0)

    run_parallel(work, range(8), limit=8)
    assert ledger.summary()["t"]["calls"] == 1600
    assert ledger.totals()["output_tokens"] == 3200


def test_memory_cache_follows_the_protocol():
    cache = MemoryResponseCache()
    assert isinstance(cache, ResponseCache)
    assert cache.get("k") is None
    cache.put("k", "task", "model", "v1")
    cache.put("k", "task", "model", "v2")
    assert cache.get("k") == "v2" and len(cache) == 1


# --- registry --------------------------------------------------------------------------


def test_no_llm_configured_means_none():
    assert get_chat_model(Settings()) is None  # today's Settings has no llm field at all
    for value in ("", "none", "None", " "):
        assert get_chat_model(SimpleNamespace(llm=value)) is None


def test_registry_builds_the_fake_and_the_openai_model():
    assert isinstance(get_chat_model(SimpleNamespace(llm="fake")), FakeLLM)
    pytest.importorskip("openai")
    from archivist.llm.openai_compat import OpenAIChatModel

    settings = SimpleNamespace(
        llm="openai",
        llm_model="gpt-4o-mini",
        llm_base_url="https://api.openai.com/v1",
        llm_api_key="sk-test",
        llm_timeout=12.0,
    )
    model = get_chat_model(settings)
    assert isinstance(model, OpenAIChatModel) and isinstance(model, ChatModel)
    assert model.name == "openai:gpt-4o-mini@api.openai.com"
    assert model.timeout == 12.0
    assert set(PROVIDERS) == {"openai", "local", "fake"}


def test_registry_errors_name_the_problem():
    with pytest.raises(ConfigError, match="llm_model and llm_base_url"):
        get_chat_model(SimpleNamespace(llm="openai", llm_model="m"))
    with pytest.raises(ConfigError, match="unknown llm 'gpt'"):
        get_chat_model(SimpleNamespace(llm="gpt"))


def test_limiter_comes_from_settings():
    limiter = get_limiter(Settings())  # default 4
    assert all(limiter.acquire(blocking=False) for _ in range(4))
    assert not limiter.acquire(blocking=False)
    assert get_limiter(SimpleNamespace(llm_concurrency=1)).acquire(blocking=False)
    with pytest.raises(ConfigError):
        get_limiter(SimpleNamespace(llm_concurrency=0))


def test_importing_the_llm_layer_loads_no_optional_dependency():
    code = (
        "import sys, archivist.llm, archivist.testing\n"
        "from archivist.llm import get_chat_model\n"
        "from types import SimpleNamespace as S\n"
        "get_chat_model(S(llm='openai', llm_model='m', llm_base_url='http://h/v1'))\n"
        "print(sorted(m for m in ('openai', 'pydantic', 'httpx2') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# --- OpenAIChatModel -------------------------------------------------------------------


def test_openai_missing_package_names_the_extra(monkeypatch):
    from archivist.llm.openai_compat import OpenAIChatModel

    monkeypatch.setitem(sys.modules, "openai", None)
    with pytest.raises(LLMError, match=r"pip install 'archivist\[openai\]'"):
        OpenAIChatModel(model="m", base_url="http://h/v1")


def reply(content="{}", *, refusal=None, finish="stop", usage=True, model="served-model"):
    """A chat.completion body as servers send it."""
    body = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content, "refusal": refusal},
                "finish_reason": finish,
            }
        ],
    }
    if usage:
        body["usage"] = {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}
    return body


class FakeChatServer:
    """An in-process /v1/chat/completions: scripted statuses, errors and bodies, in order."""

    def __init__(self, *script: object):
        pytest.importorskip("openai")
        self.httpx = importlib.import_module("httpx2" if "httpx2" in sys.modules else "httpx")
        self.script = list(script)
        self.requests: list[dict] = []

    def handler(self, request):
        self.requests.append(json.loads(request.content))
        step = self.script.pop(0) if self.script else reply(json.dumps(GOOD))
        if isinstance(step, BaseException):
            raise step
        if isinstance(step, int):
            step = (step, "boom", {})
        if isinstance(step, tuple):
            status, message, headers = step
            body = {"error": {"message": message, "type": "invalid_request_error"}}
            return self.httpx.Response(status, json=body, headers=headers)
        return self.httpx.Response(200, json=step)

    def model(self, **kwargs):
        from archivist.llm.openai_compat import OpenAIChatModel

        client = self.httpx.Client(transport=self.httpx.MockTransport(self.handler))
        kwargs.setdefault("backoff", 0.0)
        return OpenAIChatModel(
            model="test-chat", base_url="http://llm.test:8000/v1", http_client=client, **kwargs
        )


SCHEMA = Fact.model_json_schema()


def test_openai_sends_the_json_schema_and_reads_usage():
    server = FakeChatServer(reply('{"a": 1}'))
    model = server.model()
    completion = model.complete(PROMPT, schema=SCHEMA, max_tokens=64, timeout=5)
    assert completion == Completion('{"a": 1}', 11, 7, "served-model", "stop")
    assert model.name == "openai:test-chat@llm.test:8000"
    assert server.requests == [
        {
            "model": "test-chat",
            "messages": PROMPT,
            "temperature": 0.0,
            "max_tokens": 64,
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": "Fact", "schema": SCHEMA, "strict": False},
            },
        }
    ]


def test_openai_without_schema_or_usage():
    server = FakeChatServer(reply("hello", usage=False, model=""))
    completion = server.model().complete(PROMPT, temperature=0.7)
    assert (completion.text, completion.input_tokens, completion.output_tokens) == ("hello", 0, 0)
    assert completion.model == "test-chat"
    assert "response_format" not in server.requests[0] and "max_tokens" not in server.requests[0]
    assert server.requests[0]["temperature"] == 0.7


def test_openai_retries_429_then_succeeds(monkeypatch):
    from archivist.llm import openai_compat

    delays: list[float] = []
    monkeypatch.setattr(openai_compat.time, "sleep", delays.append)
    server = FakeChatServer((429, "slow down", {"retry-after": "2"}), 429, reply("ok"))
    assert server.model(backoff=0.5).complete(PROMPT).text == "ok"
    assert len(server.requests) == 3
    assert delays == [2.0, 1.0]  # the server's hint, then backoff * 2


def test_openai_persistent_or_long_rate_limit_is_llm_rate_limited():
    server = FakeChatServer(*[429] * 10)
    with pytest.raises(LLMRateLimited, match="429") as info:
        server.model(max_retries=2).complete(PROMPT)
    assert len(server.requests) == 3 and info.value.retry_after is None
    server = FakeChatServer((429, "quota", {"retry-after": "3600"}))
    with pytest.raises(LLMRateLimited) as info:
        server.model().complete(PROMPT)
    assert len(server.requests) == 1 and info.value.retry_after == 3600


def test_openai_retries_server_and_connection_errors():
    server = FakeChatServer(500, 503, reply("ok"))
    assert server.model().complete(PROMPT).text == "ok"
    assert len(server.requests) == 3
    server = FakeChatServer()
    server.script = [server.httpx.ConnectError("down"), reply("ok")]
    assert server.model().complete(PROMPT).text == "ok"
    server = FakeChatServer(*[502] * 5)
    with pytest.raises(LLMError, match="HTTP 502 after 2 attempts"):
        server.model(max_retries=1).complete(PROMPT)


def test_openai_timeout_is_llm_timeout_and_not_retried_here():
    server = FakeChatServer()
    server.script = [server.httpx.ReadTimeout("slow"), reply("late")]
    with pytest.raises(LLMTimeout, match="timed out"):
        server.model().complete(PROMPT)
    assert len(server.requests) == 1


def test_openai_client_errors_are_not_retried():
    server = FakeChatServer((401, "bad key", {}))
    with pytest.raises(LLMError, match="HTTP 401") as info:
        server.model().complete(PROMPT, schema=SCHEMA)
    assert type(info.value) is LLMError and len(server.requests) == 1
    server = FakeChatServer((400, "messages: field required", {}))
    with pytest.raises(LLMError, match="HTTP 400"):
        server.model().complete(PROMPT, schema=SCHEMA)
    assert len(server.requests) == 1


def test_openai_rejected_response_format_falls_back_and_is_remembered():
    server = FakeChatServer(
        (400, "response_format type json_schema is not supported", {}),
        (400, "Unknown parameter: response_format", {}),
        reply('{"a": 1}'),
        reply('{"a": 2}'),
    )
    model = server.model()
    assert model.complete(PROMPT, schema=SCHEMA).text == '{"a": 1}'
    first, second, third = server.requests[:3]
    assert first["response_format"]["type"] == "json_schema"
    assert second["response_format"] == {"type": "json_object"}
    assert "response_format" not in third
    for body in (second, third):  # the schema now travels in the prompt instead
        system = body["messages"][0]
        assert system["role"] == "system" and system["content"].startswith("Extract facts.")
        assert json.dumps(SCHEMA) in system["content"]
        assert body["messages"][1:] == PROMPT[1:]
    assert model.complete([PROMPT[1]], schema=SCHEMA).text == '{"a": 2}'
    assert len(server.requests) == 4 and "response_format" not in server.requests[3]
    assert server.requests[3]["messages"][0]["role"] == "system"  # added when none was there
    assert model.response_format == "none"


def test_openai_rejected_max_tokens_and_temperature_are_adapted():
    server = FakeChatServer(
        (400, "Unsupported parameter: 'max_tokens'. Use 'max_completion_tokens' instead.", {}),
        (400, "Unsupported value: 'temperature' does not support 0 with this model.", {}),
        reply("ok"),
    )
    model = server.model()
    assert model.complete(PROMPT, max_tokens=32).text == "ok"
    last = server.requests[-1]
    assert last["max_completion_tokens"] == 32 and "max_tokens" not in last
    assert "temperature" not in last


@pytest.mark.parametrize(
    "script",
    [
        reply(None, refusal="I can't help with that."),
        reply("partial", finish="content_filter"),
        (400, "The response was filtered: content_filter triggered", {}),
    ],
)
def test_openai_refusals_are_llm_refused(script):
    server = FakeChatServer(script)
    with pytest.raises(LLMRefused):
        server.model().complete(PROMPT, schema=SCHEMA)
    assert len(server.requests) == 1


def test_openai_schema_name_and_instruction_helpers():
    from archivist.llm.openai_compat import schema_name, with_instruction

    assert schema_name({"title": "My Schema/v2"}) == "My_Schema_v2"
    assert schema_name({}) == "response" and len(schema_name({"title": "x" * 99})) == 64
    user = [{"role": "user", "content": "hi"}]
    assert with_instruction(user, "JSON!") == [{"role": "system", "content": "JSON!"}, *user]
    assert user == [{"role": "user", "content": "hi"}]  # not mutated


def test_openai_with_call_structured_end_to_end():
    fenced = '```json\n{"subject": "Ana", "year": "2023", "tags": ["move",]}\n```'
    server = FakeChatServer(reply("I think it is Ana"), reply(fenced))
    ledger = Accounting()
    fact = call_structured(
        server.model(),
        task="extract",
        version="1",
        messages=PROMPT,
        output_type=Fact,
        ledger=ledger,
    )
    assert fact == Fact(subject="Ana", year=2023, tags=["move"])
    assert server.requests[1]["messages"][-1]["content"].startswith("Your previous answer")
    stats = ledger.summary()["extract"]
    assert (stats["calls"], stats["input_tokens"], stats["output_tokens"]) == (2, 22, 14)
