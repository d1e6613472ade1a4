"""Readable tables for benchmark results (pure string building)."""

from __future__ import annotations


def _columns(r: dict) -> list[str]:
    return ["overall", *sorted(r["categories"])]


def _category_head(r: dict) -> str:
    """The per-category column titles: "overall", then "1 multi-hop", "2 temporal", …"""
    return " ".join(
        f"{(c if c == 'overall' else c + ' ' + r['categories'][c]):>15}" for c in _columns(r)
    )


def _category_cells(r: dict, row: dict) -> str:
    """One row's figures under ``_category_head``'s columns."""
    return " ".join(f"{row.get(c, 0.0):>15.3f}" for c in _columns(r))


def locomo_table(r: dict) -> str:
    """Recall@k per retriever and category, then ingest and latency lines."""
    width = max(10, *(len(n) for n in r["retrieval"]))
    head = f"{'retriever':<{width}} k    " + _category_head(r)
    lines = [
        f"LoCoMo evidence recall: {r['conversations']} conversations, {r['messages']} messages, "
        f"{r['questions_scored']} questions (category 5 excluded: "
        f"{r['questions_excluded']['category_5_adversarial']})",
        head,
        "-" * len(head),
    ]
    for name, by_k in r["retrieval"].items():
        for key, row in by_k.items():
            k = key.split("@", 1)[1]
            lines.append(f"{name:<{width}} {k:<4} " + _category_cells(r, row))
    ing = r["ingest"]
    rate = f"{ing['messages_per_s']} msg/s" if ing["messages_per_s"] else ing["note"]
    lat = r["search_latency_ms"]
    ex = r["extraction"]
    llm = r["llm"] or {}
    totals = llm.get("totals", {})
    lines += [
        "",
        f"ingest: {ing['messages_added']} messages in {ing['seconds']} s ({rate})",
        f"archivist {ex['archivist']}: {ex['sessions_processed']} sessions in {ex['seconds']} s, "
        f"{ex['episodes']} episodes, {ex['claims']} claims ({ex['claims_rejected']} rejected, "
        f"{ex['heuristic_fallbacks']} heuristic fallbacks); {ex['claims_in_store']} claims stored",
        f"llm: {llm.get('model') or 'none (heuristic archivist)'}; "
        f"{totals.get('calls', 0)} calls ({ex['llm_calls_per_message']} per message), "
        f"{totals.get('input_tokens', 0)} input / {totals.get('output_tokens', 0)} output tokens, "
        f"{totals.get('cache_hits', 0)} cache hits",
        *_consolidation_lines(r.get("consolidation")),
        f"search latency ({lat['retriever']}): p50 {lat['p50']} ms, p95 {lat['p95']} ms",
        *(
            f"search latency ({name}, same path): p50 {x['p50']} ms, p95 {x['p95']} ms"
            for name, x in r.get("latency_ms", {}).items()
            if name != "archivist"
        ),
        f"embedder: {r['embedder']}",
    ]
    return "\n".join(lines)


def _consolidation_lines(c: dict | None) -> list[str]:
    if not c:
        return []
    jobs = ", ".join(
        f"{kind} " + "/".join(f"{n} {status}" for status, n in sorted(st.items()))
        for kind, st in c["jobs"].items()
    )
    return [
        f"consolidation: {c['seconds']} s; entities {c['entity_names_before']} names -> "
        f"{c['entities_after']} entities ({c['entity_mentions']} mentions); "
        f"{c['duplicate_claims']} duplicate and {c['refined_claims']} refined claims; "
        f"{c['conflicts']} conflicts; decisions {c['decisions']['MERGE']} merge / "
        f"{c['decisions']['SEPARATE']} separate; {c['llm_calls']} LLM calls "
        f"({c['llm_calls_per_message']} per message)",
        f"jobs: {jobs}",
        *(f"job error: {e}" for e in c["errors"]),
    ]


def scale_table(r: dict) -> str:
    """Per store size: open and first-query costs, full-path latency scoped and unscoped,
    the vector side alone against the exact scan of the same run, sizes on disk; then
    the PostgreSQL store grown in the same run, when there is one."""
    lines = [f"SQLite (side file, 8-bit scan)\n{_scale_rows(r)}"]
    if pg := r.get("postgres"):
        skipped = ", ".join(f"{n:,}" for n in pg.get("skipped_sizes", []))
        note = f"; not grown to {skipped}" if skipped else ""
        lines.append(f"\nPostgreSQL (pgvector HNSW), same run{note}\n{_scale_rows(pg)}")
    return "\n".join(lines)


def open_and_first_s(size: dict) -> float | None:
    """A scale row's "open + 1st": a new store opening the file, then its first vector and
    keyword searches (a hybrid query's store side); None when the row has no reopen."""
    ro = size.get("reopen")
    if not ro:
        return None
    return round(ro["open_s"] + ro["first_vector_search_s"] + ro["first_keyword_search_s"], 3)


def _scale_rows(r: dict) -> str:
    lines = [
        f"store scale ({r['queries_per_size']} queries per size, preset {r['preset']}, "
        f"full path: query embedding by {r['embedder']} included)",
        f"{'messages':>10} {'insert/s':>9} {'open+1st s':>10} {'conv p50/p95':>14} "
        f"{'all p50/p95':>14} {'exact p50/p95':>14} {'path p50/p95':>14} {'recall@10':>9} "
        f"{'index s':>8} {'db MB':>7} {'side MB':>7}",
    ]
    for s in r["sizes"]:
        one, every = s["search_ms"]["one conversation"], s["search_ms"]["whole store"]
        vec = s.get("vector_only", {})
        ex, path = vec.get("exact_ms", {}), vec.get("path_ms", {})
        first = open_and_first_s(s)
        lines.append(
            f"{s['messages']:>10} {s['insert_rows_per_s'] or '-':>9} "
            f"{first if first is not None else '-':>10} "
            f"{one['p50']:>6}/{one['p95']:<7} {every['p50']:>6}/{every['p95']:<7} "
            f"{ex.get('p50', '-'):>6}/{ex.get('p95', '-')!s:<7} "
            f"{path.get('p50', '-'):>6}/{path.get('p95', '-')!s:<7} "
            f"{vec.get('recall_at_10', '-'):>9} {s.get('ann_build_s', '-'):>8} "
            f"{s['db_bytes'] / 1e6:>7.1f} {s.get('side_file_bytes', 0) / 1e6:>7.1f}"
        )
    for s in r["sizes"]:
        vec = s.get("vector_only", {})
        if "filtered_path_ms" in vec:
            ex, path = vec["filtered_exact_ms"], vec["filtered_path_ms"]
            lines.append(
                f"{s['messages']:>10} messages, vector side under a time filter admitting "
                f"{vec['filtered_share']:.0%}: exact {ex['p50']}/{ex['p95']} ms, path "
                f"{path['p50']}/{path['p95']} ms, recall@10 {vec['filtered_recall_at_10']}"
            )
    if ing := r.get("ingest"):
        lines.append(
            f"ingest with embeddings: {ing['ingest_messages_per_s']} messages/s; the embedder "
            f"alone on the same {ing['messages']} texts: {ing['embedder_texts_per_s']}/s "
            f"(ratio {ing['ratio']})"
        )
    return "\n".join(lines)


def locomo_qa_table(r: dict) -> str:
    """LoCoMo QA as markdown: F1 / BLEU-1 / J per category and system, abstention, costs."""
    cats = ["1", "2", "3", "4"]
    names = r["categories"]
    head = "| system | metric | " + " | ".join(f"{c} {names[c]}" for c in cats)
    lines = [
        f"## LoCoMo QA: {r['conversations']} conversations, {r['questions']} questions",
        "",
        f"answer model: {r['answer_model'] or 'none (extractive answers)'}; "
        f"judge model: {r['judge_model'] or 'none (no J)'}; embedder: {r['embedder']}",
        "",
        head + " | overall 1-4 | 5 adversarial |",
        "|" + "---|" * (len(cats) + 4),
    ]
    scored = {s: row for s, row in r["systems"].items() if "f1" in row}
    for system, row in scored.items():
        for metric in ("f1", "bleu1", "j"):
            values = row.get(metric)
            if values is None:
                continue
            cells = [f"{values[c]:.3f}" if c in values else "-" for c in cats]
            five = f"{values['5']:.3f}" if "5" in values else "-"
            lines.append(
                f"| {system} | {metric} | "
                + " | ".join(cells)
                + f" | {values['overall']:.3f} | {five} |"
            )
    lines += [
        "",
        "| system | adversarial abstained | named whose it was | false abstention (1-4) | "
        "context tokens/q | LLM calls/q | search p50/p95 ms | answer p50/p95 ms |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for system, row in scored.items():
        lat = row["latency_ms"]
        lines.append(
            f"| {system} | {_pct(row['adversarial_abstention'])} | "
            f"{_pct(row['adversarial_named_owner'])} | {_pct(row['false_abstention'])} | "
            f"{row['context_tokens_per_question']} | {row['llm_calls_per_question']} | "
            f"{lat['search']['p50']} / {lat['search']['p95']} | "
            f"{lat['answer']['p50']} / {lat['answer']['p95']} |"
        )
    for system, row in r["systems"].items():
        if "status" in row:
            lines.append(f"\n{system}: {row['status']}")
    lines.append(
        "\nF1: official LoCoMo token F1 (category 5 = share answering 'not mentioned'); "
        "context tokens are whitespace tokens."
    )
    return "\n".join(lines)


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"


def locomo_context_table(r: dict) -> str:
    """Context evidence recall per system and budget, by category; tokens and latency."""
    head = f"{'system':<10} {'budget':>6} {'tokens':>7} " + _category_head(r)
    lines = [
        f"LoCoMo context evidence recall: {r['conversations']} conversations, "
        f"{r['questions_scored']} questions (categories 1-4). Counted: {r['counting']}.",
        head,
        "-" * len(head),
    ]
    for system, by_budget in r["context"].items():
        for budget, row in by_budget.items():
            used = r["tokens_used"][system][budget]
            lines.append(f"{system:<10} {budget:>6} {used:>7.0f} " + _category_cells(r, row))
    lines.append("")
    lines += [
        f"archivist assembly at {b} tokens: p50 {x['p50']} ms, p95 {x['p95']} ms"
        for b, x in r["assembly_ms"].items()
    ]
    return "\n".join(lines)
