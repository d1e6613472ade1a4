"""State-tracking benchmark: does memory answer with what holds now, not what used to?

A suite is a JSON file of scenarios: messages in the JSONL input fields
(load/jsonl.py; ``conversation`` defaults to the scenario id) and probes, each
a question asked for a ``person`` at a time ``at``, with the strings a right
answer names (``expect``: any one; ``expect_all``: every one), the outdated
ones it must not name (``stale``), ``abstain`` when memory should decline,
and a ``kind``: current, history, temporal, attribution or multi.

Each scenario gets a fresh SQLite store in a temp dir: its messages are added
(with extraction), consolidation runs until its queue is empty, then every
probe is put to ``ask`` and to ``context`` (within ``budget`` tokens). Three
figures per probe, all by case-insensitive match of whole words ("no" is not
found in "now", "yes" not in "yesterday"):

- answer: a normal probe's answer does not abstain, names some ``expect``
  (all of ``expect_all`` when given) and no ``stale``; an abstain probe's
  answer abstains and, when ``expect`` is given, names one of them.
- coverage: some ``expect`` (else ``expect_all``) string is in the context
  text; abstain probes with neither are not scored, nor are probes whose only
  expected strings are a bare "yes" or "no": a context holds the evidence a
  yes or no is read from ("no alcohol until the 15th"), not the answer word,
  so such a probe judges the answer only.
- stale-as-current: a ``stale`` value is on a context line that is not
  marked as history (a bare "yes" or "no" judges the answer only). A line
  is marked as history when it holds, exactly (case-sensitive), the marker
  the context renderer puts on superseded or expired facts:
  ``archivist.read.history.HISTORY_MARK`` (a string or a tuple of strings)
  when that module defines it, else ``"[history]"``. Nothing else counts
  ("was", "until", a past date): a stale value shown without the marker
  reads as current to the assistant. The rate is over probes that list
  stale values.

Scoring is pure (``check_answer``, ``covers``, ``stale_as_current``,
``score_probe``, ``summarise``); ``run_state`` does the I/O.
"""

from __future__ import annotations

import json
import re
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..config import Settings
from ..embed.base import Embedder
from ..errors import InputError
from ..model import Conversation
from ..service import MemoryService

KINDS = ("current", "history", "temporal", "attribution", "multi")
DEFAULT_SUITE = Path(__file__).with_name("state_suite.json")
DEFAULT_HISTORY_MARK = "[history]"
ANSWER_CHARS = 160  # answers are cut to this in failure lists


@dataclass(frozen=True)
class Probe:
    """One question with the strings a right answer names and the outdated ones it must not."""

    question: str
    kind: str
    person: str | None = None
    at: datetime | None = None
    expect: tuple[str, ...] = ()
    expect_all: tuple[str, ...] = ()
    stale: tuple[str, ...] = ()
    abstain: bool = False


@dataclass(frozen=True)
class Scenario:
    """A conversation history and the probes put to memory after it."""

    id: str
    conversations: tuple[Conversation, ...]
    probes: tuple[Probe, ...]


@dataclass(frozen=True)
class ProbeResult:
    """How one probe fared; ``covered`` is None where coverage is not scored."""

    scenario: str
    probe: Probe
    answer: str
    answer_ok: bool
    covered: bool | None
    stale_current: bool
    problems: tuple[str, ...] = ()  # "check: why", one per failed check


# -- the suite file ---------------------------------------------------------------------


def load_suite(path: str | Path) -> list[Scenario]:
    """Read and validate a suite file; any problem is one InputError line naming where."""
    source = str(path)
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as e:
        raise InputError(f"{source}: cannot read: {e.strerror or e}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise InputError(f"{source}: not JSON: {e}") from None
    return parse_suite(data, source)


def parse_suite(data: Any, source: str) -> list[Scenario]:
    """Scenarios from decoded JSON, all checked before any is returned."""
    if not isinstance(data, dict) or not isinstance(data.get("scenarios"), list):
        raise InputError(f"{source}: expected an object with a 'scenarios' list")
    if not data["scenarios"]:
        raise InputError(f"{source}: 'scenarios' is empty")
    out: list[Scenario] = []
    seen: set[str] = set()
    for i, raw in enumerate(data["scenarios"], start=1):
        scenario = _scenario(raw, f"{source}: scenario {i}", source)
        if scenario.id in seen:
            raise InputError(f"{source}: scenario {scenario.id!r}: id used twice")
        seen.add(scenario.id)
        out.append(scenario)
    return out


def _scenario(raw: Any, where: str, source: str) -> Scenario:
    from ..load import parse

    if not isinstance(raw, dict):
        raise InputError(f"{where}: expected an object")
    sid = raw.get("id")
    if not isinstance(sid, str) or not sid.strip():
        raise InputError(f"{where}: 'id' must be a non-empty string")
    where = f"{source}: scenario {sid!r}"
    for key in ("messages", "probes"):
        if not isinstance(raw.get(key), list) or not raw[key]:
            raise InputError(f"{where}: '{key}' must be a non-empty list")
    for n, m in enumerate(raw["messages"], start=1):
        if not isinstance(m, dict):
            raise InputError(f"{where}: message {n}: expected an object")
    lines = "\n".join(json.dumps({"conversation": sid, **m}) for m in raw["messages"])
    convs = tuple(parse(lines, "jsonl", source=f"{where} messages"))
    # who a probe may ask about: a speaker, an addressee, or someone the messages name
    people = {p for c in convs for m in c.messages for p in (m.speaker, *m.addressees)}
    people |= {
        re.sub(r"['’]s$", "", w.strip('.,!?;:"()'))
        for c in convs
        for m in c.messages
        for w in m.text.split()
    }
    probes = tuple(
        _probe(p, f"{where}: probe {n}", people) for n, p in enumerate(raw["probes"], start=1)
    )
    return Scenario(sid, convs, probes)


def _probe(raw: Any, where: str, people: set[str]) -> Probe:
    if not isinstance(raw, dict):
        raise InputError(f"{where}: expected an object")
    question = raw.get("question")
    if not isinstance(question, str) or not question.strip():
        raise InputError(f"{where}: 'question' must be a non-empty string")
    where = f"{where} ({question.strip()[:60]!r})"
    kind = raw.get("kind")
    if kind not in KINDS:
        raise InputError(f"{where}: 'kind' must be one of {', '.join(KINDS)}; got {kind!r}")
    person = raw.get("person")
    if person is not None and (not isinstance(person, str) or person not in people):
        raise InputError(f"{where}: 'person' {person!r} is not in the scenario's messages")
    abstain = raw.get("abstain", False)
    if not isinstance(abstain, bool):
        raise InputError(f"{where}: 'abstain' must be true or false")
    expect, expect_all, stale = (_strings(raw, k, where) for k in ("expect", "expect_all", "stale"))
    if not abstain and not (expect or expect_all):
        raise InputError(f"{where}: needs 'expect' or 'expect_all' (or 'abstain': true)")
    at = _when(raw.get("at"), where)
    return Probe(question.strip(), kind, person, at, expect, expect_all, stale, abstain)


def _strings(raw: dict, key: str, where: str) -> tuple[str, ...]:
    value = raw.get(key, [])
    if not isinstance(value, list) or not all(isinstance(s, str) and s.strip() for s in value):
        raise InputError(f"{where}: '{key}' must be a list of non-empty strings")
    return tuple(s.strip() for s in value)


def _when(value: Any, where: str) -> datetime | None:
    if value is None:
        return None
    try:
        when = datetime.fromisoformat(value.strip())
    except (AttributeError, ValueError):
        raise InputError(f"{where}: 'at' must be an ISO 8601 time; got {value!r}") from None
    return when if when.tzinfo else when.replace(tzinfo=UTC)


# -- scoring (pure) ---------------------------------------------------------------------


def history_marks() -> tuple[str, ...]:
    """The context renderer's history marker(s), read now: the renderer is still changing."""
    from ..read import history

    mark = getattr(history, "HISTORY_MARK", DEFAULT_HISTORY_MARK)
    return (mark,) if isinstance(mark, str) else tuple(mark)


def _has(text: str, needle: str) -> bool:
    """``needle`` in ``text`` as whole words, any case: "no" is not in "now" or "know",
    "yes" not in "yesterday"."""
    pattern = rf"(?<!\w){re.escape(needle.casefold())}(?!\w)"
    return re.search(pattern, text.casefold()) is not None


# A yes/no probe's stale answer word judges the answer only: "Yes please, Mondays and
# Wednesdays" in the context states no stale value.
ANSWER_WORDS = frozenset({"yes", "no"})


def _says(text: str, value: str) -> bool:
    """Whether the answer says ``value``. A bare yes or no is judged by the answer's
    verdict, its first word, when it opens with one: "Yes: On crutches until the end of
    the month, no driving." says yes, not no. An answer without a verdict word is
    searched whole, as for any other value."""
    word = value.casefold().strip()
    if word in ANSWER_WORDS:
        first = re.match(r"\W*(\w+)", text)
        verdict = first.group(1).casefold() if first else ""
        if verdict in ANSWER_WORDS:
            return verdict == word
    return _has(text, value)


def check_answer(probe: Probe, text: str, abstained: bool) -> str | None:
    """None if the answer is right, else why not."""
    if probe.abstain:
        if not abstained:
            return "did not abstain"
        if probe.expect and not any(_has(text, e) for e in probe.expect):
            return f"abstained without naming {' or '.join(map(repr, probe.expect))}"
        return None
    if abstained:
        return "abstained"
    if probe.expect_all:
        if missing := [e for e in probe.expect_all if not _says(text, e)]:
            return f"missing {', '.join(map(repr, missing))}"
    elif not any(_says(text, e) for e in probe.expect):
        return f"names none of {', '.join(map(repr, probe.expect))}"
    if named := [s for s in probe.stale if _says(text, s)]:
        return f"names stale {', '.join(map(repr, named))}"
    return None


def shown_values(stale: Sequence[str]) -> list[str]:
    """The strings a context can show (as current, for stale ones): all but a bare yes or no."""
    return [s for s in stale if s.casefold().strip() not in ANSWER_WORDS]


def covers(probe: Probe, context_text: str) -> bool | None:
    """Whether the context holds some expected string; None when there is none to look
    for (a bare yes or no is an answer word, not something a context shows)."""
    wanted = shown_values(probe.expect or probe.expect_all)
    if not wanted:
        return None
    return any(_has(context_text, e) for e in wanted)


def stale_lines(stale: Sequence[str], context_text: str, marks: Sequence[str]) -> list[str]:
    """Context lines naming a stale value (not a bare yes or no) without a history marker."""
    values = shown_values(stale)
    return [
        line
        for line in context_text.splitlines()
        if any(_has(line, s) for s in values) and not any(m in line for m in marks)
    ]


def stale_as_current(probe: Probe, context_text: str, marks: Sequence[str] | None = None) -> bool:
    """Whether the context shows a stale value on a line not marked as history."""
    if not probe.stale:
        return False
    return bool(stale_lines(probe.stale, context_text, history_marks() if marks is None else marks))


def score_probe(
    scenario: str,
    probe: Probe,
    answer_text: str,
    abstained: bool,
    context_text: str,
    marks: Sequence[str] | None = None,
) -> ProbeResult:
    """All three checks of one probe, with a reason for each that failed."""
    marks = history_marks() if marks is None else marks
    wrong = check_answer(probe, answer_text, abstained)
    covered = covers(probe, context_text)
    stale = stale_as_current(probe, context_text, marks)
    problems = []
    if wrong:
        problems.append(f"answer: {wrong}")
    if covered is False:
        problems.append("coverage: no expected string in the context")
    if stale:
        line = stale_lines(probe.stale, context_text, marks)[0].strip()
        problems.append(f"stale-as-current: {line[:ANSWER_CHARS]!r}")
    return ProbeResult(scenario, probe, answer_text, wrong is None, covered, stale, tuple(problems))


def _rate(n: int, of: int) -> float:
    return round(n / of, 4) if of else 0.0


def _figures(rows: Sequence[ProbeResult]) -> dict:
    """Counts and rates over some probe results."""
    correct = sum(r.answer_ok for r in rows)
    scored = [r for r in rows if r.covered is not None]
    hits = sum(bool(r.covered) for r in scored)
    with_stale = sum(1 for r in rows if shown_values(r.probe.stale))
    stale = sum(r.stale_current for r in rows)
    return {
        "probes": len(rows),
        "answer_correct": correct,
        "answer_accuracy": _rate(correct, len(rows)),
        "coverage_scored": len(scored),
        "coverage_hits": hits,
        "coverage": _rate(hits, len(scored)),
        "stale_probes": with_stale,
        "stale_as_current": stale,
        "stale_as_current_rate": _rate(stale, with_stale),
        "failed": sum(1 for r in rows if r.problems),
    }


def summarise(results: Iterable[ProbeResult]) -> dict:
    """Overall and per-kind figures, and every failed probe."""
    rows = list(results)
    return {
        "overall": _figures(rows),
        "by_kind": {
            k: _figures(sel) for k in KINDS if (sel := [r for r in rows if r.probe.kind == k])
        },
        "failures": [
            {
                "scenario": r.scenario,
                "question": r.probe.question,
                "kind": r.probe.kind,
                "answer": r.answer[:ANSWER_CHARS],
                "failed": [p.split(":", 1)[0] for p in r.problems],
                "why": list(r.problems),
            }
            for r in rows
            if r.problems
        ],
    }


# -- running ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Reading:
    """A reader model's answers to one probe from archivist's context and from the plain
    dated history up to the probe's time, each scored like ``ask``'s answer."""

    kind: str
    context_ok: bool
    history_ok: bool
    context_tokens: int
    history_tokens: int
    context_answer: str = ""
    history_answer: str = ""
    failed_calls: int = 0


def dated_history(scenario: Scenario, at: datetime | None) -> str:
    """Every message of the scenario said by ``at``, dated and in order: what a chat app
    without memory but with unlimited room would show."""
    from ..read.context_lines import message_line

    said = [
        m for c in scenario.conversations for m in c.messages if at is None or m.timestamp <= at
    ]
    said.sort(key=lambda m: (m.timestamp, m.seq))
    everyone = {c.id: c.participants for c in scenario.conversations}
    return "\n".join(f"- {message_line(m, everyone[m.conversation])}" for m in said)


def read_probe(memory: MemoryService, reader: Any, p: Probe, notes: str) -> tuple[str, bool, int]:
    """The reader's short answer from ``notes``, whether it declined, and failed calls."""
    from ..llm.base import LLMError
    from ..prompts import read_notes

    messages = read_notes.build(notes, p.question, p.at)
    try:
        out = memory.core.llm_call(read_notes, messages, read_notes.ReadOut, model=reader)
    except LLMError:
        return "", True, 1
    text = " ".join(out.answer.split())
    return text, not text or read_notes.NOT_SAID in text.casefold(), 0


def _reading(memory: MemoryService, reader: Any, scenario: Scenario, p: Probe, shown) -> Reading:
    from ..read.context import estimate_tokens

    history = dated_history(scenario, p.at)
    ctx_text, ctx_no, ctx_fail = read_probe(memory, reader, p, shown.text)
    hist_text, hist_no, hist_fail = read_probe(memory, reader, p, history)
    return Reading(
        p.kind,
        check_answer(p, ctx_text, ctx_no) is None,
        check_answer(p, hist_text, hist_no) is None,
        shown.tokens,
        estimate_tokens(history),
        ctx_text,
        hist_text,
        ctx_fail + hist_fail,
    )


def reading_summary(rows: Sequence[Reading]) -> dict:
    """Reader accuracy from the context and from the dated history, overall and per kind,
    and the mean tokens of each."""

    def figures(part: Sequence[Reading]) -> dict:
        n = len(part)
        return {
            "probes": n,
            "context_accuracy": _rate(sum(r.context_ok for r in part), n),
            "history_accuracy": _rate(sum(r.history_ok for r in part), n),
            "context_tokens_mean": round(sum(r.context_tokens for r in part) / n, 1) if n else 0,
            "history_tokens_mean": round(sum(r.history_tokens for r in part) / n, 1) if n else 0,
        }

    return {
        "overall": {**figures(rows), "failed_calls": sum(r.failed_calls for r in rows)},
        "by_kind": {k: figures([r for r in rows if r.kind == k]) for k in KINDS},
    }


def run_scenario(
    scenario: Scenario,
    settings: Settings,
    embedder: Embedder,
    llm: Any,
    budget: int,
    marks: Sequence[str],
    reader: Any = None,
    readings: list[Reading] | None = None,
) -> tuple[list[ProbeResult], list[str]]:
    """Probe results of one scenario on a fresh store, and its failed consolidation jobs;
    with a ``reader`` model, its readings of each probe's context and history too."""
    with tempfile.TemporaryDirectory(prefix="archivist-state-") as tmp:
        fresh = settings.with_(store="sqlite", consolidate_mode="inline")
        memory = MemoryService(Path(tmp) / "state.db", settings=fresh, embedder=embedder, llm=llm)
        try:
            memory.add(list(scenario.conversations))
            jobs = memory.consolidate()
            errors = [f"{scenario.id}: {j.kind} {j.key}: {j.error}" for j in jobs if j.error]
            results = []
            for p in scenario.probes:
                answer = memory.ask(p.question, person=p.person, at=p.at)
                shown = memory.context(p.question, person=p.person, at=p.at, budget_tokens=budget)
                results.append(
                    score_probe(scenario.id, p, answer.answer, answer.abstain, shown.text, marks)
                )
                if reader is not None and readings is not None:
                    readings.append(_reading(memory, reader, scenario, p, shown))
        finally:
            memory.close()
    return results, errors


def run_state(
    scenarios: Sequence[Scenario],
    *,
    settings: Settings | None = None,
    embedder: Embedder | None = None,
    budget: int = 600,
    suite: str = "",
    progress: Callable[[str, int, int], None] | None = None,
    reader: Any = None,
) -> dict:
    """Run every scenario on its own fresh store and score its probes.

    One embedder and one chat model (none: the heuristic archivist) serve all
    scenarios, so the bundled model loads once. ``reader``: a chat model that
    also answers each probe from the context and from the dated history (the
    result's ``reader`` part).
    """
    from ..embed import get_embedder
    from ..llm import get_chat_model

    settings = settings or Settings()
    embedder = embedder or get_embedder(settings)
    llm = get_chat_model(settings)
    marks = history_marks()
    t0 = time.perf_counter()
    results: list[ProbeResult] = []
    readings: list[Reading] = []
    errors: list[str] = []
    for i, scenario in enumerate(scenarios):
        rows, failed_jobs = run_scenario(
            scenario, settings, embedder, llm, budget, marks, reader, readings
        )
        results += rows
        errors += failed_jobs
        if progress:
            progress("scenarios", i + 1, len(scenarios))
    summary = summarise(results)
    return {
        "suite": suite,
        "llm": llm is not None,
        "llm_model": llm.name if llm is not None else None,
        "embedder": embedder.name,
        "budget": budget,
        "scenarios": len(scenarios),
        "probes": len(results),
        "seconds": round(time.perf_counter() - t0, 3),
        "history_marks": list(marks),
        "overall": summary["overall"],
        "by_kind": summary["by_kind"],
        "failures": summary["failures"],
        "job_errors": errors,
        **(
            {"reader": {"model": reader.name, **reading_summary(readings)}}
            if reader is not None
            else {}
        ),
    }


def state_table(r: dict) -> str:
    """Per-kind accuracy, coverage and stale-as-current, then the first ten failures."""
    head = f"{'kind':<12} {'probes':>6} {'answer acc':>10} {'coverage':>9} {'stale-as-current':>17}"
    lines = [
        f"state tracking: {r['suite']} ({r['scenarios']} scenarios, {r['probes']} probes, "
        f"{r['seconds']} s), llm: {r['llm_model'] or 'none (heuristic archivist)'}, "
        f"budget {r['budget']} tokens",
        head,
        "-" * len(head),
    ]
    rows = [*r["by_kind"].items(), ("overall", r["overall"])]
    for name, f in rows:
        stale = f"{f['stale_as_current']}/{f['stale_probes']} ({f['stale_as_current_rate']:.2f})"
        lines.append(
            f"{name:<12} {f['probes']:>6} {f['answer_accuracy']:>10.3f} "
            f"{f['coverage']:>9.3f} {stale:>17}"
        )
    failures = r["failures"]
    if failures:
        lines += ["", f"failed probes ({len(failures)}; first 10):"]
        for x in failures[:10]:
            lines.append(
                f"  [{x['scenario']} / {x['kind']}] {x['question']} -> {x['answer']!r}: "
                + "; ".join(x["why"])
            )
    for e in r["job_errors"][:10]:
        lines.append(f"job error: {e}")
    if "reader" in r:
        lines += ["", *reader_table(r["reader"])]
    return "\n".join(lines)


def reader_table(rd: dict) -> list[str]:
    """The reader's accuracy and mean tokens from the context and from the dated history."""
    head = (
        f"{'kind':<12} {'probes':>6} {'context acc':>11} {'history acc':>11} "
        f"{'tokens ctx/hist':>16}"
    )
    lines = [f"reader: {rd['model']} (failed calls: {rd['overall']['failed_calls']})", head]
    for name, f in [*rd["by_kind"].items(), ("overall", rd["overall"])]:
        tokens = f"{f['context_tokens_mean']:.0f}/{f['history_tokens_mean']:.0f}"
        lines.append(
            f"{name:<12} {f['probes']:>6} {f['context_accuracy']:>11.3f} "
            f"{f['history_accuracy']:>11.3f} {tokens:>16}"
        )
    return lines
