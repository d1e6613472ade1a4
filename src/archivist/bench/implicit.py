"""Implicit recall (``bench implicit``): does a cue said once reach the context when a
later message needs it but shares almost no words with it?

A pairs file holds cue/trigger pairs of one person, A, talking with B::

    {"items": [{"id", "kind": "value|goal|state|lesson",
                "cue": [{"who": "A|B", "text": ...}, ...], "cue_turn": 0,
                "trigger": "A's message weeks later"}]}

Each cue becomes a session of its own, stitched into a LoCoMo conversation at a
seeded random point in its first two thirds (between two of its sessions, dated
between them), with A one of that conversation's speakers. After ingest,
extraction and consolidation, each trigger is put as of the conversation's end,
as the turn of A (``person=A``), and the context archivist would inject is scored
at each budget with the systems of ``bench locomo --context`` in the same run
(plain RAG, archivist's hits packed, the most recent messages) and archivist's
context without its standing section (``archivist-no-standing``): a trigger counts
when its cue turn is present (a message line of it, or a claim whose evidence
holds it). Reported per kind.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

from ..errors import InputError
from ..model import Conversation, Message, Session
from ..read.context import DEFAULT_CONTEXT
from ..service import MemoryService

KINDS = ("value", "goal", "state", "lesson")
CUE_PREFIX = "cue"  # message ids of stitched turns: cue:<pair id>:<turn>


def read_pairs(path: Path) -> list[dict]:
    """The pairs of a file, checked: a malformed file is one ``InputError`` naming it."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise InputError(f"{path}: not a readable JSON file ({e})") from None
    items = data.get("items") if isinstance(data, dict) else None
    if not isinstance(items, list) or not items:
        raise InputError(f'{path}: expected {{"items": [...]}} with at least one pair')
    seen: set[str] = set()
    for n, it in enumerate(items):
        where = f"{path} item {n}"
        if not isinstance(it, dict):
            raise InputError(f"{where}: not an object")
        for key in ("id", "kind", "cue", "cue_turn", "trigger"):
            if key not in it:
                raise InputError(f"{where}: lacks {key!r}")
        if it["id"] in seen:
            raise InputError(f"{where}: id {it['id']!r} twice")
        seen.add(it["id"])
        if it["kind"] not in KINDS:
            raise InputError(f"{where}: kind {it['kind']!r} is not one of {', '.join(KINDS)}")
        cue = it["cue"]
        ok = (
            isinstance(cue, list)
            and cue
            and all(
                isinstance(t, dict)
                and t.get("who") in ("A", "B")
                and str(t.get("text", "")).strip()
                for t in cue
            )
        )
        if not ok:
            raise InputError(f"{where}: cue must be a list of turns with who A|B and text")
        turn = it["cue_turn"]
        if not isinstance(turn, int) or not 0 <= turn < len(cue) or cue[turn]["who"] != "A":
            raise InputError(f"{where}: cue_turn must index one of A's turns in cue")
        if not str(it["trigger"]).strip():
            raise InputError(f"{where}: empty trigger")
    return items


def stitch(
    convs: Sequence[Conversation], pairs: Sequence[dict], seed: int = 0
) -> tuple[list[Conversation], list[tuple[str, dict]]]:
    """The conversations with each pair's cue session stitched in, and the triggers as
    questions ``(conversation, {"question", "evidence", "category", "person"})``.

    Pairs go round-robin over the conversations in a seeded order; a cue session goes
    between two sessions of the first two thirds, after those already placed there.
    """
    rng = random.Random(seed)
    order = list(pairs)
    rng.shuffle(order)
    placed: dict[str, list[tuple[int, dict, str, str]]] = {c.id: [] for c in convs}
    questions: list[tuple[str, dict]] = []
    for n, pair in enumerate(order):
        conv = convs[n % len(convs)]
        sessions = sorted({m.session for m in conv.messages})
        last = max(1, (2 * len(sessions)) // 3)
        after = rng.choice(sessions[:last])
        a, b = (conv.participants[0], conv.participants[1])
        if rng.random() < 0.5:
            a, b = b, a
        placed[conv.id].append((after, pair, a, b))
        cue_id = f"{CUE_PREFIX}:{pair['id']}:{pair['cue_turn']}"
        question = {
            "question": pair["trigger"],
            "evidence": [cue_id],
            "category": pair["kind"],
            "person": a,
            "pair": pair["id"],
        }
        questions.append((conv.id, question))
    return [_with_cues(c, placed[c.id]) for c in convs], questions


def _with_cues(conv: Conversation, cues: list[tuple[int, dict, str, str]]) -> Conversation:
    """``conv`` with each cue session after its session, sessions renumbered in order."""
    if not cues:
        return conv
    by_session: dict[int, list[Message]] = {}
    for m in conv.messages:
        by_session.setdefault(m.session, []).append(m)
    starts = {s.number: s.started_at for s in conv.sessions}
    blocks: list[tuple[list[Message], object]] = []
    numbers = sorted(by_session)
    for i, number in enumerate(numbers):
        blocks.append((by_session[number], starts.get(number)))
        here = [c for c in cues if c[0] == number]
        if not here:
            continue
        end = by_session[number][-1].timestamp
        nxt = by_session[numbers[i + 1]][0].timestamp if i + 1 < len(numbers) else None
        gap = (nxt - end) if nxt is not None else timedelta(days=7 * (len(here) + 1))
        for k, (_, pair, a, b) in enumerate(here):
            start = end + gap * (k + 1) / (len(here) + 1)
            turns = [
                Message(
                    id=f"{CUE_PREFIX}:{pair['id']}:{t}",
                    conversation=conv.id,
                    session=0,
                    speaker=a if turn["who"] == "A" else b,
                    text=str(turn["text"]).strip(),
                    timestamp=start + timedelta(seconds=30 * t),
                    addressees=(b if turn["who"] == "A" else a,),
                    session_start=start,
                )
                for t, turn in enumerate(pair["cue"])
            ]
            blocks.append((turns, start))
    messages: list[Message] = []
    sessions: list[Session] = []
    for number, (block, start) in enumerate(blocks, start=1):
        sessions.append(Session(conv.id, number, start))
        for m in block:
            messages.append(replace(m, session=number, seq=len(messages)))
    return replace(conv, messages=tuple(messages), sessions=tuple(sessions))


def run_implicit(
    memory: MemoryService,
    locomo: Path,
    pairs_path: Path,
    budgets: Sequence[int],
    seed: int = 0,
    progress: Callable[[str, int, int], None] | None = None,
) -> dict:
    """Stitch, ingest, extract, consolidate, then score every system's context per kind."""
    from ..load import load_file
    from .context_recall import run_context_recall
    from .locomo import remember

    pairs = read_pairs(pairs_path)
    convs, questions = stitch(load_file(locomo, "locomo"), pairs, seed)
    total = sum(len(c.messages) for c in convs)
    t0 = time.perf_counter()
    remember(memory, convs, progress)
    prepared_s = time.perf_counter() - t0
    without = {"archivist-no-standing": replace(DEFAULT_CONTEXT, standing=False)}
    found = run_context_recall(memory, questions, budgets, progress, ablations=without)
    return {
        "benchmark": "implicit",
        "pairs_file": Path(pairs_path).name,
        "locomo_file": Path(locomo).name,
        "seed": seed,
        "pairs": len(pairs),
        "conversations": len(convs),
        "messages": total,
        "by_kind": {k: sum(1 for p in pairs if p["kind"] == k) for k in KINDS},
        "budgets": found["budgets"],
        "counting": found["counting"],
        "context": found["recall"],
        "tokens_used": found["tokens_used"],
        "assembly_ms": found["assembly_ms"],
        "ablation_assembly_ms": found["ablation_assembly_ms"],
        "missed": found["missed"],
        "prepare_s": round(prepared_s, 1),
        "embedder": memory.embedder.name,
    }


def implicit_table(r: dict) -> str:
    """Share of triggers whose cue reached the context, per system, budget and kind."""
    kinds = [k for k in KINDS if r["by_kind"].get(k)]
    width = max(len("system"), *(len(s) for s in r["context"]))
    head = f"{'system':<{width}} {'budget':>7} {'overall':>8} " + " ".join(f"{k:>7}" for k in kinds)
    lines = [
        f"implicit recall: {r['pairs']} pairs of {r['pairs_file']} stitched into "
        f"{r['conversations']} conversations of {r['locomo_file']} ({r['messages']} messages, "
        f"seed {r['seed']})",
        head,
        "-" * len(head),
    ]
    for system, by_budget in r["context"].items():
        for budget, row in by_budget.items():
            cells = " ".join(f"{row.get(k, 0.0):>7.3f}" for k in kinds)
            lines.append(f"{system:<{width}} {budget:>7} {row['overall']:>8.3f} {cells}")
    ms = ", ".join(f"{b}: {v['p50']}/{v['p95']} ms" for b, v in r["assembly_ms"].items())
    lines.append(f"archivist context assembly p50/p95 by budget: {ms}")
    for name, by_budget in r.get("ablation_assembly_ms", {}).items():
        ms = ", ".join(f"{b}: {v['p50']}/{v['p95']} ms" for b, v in by_budget.items())
        lines.append(f"{name} assembly p50/p95 by budget: {ms}")
    return "\n".join(lines)
