"""The offline llama.cpp ChatModel: assembling a GGUF, mapping llama.cpp's stream, a real run.

The fast tests need neither xllamacpp nor a model: a scripted stand-in for
llama.cpp's in-process server plays the stream. The slow test runs a real
extraction when ARCHIVIST_LOCAL_GGUF names a GGUF file (read at import, since
the suite's autouse fixture clears ARCHIVIST_* variables per test).
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
import time
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from archivist.errors import ConfigError, InputError
from archivist.llm import LLMError, LLMTimeout, local_llama
from archivist.llm.local_llama import (
    KNOWN_MODELS,
    LocalLlamaChatModel,
    assemble_gguf,
    file_sha256,
)
from conftest import make_conversation

LOCAL_GGUF = os.environ.get("ARCHIVIST_LOCAL_GGUF", "")
LOCAL_THREADS = int(os.environ.get("ARCHIVIST_LOCAL_THREADS", "0") or 0)


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def write_parts(folder: Path, blobs: list[bytes]) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i, blob in enumerate(blobs, start=1):
        path = folder / f"part{i:02d}.bin"
        path.write_bytes(blob)
        paths.append(path)
    return paths


def write_wheel(path: Path, member: str, blob: bytes) -> Path:
    """A wheel shaped like the chunk packages: one ``<pkg>/data/partNN.bin`` inside."""
    with zipfile.ZipFile(path, "w") as wheel:
        wheel.writestr(member, blob)
        wheel.writestr(member.split("/")[0] + "/__init__.py", "")
    return path


# --------------------------------------------------------------------------------------
# assemble_gguf
# --------------------------------------------------------------------------------------

BLOBS = [b"GGUF" + bytes(range(256)) * 50, b"middle" * 999, b"end"]


def test_assemble_joins_parts_in_order_and_verifies(tmp_path: Path) -> None:
    parts = write_parts(tmp_path / "parts", BLOBS)
    dest = tmp_path / "models" / "m.gguf"  # the folder is created
    assert assemble_gguf(dest, parts, sha(b"".join(BLOBS)).upper()) == dest
    assert dest.read_bytes() == b"".join(BLOBS)
    assert [p.name for p in dest.parent.iterdir()] == ["m.gguf"]


def test_assemble_reads_the_chunk_packages_wheels(tmp_path: Path) -> None:
    wheels = [
        write_wheel(tmp_path / f"pkg_part{i}-0.1-py3-none-any.whl", f"pkg_part{i}/data/p{i}.bin", b)
        for i, b in enumerate(BLOBS, start=1)
    ]
    dest = assemble_gguf(tmp_path / "m.gguf", wheels, sha(b"".join(BLOBS)))
    assert dest.read_bytes() == b"".join(BLOBS)


def test_assemble_mismatch_leaves_no_file(tmp_path: Path) -> None:
    parts = write_parts(tmp_path / "parts", BLOBS)
    dest = tmp_path / "out" / "m.gguf"
    with pytest.raises(InputError, match="misordered"):
        assemble_gguf(dest, list(reversed(parts)), sha(b"".join(BLOBS)))
    assert not dest.exists()
    assert list(dest.parent.iterdir()) == []  # no .partial left behind


def test_assemble_mismatch_keeps_an_existing_file(tmp_path: Path) -> None:
    dest = tmp_path / "m.gguf"
    dest.write_bytes(b"the good model")
    with pytest.raises(InputError):
        assemble_gguf(dest, write_parts(tmp_path / "parts", BLOBS), "0" * 64)
    assert dest.read_bytes() == b"the good model"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.gguf", "parts"]


def test_assemble_rejects_bad_input(tmp_path: Path) -> None:
    parts = write_parts(tmp_path / "parts", BLOBS)
    with pytest.raises(InputError, match="64 hex"):
        assemble_gguf(tmp_path / "m.gguf", parts, "abc")
    with pytest.raises(InputError, match="missing part"):
        assemble_gguf(tmp_path / "m.gguf", [*parts, tmp_path / "nope.bin"], "0" * 64)
    with pytest.raises(InputError, match="at least one"):
        assemble_gguf(tmp_path / "m.gguf", [], "0" * 64)
    bad_wheel = tmp_path / "bad.whl"
    with zipfile.ZipFile(bad_wheel, "w") as z:
        z.writestr("pkg/__init__.py", "")
    with pytest.raises(InputError, match="data/"):
        assemble_gguf(tmp_path / "m.gguf", [bad_wheel], "0" * 64)
    assert not (tmp_path / "m.gguf").exists()


def test_assemble_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    parts = write_parts(tmp_path / "parts", BLOBS)
    dest = tmp_path / "m.gguf"
    digest = sha(b"".join(BLOBS))
    assert local_llama.main([str(dest), *map(str, parts), "--sha256", digest]) == 0
    assert digest in capsys.readouterr().out
    with pytest.raises(SystemExit) as e:  # a known model needs its own number of parts
        local_llama.main([str(dest), *map(str, parts), "--model", next(iter(KNOWN_MODELS))])
    assert e.value.code == 2


def test_known_models_are_pinned() -> None:
    for model in KNOWN_MODELS.values():
        assert len(model.sha256) == 64 and model.parts == int(model.packages.split("..")[1][:-1])


# --------------------------------------------------------------------------------------
# LocalLlamaChatModel without llama.cpp
# --------------------------------------------------------------------------------------


@pytest.fixture
def gguf(tmp_path: Path) -> Path:
    path = tmp_path / "tiny-model.gguf"
    path.write_bytes(b"GGUF not really a model")
    return path


def test_missing_package_says_how_to_install(gguf: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "xllamacpp", None)  # find_spec now reports it absent
    assert importlib.util.find_spec("xllamacpp") is None
    with pytest.raises(LLMError, match=r"pip install 'archivist\[local\]'"):
        LocalLlamaChatModel(gguf)


def test_missing_model_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="GGUF"):
        LocalLlamaChatModel(tmp_path / "absent.gguf")
    with pytest.raises(ConfigError):
        LocalLlamaChatModel("")


class ScriptedServer:
    """Stands in for ``xllamacpp.Server``: plays chunks into the stream callback, keeps requests.

    Like llama.cpp, it stops the moment the callback returns True.
    """

    def __init__(self, *chunks: dict, delay: float = 0.0) -> None:
        self.chunks = chunks
        self.delay = delay
        self.requests: list[dict] = []
        self.delivered = 0
        self.active = self.most_active = 0

    def handle_chat_completions(self, request: dict, callback) -> None:
        self.requests.append(request)
        self.active += 1
        self.most_active = max(self.most_active, self.active)
        try:
            for chunk in self.chunks:
                time.sleep(self.delay)
                self.delivered += 1
                if callback(chunk):
                    return
        finally:
            self.active -= 1


def delta(text: str, finish: str | None = None, **extra) -> dict:
    choice = {"index": 0, "delta": {"content": text}, "finish_reason": finish}
    return {"object": "chat.completion.chunk", "model": "qwen", "choices": [choice], **extra}


@pytest.fixture
def model(gguf: Path, monkeypatch: pytest.MonkeyPatch) -> LocalLlamaChatModel:
    """A model whose llama.cpp is never imported: tests put a ScriptedServer in its place."""
    monkeypatch.setattr(local_llama, "require_xllamacpp", lambda: None)
    return LocalLlamaChatModel(gguf, max_tokens=77)


def test_name_is_stem_and_sha256_prefix(model: LocalLlamaChatModel, gguf: Path) -> None:
    digest = sha(gguf.read_bytes())
    assert file_sha256(gguf) == digest
    assert model.name == f"local:tiny-model@{digest[:8]}"


def test_stream_maps_to_completion(model: LocalLlamaChatModel) -> None:
    usage = {"prompt_tokens": 31, "completion_tokens": 4, "total_tokens": 35}
    model._server = ScriptedServer(
        delta('{"a"'), delta(": 1}"), delta("", "stop"), {"choices": [], "usage": usage}
    )
    schema = {"title": "Out", "type": "object", "properties": {"a": {"type": "integer"}}}
    done = model.complete([{"role": "user", "content": "hi"}], schema=schema)
    assert (done.text, done.input_tokens, done.output_tokens) == ('{"a": 1}', 31, 4)
    assert done.finish_reason == "stop" and done.model == model.name
    request = model._server.requests[0]
    assert request["response_format"]["json_schema"] == {"name": "Out", "schema": schema}
    assert request["max_tokens"] == 77 and request["stream"] is True


def test_token_counts_fall_back_to_timings(model: LocalLlamaChatModel) -> None:
    model._server = ScriptedServer(
        delta("x"), delta("", "length", timings={"prompt_n": 9, "predicted_n": 1})
    )
    done = model.complete([{"role": "user", "content": "hi"}], max_tokens=1)
    assert (done.input_tokens, done.output_tokens, done.finish_reason) == (9, 1, "length")
    assert "response_format" not in model._server.requests[0]
    assert model._server.requests[0]["max_tokens"] == 1


def test_server_error_becomes_llm_error(model: LocalLlamaChatModel) -> None:
    error = {"error": {"code": 400, "type": "exceed_context_size_error", "message": "too long"}}
    model._server = ScriptedServer(error)
    with pytest.raises(LLMError, match="exceed_context_size_error: too long"):
        model.complete([{"role": "user", "content": "hi"}])


def test_a_truncated_stream_is_an_error(model: LocalLlamaChatModel) -> None:
    model._server = ScriptedServer(delta('{"a": '))
    with pytest.raises(LLMError, match="without a finish reason"):
        model.complete([{"role": "user", "content": "hi"}])


def test_calls_from_many_threads_run_one_at_a_time(model: LocalLlamaChatModel) -> None:
    model._server = ScriptedServer(delta("a"), delta("b", "stop"), delay=0.005)
    with ThreadPoolExecutor(4) as pool:
        texts = list(pool.map(lambda _: model.complete([]).text, range(8)))
    assert texts == ["ab"] * 8
    assert model._server.most_active == 1


def test_timeout_cancels_the_generation(model: LocalLlamaChatModel) -> None:
    model._server = ScriptedServer(*[delta("tok")] * 50, delta("", "stop"), delay=0.01)
    with pytest.raises(LLMTimeout, match="cancelled"):
        model.complete([{"role": "user", "content": "hi"}], timeout=0.05)
    assert model._server.delivered < 40  # the server was told to stop well before the end


def test_an_answer_finished_at_the_deadline_is_kept(model: LocalLlamaChatModel) -> None:
    model._server = ScriptedServer(delta("ok", "stop"), delay=0.02)
    assert model.complete([{"role": "user", "content": "hi"}], timeout=0.01).text == "ok"


# --------------------------------------------------------------------------------------
# A real model, end to end (slow; opt-in)
# --------------------------------------------------------------------------------------

PLANS = (
    (
        ("Maya", "Hi Tom! Yesterday I finally signed up for the pottery class at the library."),
        ("Tom", "Nice, Maya. How long does the course run?"),
        ("Maya", "Six weeks, every Tuesday evening, starting next week."),
        ("Tom", "I started physiotherapy for my knee; ten sessions over the next month."),
        ("Maya", "Oh no, is it the old football injury?"),
        ("Tom", "Yes, it flared up when I went hiking in the Pyrenees last weekend."),
    ),
    (
        ("Tom", "The physio says I can jog again in two weeks."),
        ("Maya", "Great! My first pottery class went well, I made a wobbly bowl."),
        ("Tom", "Will you bring it to my birthday dinner on Saturday?"),
        ("Maya", "Sure. My brother Jonas is visiting from Berlin for ten days, can he come?"),
        ("Tom", "Of course, the more the merrier."),
        ("Maya", "Perfect, we will be there at seven."),
    ),
)


def _local_model_ready() -> str:
    """Why the real-model test cannot run here, or '' when it can."""
    if not LOCAL_GGUF:
        return "set ARCHIVIST_LOCAL_GGUF to a GGUF file to run the local-model test"
    if not Path(LOCAL_GGUF).is_file():
        return f"ARCHIVIST_LOCAL_GGUF={LOCAL_GGUF!r} is not a file"
    if importlib.util.find_spec("xllamacpp") is None:
        return "xllamacpp is not installed (pip install 'archivist[local]')"
    return ""


@pytest.mark.slow
@pytest.mark.skipif(bool(_local_model_ready()), reason=_local_model_ready() or "ready")
def test_real_local_model_extracts_a_conversation(tmp_path: Path) -> None:
    from archivist.service import MemoryService
    from archivist.testing import FakeEmbedder

    conv = make_conversation("maya-tom", PLANS, people=("Maya", "Tom"))
    llm = LocalLlamaChatModel(LOCAL_GGUF, threads=LOCAL_THREADS)
    with MemoryService(tmp_path / "m.db", embedder=FakeEmbedder(), llm=llm) as mem:
        mem.add(conv, extract=False)
        started = time.perf_counter()
        report = mem.extract()
        seconds = time.perf_counter() - started
        summary = mem.llm_summary()
        print(f"\n{llm.name}: load {llm.load_seconds:.1f} s, extract {seconds:.1f} s")
        print(f"report: {report}")
        print(f"llm: {summary['tasks']}")

        assert mem.store.extraction_state(conv.id) == {1: 6, 2: 6}
        assert report.sessions == 2
        stored = mem.store.conversation_messages(conv.id)
        assert [(m.id, m.speaker, m.text) for _, m in stored] == [
            (m.id, m.speaker, m.text) for m in conv.messages
        ]
        ids = {m.id for m in conv.messages}
        claims = mem.claims(conversation=conv.id, limit=1000)
        for claim in claims:
            print(f"  [{claim.speaker} | {claim.kind} | {claim.method}] {claim.text}")
            assert claim.speaker in conv.participants
            assert claim.evidence and set(claim.evidence) <= ids
        assert summary["model"] == llm.name


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
@pytest.mark.skipif(bool(_local_model_ready()), reason=_local_model_ready() or "ready")
def test_served_local_model_runs_a_state_scenario_through_the_openai_client(
    tmp_path: Path,
) -> None:
    """The path a user with a hosted model takes: the model served on loopback
    (archivist.llm.local_server), reached by the official ``openai`` client
    (ARCHIVIST_LLM=openai), extracting, reconciling, consolidating and answering
    one state scenario of the bundled suite. The model is small and imperfect, so
    this checks that every step finishes and the figures are computed, not that
    the answers are right (``archivist bench state`` reports those)."""
    import subprocess
    import urllib.request

    from archivist.bench.state import DEFAULT_SUITE, load_suite, run_state
    from archivist.config import Settings
    from archivist.testing import FakeEmbedder

    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "archivist.llm.local_server", LOCAL_GGUF, "--port", str(port)]
        + (["--threads", str(LOCAL_THREADS)] if LOCAL_THREADS else []),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert server.stdout is not None
        assert "serving" in server.stdout.readline()  # printed once the model is loaded
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=30) as r:
            assert r.status == 200
        settings = Settings(
            llm="openai",
            llm_model="qwen",
            llm_base_url=f"http://127.0.0.1:{port}/v1",
            llm_api_key="none",
            llm_timeout=600,
        )
        (scenario,) = [s for s in load_suite(DEFAULT_SUITE) if s.id == "diet-priya"]
        result = run_state([scenario], settings=settings, embedder=FakeEmbedder())
        print(f"\n{result['llm_model']}: {result['overall']} in {result['seconds']} s")
        print(f"job errors: {result['job_errors']}")
        assert result["llm"] and result["llm_model"].startswith("openai:")
        assert result["probes"] == len(scenario.probes)
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_registry_builds_the_local_model_from_settings(tmp_path: Path) -> None:
    from importlib.util import find_spec

    from archivist.config import Settings
    from archivist.errors import ConfigError
    from archivist.llm import check_llm, get_chat_model
    from archivist.llm.base import LLMError

    gguf = tmp_path / "tiny.gguf"
    gguf.write_bytes(b"GGUF")  # never loaded: construction reads nothing but the path
    settings = Settings(llm="local", llm_model=str(gguf))
    if find_spec("xllamacpp") is None:  # the optional extra is not installed (as in CI)
        with pytest.raises(LLMError, match=r"archivist\[local\]"):
            get_chat_model(settings)
    else:
        assert type(get_chat_model(settings)).__name__ == "LocalLlamaChatModel"
    with pytest.raises(ConfigError, match="GGUF"):
        check_llm(Settings(llm="local"))
