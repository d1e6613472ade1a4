"""Serve a local GGUF model over HTTP as an OpenAI-compatible endpoint on loopback.

``python -m archivist.llm.local_server MODEL.gguf [--port 8089] [--threads 1]``

``ARCHIVIST_LLM=local`` runs the model inside archivist's own process. This
serves the same model (llama.cpp's own server, embedded by ``xllamacpp``) to
other processes instead, so archivist can reach it the way it reaches a hosted
model — ``ARCHIVIST_LLM=openai`` with ``ARCHIVIST_LLM_BASE_URL`` set to the
printed address — and the OpenAI client path (JSON schema in
``response_format``, retries, timeouts) runs end to end against a real,
imperfect model. It listens on 127.0.0.1 only; ``--api-key`` makes it refuse
requests without that key.
"""

from __future__ import annotations

import argparse
import signal
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from .local_llama import require_xllamacpp


def start(
    model: Path, *, port: int, threads: int = 0, context: int = 8192, api_key: str = ""
) -> object:
    """The running llama.cpp server (it serves until the returned object is dropped)."""
    xlc = require_xllamacpp()
    params = xlc.CommonParams()
    params.model.path = str(model)
    params.n_ctx = context
    params.n_parallel = 1  # one slot: requests queue rather than split the cache
    params.port = port
    params.hostnames = ["127.0.0.1"]
    params.verbosity = 1
    if threads:
        params.cpuparams.n_threads = threads
        params.cpuparams_batch.n_threads = threads
    if api_key:
        params.api_keys = [api_key]
    return xlc.Server(params)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m archivist.llm.local_server",
        description="Serve a GGUF model on 127.0.0.1 as an OpenAI-compatible endpoint.",
    )
    parser.add_argument("model", type=Path, help="the .gguf file")
    parser.add_argument("--port", type=int, default=8089)
    parser.add_argument("--threads", type=int, default=0, help="0: llama.cpp's default")
    parser.add_argument("--context", type=int, default=8192, help="KV cache size in tokens")
    parser.add_argument("--api-key", default="", help="require this bearer key")
    args = parser.parse_args(argv)
    if not args.model.is_file():
        parser.exit(1, f"error: no GGUF file at {args.model}\n")
    started = time.monotonic()
    try:
        server = start(
            args.model,
            port=args.port,
            threads=args.threads,
            context=args.context,
            api_key=args.api_key,
        )
    except Exception as e:  # noqa: BLE001 - xllamacpp missing, a bad file, a port in use: one line
        # llama.cpp logs from C without always ending its line: start the error on a line of its own
        parser.exit(1, f"\nerror: could not serve {args.model}: {e}\n")
    print(
        f"serving {args.model.name} at http://127.0.0.1:{args.port}/v1 "
        f"(loaded in {time.monotonic() - started:.1f} s); Ctrl-C stops",
        flush=True,
    )
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        stop.wait()
    except KeyboardInterrupt:
        pass
    del server
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
