"""Schema-constrained LLM calls: validated, repaired or retried, cached and counted.

``call_structured`` is the one way the rest of archivist asks a model for
data: it returns a validated pydantic object or raises (never an empty result
standing in for a parse error). ``run_parallel`` fans calls out over threads
and hands every item's result *or exception* back in order.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from .base import TRANSIENT_ERRORS, ChatModel, Completion, LLMBadOutput, LLMRateLimited
from .repair import parse_json

if TYPE_CHECKING:
    from pydantic import BaseModel

    from .accounting import Accounting
    from .cache import ResponseCache

T = TypeVar("T", bound="BaseModel")
I = TypeVar("I")  # noqa: E741 - item type of run_parallel
R = TypeVar("R")

MAX_RETRY_AFTER = 10.0  # seconds; a server asking for a longer pause fails the request now
MAX_ERRORS_SHOWN = 8  # validation errors quoted back to the model per retry


def cache_key(model: str, task: str, version: str, messages: list[dict], schema: dict) -> str:
    """sha256 over everything that shapes the answer, so a changed prompt or model misses."""
    payload = json.dumps(
        [model, task, version, messages, schema],
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
        default=str,
    )
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


@dataclass
class _Tally:
    """What one request spent across its attempts, recorded once at the end."""

    input_tokens: int = 0
    output_tokens: int = 0
    seconds: float = 0.0
    calls: int = 0

    def record(self, ledger: Accounting | None, task: str, *, failed: bool) -> None:
        if ledger is not None:
            ledger.record(
                task,
                input_tokens=self.input_tokens,
                output_tokens=self.output_tokens,
                seconds=self.seconds,
                failed=failed,
                retried=max(self.calls - 1, 0),
            )


def call_structured(
    model: ChatModel,
    *,
    task: str,
    version: str,
    messages: list[dict],
    output_type: type[T],
    cache: ResponseCache | None = None,
    ledger: Accounting | None = None,
    max_attempts: int = 3,
    limiter: threading.Semaphore | None = None,
    backoff: float = 1.0,
    max_tokens: int | None = None,
) -> T:
    """Ask ``model`` for an ``output_type``; LLMBadOutput/LLMError if none comes back valid.

    Bad answers are shown back to the model with their errors; timeouts and rate
    limits are waited out; both spend the same ``max_attempts`` budget. LLMRefused
    and other LLM errors end the request at once.
    """
    if max_attempts < 1:
        raise ValueError(f"max_attempts must be >= 1; got {max_attempts}")
    schema = output_type.model_json_schema()
    key = cache_key(model.name, task, version, messages, schema)
    if cache is not None and (hit := _cached(cache, key, output_type)) is not None:
        if ledger is not None:
            ledger.record(task, input_tokens=0, output_tokens=0, seconds=0.0, cache_hit=True)
        return hit
    tally, conversation = _Tally(), list(messages)
    bad: tuple[str, list[str]] | None = None
    for attempt in range(1, max_attempts + 1):
        try:
            completion = _complete(model, conversation, schema, limiter, max_tokens, tally)
        except TRANSIENT_ERRORS as e:
            if attempt == max_attempts or _too_long(e):
                tally.record(ledger, task, failed=True)
                raise
            time.sleep(_delay(e, backoff, attempt))
            continue
        except Exception:  # LLM errors and bugs alike: the call still happened
            tally.record(ledger, task, failed=True)
            raise
        value, errors = _validate(completion.text, output_type)
        if value is not None:
            if cache is not None:
                cache.put(key, task, model.name, value.model_dump_json())
            tally.record(ledger, task, failed=False)
            return value
        bad = (completion.text, errors)
        conversation += _correction(completion, errors)
    tally.record(ledger, task, failed=True)
    raw, errors = bad if bad is not None else ("", ["no answer"])
    raise LLMBadOutput(task, raw, errors, max_attempts)


def _complete(
    model: ChatModel,
    messages: list[dict],
    schema: dict,
    limiter: threading.Semaphore | None,
    max_tokens: int | None,
    tally: _Tally,
) -> Completion:
    """One model call under the concurrency limit, its cost added to ``tally``."""
    started = time.perf_counter()
    tally.calls += 1
    try:
        with limiter if limiter is not None else nullcontext():
            completion = model.complete(messages, schema=schema, max_tokens=max_tokens)
    finally:
        tally.seconds += time.perf_counter() - started
    tally.input_tokens += completion.input_tokens
    tally.output_tokens += completion.output_tokens
    return completion


def _cached(cache: ResponseCache, key: str, output_type: type[T]) -> T | None:
    """A cached answer, re-validated; an entry that no longer validates counts as a miss."""
    text = cache.get(key)
    if text is None:
        return None
    try:
        return output_type.model_validate_json(text)
    except ValueError:
        return None


def _validate(text: str, output_type: type[T]) -> tuple[T | None, list[str]]:
    """The parsed object, or None and the reasons it is not one."""
    try:
        return output_type.model_validate(parse_json(text)), []
    except ValueError as e:  # pydantic's ValidationError is a ValueError too
        return None, _error_lines(e)


def _error_lines(error: ValueError) -> list[str]:
    """Short "field: problem" lines from a pydantic error, or the parse error's message."""
    details = getattr(error, "errors", None)
    if not callable(details):
        return [f"not valid JSON: {error}"]
    lines = []
    for item in details(include_url=False):
        where = ".".join(str(part) for part in item.get("loc", ())) or "(root)"
        lines.append(f"{where}: {item.get('msg', 'invalid')}")
    return lines or [str(error)]


def _correction(completion: Completion, errors: list[str]) -> list[dict]:
    """The bad answer and a short note on what was wrong, so the next attempt can fix it."""
    shown = errors[:MAX_ERRORS_SHOWN]
    if len(errors) > len(shown):
        shown.append(f"… and {len(errors) - len(shown)} more")
    note = "Your previous answer was invalid:\n" + "\n".join(f"- {line}" for line in shown)
    if completion.finish_reason == "length":
        note += "\nIt was cut off at the length limit; answer more briefly."
    note += "\nReply with JSON only matching the schema."
    return [
        {"role": "assistant", "content": completion.text},
        {"role": "user", "content": note},
    ]


def _too_long(error: Exception) -> bool:
    """True when the server asked for a pause longer than we are willing to block for."""
    return isinstance(error, LLMRateLimited) and (error.retry_after or 0.0) > MAX_RETRY_AFTER


def _delay(error: Exception, backoff: float, attempt: int) -> float:
    """The server's own Retry-After when it gave one, else exponential backoff."""
    wait = getattr(error, "retry_after", None)
    return wait if wait is not None else backoff * 2 ** (attempt - 1)


def run_parallel(fn: Callable[[I], R], items: Iterable[I], limit: int) -> list[R | Exception]:
    """``fn`` over ``items`` on up to ``limit`` threads: results in order, each failure in place.

    Exceptions are returned, not raised, so one bad item cannot hide the others;
    the caller must look at each result (nothing is dropped silently).
    """
    if limit < 1:
        raise ValueError(f"limit must be >= 1; got {limit}")
    todo = list(items)
    if limit == 1 or len(todo) <= 1:
        return [_capture(fn, item) for item in todo]
    with ThreadPoolExecutor(max_workers=min(limit, len(todo)), thread_name_prefix="llm") as pool:
        return list(pool.map(lambda item: _capture(fn, item), todo))


def _capture(fn: Callable[[I], R], item: I) -> R | Exception:
    """The result of ``fn(item)`` or the exception it raised."""
    try:
        return fn(item)
    except Exception as e:  # returned to the caller in the item's place, never dropped
        return e
