"""The trained judge: a MiniLM cross-encoder (int8 ONNX) shipped inside the package.

Trained by ``archivist train judge`` (archivist/train/) on the team's written
pairs (training/judge/), one network with one head for all tasks (three logits for
``relation``, four for ``support``, nine for ``kind``, two for ``when``; three for
``serves`` in a model trained with training/serves/); each task reads only its own. The
tokenizer is the embedder's (same vocabulary). onnxruntime and tokenizers load
on the first judgement, so constructing costs nothing.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..embed.local import TOKENIZER_PATH, padded
from ..errors import ConfigError
from .base import (
    GoalPair,
    RelationPair,
    Statement,
    SupportPair,
    TimeMention,
    Verdict,
    encode_kind,
    encode_relation,
    encode_serves,
    encode_support,
    encode_when,
)

MODEL_DIR = Path(__file__).with_name("data")
MODEL_FILE = "judge.onnx"
CARD_FILE = "judge.json"  # labels, head offsets, token limit, how it was trained


def pair_tokenizer(max_tokens: int) -> Any:
    """The embedder's tokenizer, unpadded, cutting a pair to ``max_tokens`` together
    (training reads pairs with it too)."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(TOKENIZER_PATH))
    tokenizer.no_padding()
    tokenizer.enable_truncation(max_length=max_tokens, strategy="longest_first")
    return tokenizer


class TrainedJudge:
    """Judges pairs with the shipped cross-encoder; one thread by default."""

    def __init__(self, folder: Path | None = None, threads: int = 1, batch_size: int = 32) -> None:
        if threads < 0 or batch_size < 1:
            raise ValueError("threads must be >= 0 and batch_size >= 1")
        self.folder = folder or MODEL_DIR
        self.threads = threads
        self.batch_size = batch_size
        self._lock = threading.Lock()
        self._session: Any = None
        self._tokenizer: Any = None
        self._card: dict = {}
        self.name = "model"

    def __repr__(self) -> str:
        return f"TrainedJudge(folder={str(self.folder)!r}, threads={self.threads})"

    @property
    def card(self) -> dict:
        """What the shipped model says of itself (judge.json)."""
        self._load()
        return self._card

    def relations(self, pairs: Sequence[RelationPair]) -> list[Verdict]:
        """One verdict per pair: ends, continues or unrelated."""
        return self._judge("relation", [encode_relation(p) for p in pairs])

    def supports(self, pairs: Sequence[SupportPair]) -> list[Verdict]:
        """One verdict per pair: yes, no, answers or neither."""
        return self._judge("support", [encode_support(p) for p in pairs])

    def kinds(self, statements: Sequence[Statement]) -> list[Verdict]:
        """One verdict per statement: state, preference, ... or chit-chat."""
        return self._judge("kind", [encode_kind(s) for s in statements])

    def whens(self, mentions: Sequence[TimeMention]) -> list[Verdict]:
        """One verdict per time mention: ahead or behind. A model trained before the task
        existed answers unsure (p 0), so the sentence's tense places the time."""
        self._load()
        if "when" not in self._card["labels"]:
            return [Verdict("ahead", 0.0, "no when task in this model") for _ in mentions]
        return self._judge("when", [encode_when(m) for m in mentions])

    def serves(self, pairs: Sequence[GoalPair]) -> list[Verdict]:
        """One verdict per pair: serves, hinders or unrelated. A model trained before the
        task existed answers unsure (p 0), so nothing is linked."""
        self._load()
        if "serves" not in self._card["labels"]:
            return [Verdict("unrelated", 0.0, "no serves task in this model") for _ in pairs]
        return self._judge("serves", [encode_serves(p) for p in pairs])

    def probabilities(self, task: str, segments: Sequence[tuple[str, str]]) -> np.ndarray:
        """The task's label probabilities, one row per pair (columns: the card's labels)."""
        session, tokenizer = self._load()
        if task not in self._card["labels"]:
            raise ConfigError(
                f"the trained judge in {self.folder} has no {task!r} task; train it again "
                "(archivist train judge) or set ARCHIVIST_JUDGE=rules"
            )
        labels = self._card["labels"][task]
        start = self._card["offsets"][task]
        out = np.zeros((len(segments), len(labels)), dtype=np.float32)
        if not segments:
            return out
        encodings = tokenizer.encode_batch([tuple(s) for s in segments])
        order = sorted(range(len(segments)), key=lambda i: len(encodings[i].ids))
        for at in range(0, len(order), self.batch_size):
            rows = order[at : at + self.batch_size]
            logits = self._run(session, [encodings[i] for i in rows])
            task_logits = logits[:, start : start + len(labels)]
            task_logits = task_logits - task_logits.max(axis=1, keepdims=True)
            exp = np.exp(task_logits)
            out[rows] = exp / exp.sum(axis=1, keepdims=True)
        return out

    def _judge(self, task: str, segments: list[tuple[str, str]]) -> list[Verdict]:
        probs = self.probabilities(task, segments)
        labels = self._card["labels"][task]
        return [Verdict(labels[int(row.argmax())], float(row.max())) for row in probs]

    @staticmethod
    def _run(session: Any, encodings: list[Any]) -> np.ndarray:
        ids, mask, types = padded(encodings)
        (logits,) = session.run(
            ["logits"], {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
        )
        return logits

    def _load(self) -> tuple[Any, Any]:
        if self._session is not None:
            return self._session, self._tokenizer
        with self._lock:
            if self._session is None:
                self._card = self._read_card()
                self._tokenizer = pair_tokenizer(int(self._card["max_tokens"]))
                self._session = self._make_session()
        return self._session, self._tokenizer

    def _read_card(self) -> dict:
        path = self.folder / CARD_FILE
        if not path.is_file() or not (self.folder / MODEL_FILE).is_file():
            raise ConfigError(
                f"the trained judge is missing from {self.folder}; reinstall archivist, "
                "train one (archivist train judge) or set ARCHIVIST_JUDGE=rules"
            )
        return json.loads(path.read_text(encoding="utf-8"))

    def _make_session(self) -> Any:
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = self.threads
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        return ort.InferenceSession(
            str(self.folder / MODEL_FILE), options, providers=["CPUExecutionProvider"]
        )
