"""Render doc pages whose figures come from result files (docs/results/*.json).

A template ``docs/results/NAME.md.tmpl`` becomes ``docs/NAME.md``. Inside it:

- ``{{ FILE:dotted.path }}`` is a value of ``docs/results/FILE.json``'s result, and
  ``{{ FILE:dotted.path|SPEC }}`` formats it: a Python format spec (``.3f``, ``,``,
  ``.1%``) or ``ms`` (one decimal and " ms"); list items are numbers in the path.
- ``{{ command:FILE }}`` is the command that wrote the file, ``{{ measured:FILE }}``
  when and on what.
- ``{{ table:FILE:KIND }}`` is a markdown table built by ``TABLES[KIND]`` from the
  result.

A value the file lacks fails the rendering, so a page cannot show a figure its result
files do not hold. scripts/gen_reference.py writes and checks these pages.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from archivist.bench.record import load
from archivist.bench.report import open_and_first_s

PLACE = re.compile(r"\{\{\s*([^{}]+?)\s*\}\}")


class RenderError(Exception):
    """A template asks for a file, a value or a table that is not there."""


def value(result: Any, path: str, where: str) -> Any:
    """The value at ``path`` (dot-separated keys; numbers index lists) in ``result``."""
    node = result
    for key in path.split("."):
        if isinstance(node, list) and key.isdigit() and int(key) < len(node):
            node = node[int(key)]
        elif isinstance(node, dict) and key in node:
            node = node[key]
        else:
            raise RenderError(f"{where}: no {key!r} on the way to {path!r}")
    return node


def fmt(x: Any, spec: str) -> str:
    """``x`` under ``spec``: a format spec, ``ms``, or nothing (as the file says)."""
    if spec == "ms":
        return f"{x:,.1f} ms"
    if spec:
        return format(x, spec)
    return str(x)


def _pipe(x: Any) -> str:
    return "–" if x is None else str(x)


def _row(cells: list[Any]) -> str:
    return "| " + " | ".join(_pipe(c) for c in cells) + " |"


def _table(head: list[str], rows: list[list[Any]]) -> str:
    return "\n".join([_row(head), _row(["---"] * len(head)), *(_row(r) for r in rows)])


# -- the tables each bench's result gives --------------------------------------------------


def locomo_recall(r: dict) -> str:
    """Recall@k per retriever, and @10 per category."""
    cats = sorted(r["categories"])
    ks = list(next(iter(r["retrieval"].values())))
    head = ["retriever", *ks, *(f"@10 {r['categories'][c]} ({c})" for c in cats)]
    rows = []
    for name, by_k in r["retrieval"].items():
        rows.append(
            [
                name,
                *(f"{by_k[k]['overall']:.3f}" for k in ks),
                *(f"{by_k['recall@10'][c]:.3f}" for c in cats),
            ]
        )
    return _table(head, rows)


def locomo_context(r: dict) -> str:
    """Context recall per system and token budget."""
    systems = r["context"]
    budgets = list(next(iter(systems.values())))
    head = ["context recall", *(f"{int(b):,} tokens" for b in budgets)]
    rows = [[name, *(f"{s[b]['overall']:.4f}" for b in budgets)] for name, s in systems.items()]
    return _table(head, rows)


def implicit(r: dict) -> str:
    """Share of triggers whose cue reached the context, per system and budget, per kind."""
    kinds = [k for k, n in r["by_kind"].items() if n]
    head = ["system", "budget", "all", *kinds]
    rows = [
        [name, f"{int(b):,}", f"{row['overall']:.3f}", *(f"{row[k]:.3f}" for k in kinds)]
        for name, by_budget in r["context"].items()
        for b, row in by_budget.items()
    ]
    return _table(head, rows)


def state_kinds(r: dict) -> str:
    """Answers, coverage and stale-as-current per probe kind, then overall."""
    head = ["kind", "probes", "answered right", "coverage", "stale shown as current"]
    rows = []
    for kind, k in [*r["by_kind"].items(), ("**all**", r["overall"])]:
        right = round(k["answer_accuracy"] * k["probes"])
        rows.append(
            [
                kind,
                k["probes"],
                f"{k['answer_accuracy']:.3f} ({right})",
                f"{k['coverage']:.3f}" if k.get("coverage_scored", 1) else "—",
                f"{k['stale_as_current']} of {k['stale_probes']}",
            ]
        )
    return _table(head, rows)


def judge_tasks(r: dict) -> str:
    """Accuracy and macro-F1 per task."""
    head = ["task", "items", "accuracy", "macro-F1"]
    rows = [
        [task, t["n"], f"{t['accuracy']:.3f}", f"{t['macro_f1']:.3f}"]
        for task, t in r["tasks"].items()
    ]
    return _table(head, rows)


def scale_rows(r: dict) -> str:
    """Per store size: inserts, open, searches, the vector side against an exact scan."""
    head = [
        "messages",
        "insert rows/s",
        "open + 1st",
        "one conversation p50 / p95",
        "whole store p50 / p95",
        "vector side: path / exact scan, p50",
        "recall@10",
        "file + side file",
    ]
    rows = []
    for s in r["sizes"]:
        one, whole = s["search_ms"]["one conversation"], s["search_ms"]["whole store"]
        vec, first = s.get("vector_only", {}), open_and_first_s(s)
        path, exact = vec.get("path_ms", {}), vec.get("exact_ms", {})
        rows.append(
            [
                f"{s['messages']:,}",
                f"{s['insert_rows_per_s']:,.0f}" if s["insert_rows_per_s"] else "–",
                "–" if first is None else f"{first:.3f} s",
                f"{one['p50']:.1f} / {one['p95']:.1f} ms",
                f"{whole['p50']:.1f} / {whole['p95']:.1f} ms",
                f"{path['p50']:.1f} / {exact['p50']:.1f} ms" if path else "–",
                vec.get("recall_at_10", "–"),
                f"{_size(s['db_bytes'])} + {_size(s.get('side_file_bytes', 0))}",
            ]
        )
    return _table(head, rows)


def scale_pg_rows(r: dict) -> str:
    """The PostgreSQL store grown in a scale run (``--pg-dsn``), per size, and the
    SQLite store's largest size of the same run to compare."""
    head = [
        "store, messages",
        "insert rows/s",
        "one conversation p50 / p95",
        "whole store p50 / p95",
        "vector side: path / exact scan, p50",
        "recall@10",
        "database",
    ]
    sqlite = r["sizes"][-1]
    rows = []
    for name, s in [*(("PostgreSQL", s) for s in r["postgres"]["sizes"]), ("SQLite", sqlite)]:
        one, whole = s["search_ms"]["one conversation"], s["search_ms"]["whole store"]
        vec = s.get("vector_only", {})
        path, exact = vec.get("path_ms", {}), vec.get("exact_ms", {})
        side = s.get("side_file_bytes")
        rows.append(
            [
                f"{name} {s['messages']:,}",
                f"{s['insert_rows_per_s']:,.0f}" if s["insert_rows_per_s"] else "–",
                f"{one['p50']:.1f} / {one['p95']:.1f} ms",
                f"{whole['p50']:.1f} / {whole['p95']:.1f} ms",
                f"{path['p50']:.1f} / {exact['p50']:.1f} ms" if path else "–",
                vec.get("recall_at_10", "–"),
                _size(s["db_bytes"]) + (f" + {_size(side)}" if side else ""),
            ]
        )
    return _table(head, rows)


def _size(n: int) -> str:
    return f"{n / 1e9:.1f} GB" if n >= 1e9 else f"{n / 1e6:.0f} MB"


def locomo_qa(r: dict) -> str:
    """Token F1 per category, abstention on adversarial questions, false abstention."""
    cats = ["1", "2", "3", "4"]
    head = [
        "system",
        *(f"F1 {r['categories'][c]}" for c in cats),
        "F1 1–4",
        "adversarial abstained (owner named)",
        "false abstention",
    ]
    rows = []
    for name, row in r["systems"].items():
        if "f1" not in row:
            continue
        rows.append(
            [
                name,
                *(f"{row['f1'][c]:.3f}" for c in cats),
                f"{row['f1']['overall']:.4f}",
                f"{row['adversarial_abstention']:.1%} ({row['adversarial_named_owner']:.1%})",
                f"{row['false_abstention']:.1%}",
            ]
        )
    return _table(head, rows)


TABLES: dict[str, Callable[[dict], str]] = {
    "locomo-qa": locomo_qa,
    "locomo-recall": locomo_recall,
    "locomo-context": locomo_context,
    "implicit": implicit,
    "state-kinds": state_kinds,
    "judge-tasks": judge_tasks,
    "scale": scale_rows,
    "scale-pg": scale_pg_rows,
}


def render(template: Path, results: Path) -> str:
    """The page ``template`` describes, with every placeholder filled from ``results``."""
    records: dict[str, dict] = {}

    def record(name: str) -> dict:
        if name not in records:
            path = results / f"{name}.json"
            if not path.is_file():
                raise RenderError(f"{template.name}: no result file {path}")
            records[name] = load(path)
        return records[name]

    def fill(match: re.Match) -> str:
        what = match.group(1)
        head, _, rest = what.partition(":")
        if head == "command":
            return record(rest)["command"]
        if head == "measured":
            rec = record(rest)
            m = rec["machine"]
            return f"{rec['measured']}, {m['cores']} cores, {m['memory_gib']} GiB"
        if head == "table":
            name, _, kind = rest.partition(":")
            if kind not in TABLES:
                raise RenderError(f"{template.name}: no table kind {kind!r}")
            try:
                return TABLES[kind](record(name)["result"])
            except (KeyError, TypeError, IndexError) as e:
                raise RenderError(f"{template.name}: {name}.json has no {e} for {kind}") from None
        path, _, spec = rest.partition("|")
        got = value(record(head)["result"], path.strip(), f"{head}.json")
        return fmt(got, spec.strip())

    text = template.read_text(encoding="utf-8")
    note = (
        f"<!-- generated from docs/results/{template.name} and the result files beside it "
        "by scripts/gen_reference.py: edit those, not this page -->\n"
    )
    return note + PLACE.sub(fill, text)


FRAGMENT = re.compile(r"(<!-- figures: (\S+) -->\n)(.*?)(<!-- /figures -->)", re.S)


def with_fragments(text: str, results: Path) -> str:
    """``text`` with each ``<!-- figures: NAME -->`` … ``<!-- /figures -->`` block
    rendered again from the fragment template ``results/NAME`` (no note added)."""

    def again(m: re.Match) -> str:
        body = render(results / m.group(2), results).split("\n", 1)[1]
        return m.group(1) + body.rstrip("\n") + "\n" + m.group(4)

    return FRAGMENT.sub(again, text)


def pages(docs: Path) -> dict[str, Callable[[], str]]:
    """Page name → its renderer, one per template in docs/results."""
    results = docs / "results"
    return {
        t.name.removesuffix(".tmpl"): (lambda t=t: render(t, results).rstrip("\n"))
        for t in sorted(results.glob("*.md.tmpl"))
        if not t.name.startswith("_")  # a fragment (``with_fragments``), not a page
    }
