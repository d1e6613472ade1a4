"""Readable tables for benchmark results (pure string building)."""

from __future__ import annotations


def locomo_table(r: dict) -> str:
    """Recall@k per retriever and category, then ingest and latency lines."""
    cats = ["overall", *sorted(r["categories"])]
    head = "retriever  k    " + " ".join(
        f"{(c if c == 'overall' else c + ' ' + r['categories'][c]):>15}" for c in cats
    )
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
            lines.append(
                f"{name:<10} {k:<4} " + " ".join(f"{row.get(c, 0.0):>15.3f}" for c in cats)
            )
    ing = r["ingest"]
    rate = f"{ing['messages_per_s']} msg/s" if ing["messages_per_s"] else ing["note"]
    lat = r["search_latency_ms"]
    lines += [
        "",
        f"ingest: {ing['messages_added']} messages in {ing['seconds']} s ({rate})",
        f"search latency ({lat['retriever']}): p50 {lat['p50']} ms, p95 {lat['p95']} ms",
        f"embedder: {r['embedder']}; llm: {r['llm'] or 'none (heuristic mode)'}",
    ]
    return "\n".join(lines)
