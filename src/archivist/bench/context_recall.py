"""LoCoMo context evidence recall: how much of what a question needs is in the text the
assistant actually receives, at a token budget (``bench locomo --context``).

Retrieval recall scores a ranked list nobody reads whole; the proxy injects a
context cut to a budget. For each question of categories 1-4 this builds, as of
the question's time (its conversation's last message), the context archivist
would inject for it in its conversation (``MemoryService.context``), and three
baselines packed to the same budget in the same run:

- ``plain-rag``: the top messages by plain RRF (BM25 + dense), best first;
- ``hits``: archivist's own search hits, best first;
- ``recent``: the conversation's last messages that fit (a chat app without memory).

Baseline lines are written as the context writes a message (``[2023-05-08 14:01]
Ana → Lee: text``) and cost what the context's estimate says
(``read.context.estimate_tokens``), so every system pays the same per word.

What counts as an evidence turn being present (strict: provenance, never word
overlap): a message item of that turn; a claim item whose evidence includes it;
or a sentence of any other line (key info, summary, entity) that is, word for word
once history marks and "(since …)" notes are dropped, the text of a claim whose
evidence includes it. A paraphrase (an LLM summary) counts for nothing here.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence

from ..embed.base import forget_query_vectors
from ..model import Hit, Message
from ..read.context import ContextConfig, assemble_context, estimate_tokens
from ..read.context_lines import NOTE, message_line, same_text
from ..read.history import HISTORY_MARK
from ..read.search import PRESETS, SearchTrace, search
from ..read.sentences import SENTENCE_BREAK
from ..service import MemoryService
from ..store.sql import Filters
from .metrics import by_category, mean, percentile

DEFAULT_BUDGETS = (250, 500, 1000, 1500)
SYSTEMS = ("archivist", "plain-rag", "hits", "recent")
SEARCH_K = 120  # enough messages to fill the largest budget
_SPEAKER = re.compile(r"^[A-Z][\w'’ -]{0,40}:\s+")


def _key(sentence: str) -> str:
    """A sentence in the form a claim's text and its copies in other lines share."""
    text = NOTE.sub(" ", sentence.replace(HISTORY_MARK, " "))
    return same_text(_SPEAKER.sub("", text.strip())).rstrip(" .!?…")


class ClaimIndex:
    """A conversation's claims: evidence by claim id and by exact text."""

    def __init__(self, memory: MemoryService, conversation: str) -> None:
        claims = memory.store.list_claims(Filters(conversation=(conversation,)), limit=10**7)
        self.by_id = {str(c.id): set(c.evidence) for c in claims}
        self.by_text: dict[str, set[str]] = {}
        for c in claims:
            self.by_text.setdefault(_key(c.text), set()).update(c.evidence)

    def in_line(self, text: str) -> set[str]:
        """Evidence turns of the claims a line repeats word for word, sentence by sentence."""
        _, sep, body = text.partition(": ")
        found: set[str] = set()
        for sentence in SENTENCE_BREAK.split(body if sep else text):
            found |= self.by_text.get(_key(sentence), set())
        return found


def context_turns(items: Iterable, conversation: str, claims: ClaimIndex) -> set[str]:
    """The turns of ``conversation`` a context's items stand for (see the module docstring)."""
    found: set[str] = set()
    for item in items:
        if item.kind == "message":
            conv, _, mid = item.id.rpartition("/")
            if conv == conversation:
                found.add(mid)
        elif item.kind in ("claim", "standing"):
            found |= claims.by_id.get(item.id, set())
        else:
            found |= claims.in_line(item.text)
    return found


def packed(
    messages: Sequence[Message], budget: int, everyone: Sequence[str] = ()
) -> tuple[list[Message], int]:
    """Messages in the given order while their lines fit ``budget`` (a line that does not
    fit is skipped, a shorter one after it may still go in); and the tokens used.
    ``everyone``: the conversation's participants, as the context writes its lines."""
    out, used = [], 0
    for m in messages:
        cost = estimate_tokens(f"- {message_line(m, everyone)}")
        if used + cost <= budget:
            out.append(m)
            used += cost
    return out, used


def recent(
    messages: Sequence[Message], budget: int, everyone: Sequence[str] = ()
) -> tuple[list[Message], int]:
    """The conversation's last messages that fit ``budget``, newest first, contiguous."""
    out, used = [], 0
    for m in reversed(messages):
        cost = estimate_tokens(f"- {message_line(m, everyone)}")
        if used + cost > budget:
            break
        out.append(m)
        used += cost
    return out, used


def run_context_recall(
    memory: MemoryService,
    questions: Sequence[tuple[str, dict]],
    budgets: Sequence[int] = DEFAULT_BUDGETS,
    progress: Callable[[str, int, int], None] | None = None,
    ablations: Mapping[str, ContextConfig] | None = None,
) -> dict:
    """Evidence recall of each system's context per budget and category, tokens used and
    archivist's assembly latency. ``questions``: (conversation, LoCoMo QA item); an item
    may name the ``person`` whose turn it is, and a ``pair`` id listed under ``missed``
    when archivist's context lacks its evidence. ``ablations``: further systems, each
    archivist's context assembled with another configuration, scored alike."""
    systems = (*SYSTEMS, *(ablations or {}))
    asked = {
        cid: max(m.timestamp for _, m in memory.store.conversation_messages(cid))
        for cid in {cid for cid, _ in questions}
    }
    logs = {cid: [m for _, m in memory.store.conversation_messages(cid)] for cid in asked}
    everyone = {cid: memory.store.participants(cid) or [] for cid in asked}
    indexes = {cid: ClaimIndex(memory, cid) for cid in asked}
    people = memory.people()
    rows: dict[str, dict[int, list[tuple[str, float]]]] = {
        s: {b: [] for b in budgets} for s in systems
    }
    tokens: dict[str, dict[int, list[int]]] = {s: {b: [] for b in budgets} for s in systems}
    seconds: dict[int, list[float]] = {b: [] for b in budgets}
    other_seconds = {name: {b: [] for b in budgets} for name in ablations or {}}
    missed: dict[int, list[str]] = {b: [] for b in budgets}
    for n, (cid, q) in enumerate(questions):
        at, gold, cat = asked[cid], set(q["evidence"]), str(q["category"])
        question = q["question"]
        hits = memory.search(question, conversation=cid, k=SEARCH_K, at=at, route=True)
        rag = _plain_rag(memory, question, cid, people)
        for b in budgets:
            forget_query_vectors()  # each timed assembly embeds its turn, as a new turn does
            t = time.perf_counter()
            ctx = memory.context(
                question, person=q.get("person"), conversation=cid, budget_tokens=b, at=at
            )
            seconds[b].append(time.perf_counter() - t)
            shown = {
                "archivist": (context_turns(ctx.items, cid, indexes[cid]), ctx.tokens),
                "plain-rag": _ids(packed([h.message for h in rag], b, everyone[cid])),
                "hits": _ids(packed([h.message for h in hits], b, everyone[cid])),
                "recent": _ids(recent(logs[cid], b, everyone[cid])),
            }
            for name, config in (ablations or {}).items():
                forget_query_vectors()
                t = time.perf_counter()
                other = assemble_context(
                    memory.core,
                    question,
                    person=q.get("person"),
                    conversation=cid,
                    budget_tokens=b,
                    at=at,
                    config=config,
                )
                other_seconds[name][b].append(time.perf_counter() - t)
                shown[name] = (context_turns(other.items, cid, indexes[cid]), other.tokens)
            for system, (turns, used) in shown.items():
                rows[system][b].append((cat, len(gold & turns) / len(gold)))
                tokens[system][b].append(used)
            if "pair" in q and not gold & shown["archivist"][0]:
                missed[b].append(q["pair"])
        if progress:
            progress("contexts", n + 1, len(questions))
    return {
        "budgets": list(budgets),
        "recall": {s: {str(b): by_category(rows[s][b]) for b in budgets} for s in systems},
        "tokens_used": {
            s: {str(b): round(mean(tokens[s][b]), 1) for b in budgets} for s in systems
        },
        "assembly_ms": _ms(seconds),
        "ablation_assembly_ms": {name: _ms(s) for name, s in other_seconds.items()},
        "counting": "message item, claim evidence, or a claim's exact text in another line",
        "missed": {str(b): ids for b, ids in missed.items() if ids},
    }


def _ms(seconds: Mapping[int, list[float]]) -> dict[str, dict[str, float]]:
    """p50 and p95 in milliseconds per budget."""
    return {
        str(b): {
            "p50": round(percentile([x * 1000 for x in xs], 50), 2),
            "p95": round(percentile([x * 1000 for x in xs], 95), 2),
        }
        for b, xs in seconds.items()
    }


def _ids(found: tuple[list[Message], int]) -> tuple[set[str], int]:
    messages, used = found
    return {m.id for m in messages}, used


def _plain_rag(memory: MemoryService, question: str, cid: str, people: list[str]) -> list[Hit]:
    return search(
        memory.store,
        memory.embedder,
        question,
        Filters(conversation=cid),
        SEARCH_K,
        PRESETS["rrf"],
        people,
        SearchTrace(),
    )
