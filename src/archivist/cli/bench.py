"""``archivist bench …``: benchmarks that print figures beside same-run baselines."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import click

from .common import Context, emit_json, pass_ctx
from .progress import StagedProgress


def _writable(ctx: click.Context, param: click.Parameter, value: Path | None) -> Path | None:
    """A --save path whose folder can be made and written, checked before a long run."""
    if value is not None:
        try:
            value.parent.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise click.BadParameter(f"cannot make {value.parent}: {e.strerror}") from None
        if not os.access(value.parent, os.W_OK):
            raise click.BadParameter(f"cannot write in {value.parent}")
    return value


save_option = click.option(
    "--save",
    type=click.Path(dir_okay=False, path_type=Path),
    callback=_writable,
    help="Also write the result, with the command that reproduces it, to this JSON file "
    "(the benchmark page renders docs/results/*.json).",
)


@click.group()
def bench() -> None:
    """Benchmarks (LoCoMo retrieval, state tracking, store scale)."""


def _parse_ks(value: str, option: str = "--k") -> tuple[int, ...]:
    """Comma-separated positive integers, sorted and deduplicated; the error names ``option``."""
    try:
        ks = tuple(sorted({int(x) for x in value.split(",") if x.strip()}))
    except ValueError:
        raise click.BadParameter(
            f"expected comma-separated integers, got {value!r}", param_hint=option
        ) from None
    if not ks or min(ks) < 1:
        raise click.BadParameter("values must be positive integers", param_hint=option)
    return ks


@bench.command("locomo")
@click.argument("path", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--k", "ks", default="5,10,25", show_default=True, help="Comma-separated k values.")
@click.option("--no-llm", is_flag=True, help="Use the heuristic archivist even if an LLM is set.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object to stdout.")
@save_option
@click.option("--qa", is_flag=True, help="Question answering (F1, BLEU-1, J) instead of recall.")
@click.option(
    "--context",
    "context_mode",
    is_flag=True,
    help="Evidence recall of the injected context at token budgets, against baselines.",
)
@click.option(
    "--budgets",
    default="250,500,1000,1500",
    show_default=True,
    help="--context: comma-separated token budgets.",
)
@click.option(
    "--limit", type=click.IntRange(1), help="--qa/--context: first N questions per conversation."
)
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), help="--qa: results dir.")
@click.option("--answer-model", help="--qa: answer model name on the configured LLM endpoint.")
@click.option("--judge-model", help="--qa: judge model name (default: the answer model).")
@click.option(
    "--plus",
    "plus_rankers",
    multiple=True,
    metavar="RANKER[,RANKER]",
    help="Also score preset archivist with these rankers added (an ablation row; repeatable).",
)
@pass_ctx
def locomo(
    ctx: Context,
    path: Path,
    ks: str,
    no_llm: bool,
    as_json: bool,
    qa: bool,
    context_mode: bool,
    budgets: str,
    limit: int | None,
    out: Path | None,
    answer_model: str | None,
    judge_model: str | None,
    plus_rankers: tuple[str, ...],
    save: Path | None,
) -> None:
    """Evidence recall@k on a LoCoMo file (archivist vs BM25, dense, plain RRF), or --qa."""
    from ..bench.locomo import plus, run_locomo
    from ..bench.report import locomo_table
    from ..errors import ConfigError

    kvals = _parse_ks(ks)
    try:
        extra = [plus([r.strip() for r in p.split(",") if r.strip()]) for p in plus_rankers]
    except ConfigError as e:
        raise click.BadParameter(str(e), param_hint="--plus") from None
    if qa and context_mode:
        raise click.UsageError("--qa and --context are separate runs: choose one")
    if qa:
        _locomo_qa(ctx, path, no_llm, as_json, limit, out, answer_model, judge_model, save)
        return
    if no_llm:
        ctx.settings = ctx.settings.with_(llm="none")
    if context_mode:
        _locomo_context(ctx, path, _parse_ks(budgets, "--budgets"), limit, as_json, save)
        return
    with StagedProgress(enabled=not as_json) as progress:
        result = run_locomo(ctx.open(create=True), path, kvals, progress=progress, extra=extra)
    _print(result, as_json, locomo_table, save)


@bench.command("state")
@click.argument(
    "path", required=False, type=click.Path(exists=True, dir_okay=False, path_type=Path)
)
@click.option("--budget", default=600, show_default=True, type=click.IntRange(1))
@click.option("--no-llm", is_flag=True, help="Use the heuristic archivist even if an LLM is set.")
@click.option(
    "--only",
    default="",
    metavar="ID[,ID...]",
    help="Run only these scenarios (a subset for a slow model).",
)
@click.option(
    "--reader",
    type=click.Choice(["openai", "local", "fake"]),
    help="Also have this model answer each probe from the context and from the dated history.",
)
@click.option("--reader-model", default="", help="The reader's model (a GGUF path for local).")
@click.option("--reader-url", default="", help="The reader's OpenAI-compatible base URL.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object to stdout.")
@save_option
@pass_ctx
def state(
    ctx: Context,
    path: Path | None,
    budget: int,
    no_llm: bool,
    only: str,
    reader: str | None,
    reader_model: str,
    reader_url: str,
    as_json: bool,
    save: Path | None,
) -> None:
    """Current vs outdated facts: answers, context coverage, stale facts shown as current.

    PATH: a suite file (default: the bundled state_suite.json). Each scenario
    runs on its own temporary store; --db is not touched. --reader: a model
    that reads archivist's context and, apart, the full dated history, answering
    each probe from each; their accuracy and sizes are reported side by side.
    """
    from ..bench.state import DEFAULT_SUITE, load_suite, run_state, state_table

    if path is None:
        if not DEFAULT_SUITE.is_file():
            raise click.UsageError(f"no FILE given and no bundled suite at {DEFAULT_SUITE}")
        path = DEFAULT_SUITE
    scenarios = load_suite(path)  # a bad file stops here, before any model loads
    if wanted := [w.strip() for w in only.split(",") if w.strip()]:
        unknown = sorted(set(wanted) - {s.id for s in scenarios})
        if unknown:
            raise click.UsageError(f"--only: no scenario {', '.join(unknown)} in {path.name}")
        scenarios = [s for s in scenarios if s.id in wanted]
    reading = None
    if reader:
        from ..llm import get_chat_model

        reading = get_chat_model(
            ctx.settings.with_(llm=reader, llm_model=reader_model, llm_base_url=reader_url)
        )
    if no_llm:
        ctx.settings = ctx.settings.with_(llm="none")
    with StagedProgress(enabled=not as_json) as progress:
        result = run_state(
            scenarios,
            settings=ctx.settings,
            budget=budget,
            suite=path.name,
            progress=progress,
            reader=reading,
        )
    _print(result, as_json, state_table, save)


@bench.command("judge")
@click.argument("path", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "--judge",
    "which",
    type=click.Choice(["model", "rules", "llm"]),
    default="model",
    show_default=True,
    help="The trained model, the old phrase rules, or the configured LLM.",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object to stdout.")
@save_option
@pass_ctx
def judge(ctx: Context, path: Path, which: str, as_json: bool, save: Path | None) -> None:
    """How well a judge labels pairs: accuracy, macro-F1, per label, confusion matrix.

    PATH: {"items": [...]} (or JSON lines) of relation items (speaker, older,
    newer, older_at, newer_at, label ends|continues|unrelated), support items
    (speaker, question, sentence, said_at, label yes|no|answers|neither),
    kind items (speaker, role, sentence, said_at, label state|preference|habit|
    goal|value|lesson|plan|event|chit-chat) and when items (speaker, sentence,
    time, said_at, label ahead|behind).
    """
    from ..bench.judge import RulesJudge, judge_table, run_judge
    from ..judge import LLMJudge, TrainedJudge
    from ..judge.items import read_items

    items = read_items(path)  # a bad file stops here, before any model loads
    if which == "rules":
        from ..embed import get_embedder

        chosen = RulesJudge(get_embedder(ctx.settings), ctx.settings)
    elif which == "llm":
        core = ctx.open(create=True).core
        if core.llm is None:
            raise click.UsageError("--judge llm needs an LLM (ARCHIVIST_LLM and its settings)")
        chosen = LLMJudge(lambda prompt, msgs, out: core.llm_call(prompt, msgs, out))
    else:
        chosen = TrainedJudge()
    result = run_judge(chosen, items, which, path.name)
    if as_json:
        emit_json({k: v for k, v in result.items() if k != "file"})
    else:
        click.echo(judge_table(result))
    _save(result, save)


def _locomo_context(
    ctx: Context,
    path: Path,
    budgets: tuple[int, ...],
    limit: int | None,
    as_json: bool,
    save: Path | None,
) -> None:
    from ..bench.locomo import run_locomo_context
    from ..bench.report import locomo_context_table

    with StagedProgress(enabled=not as_json) as progress:
        result = run_locomo_context(
            ctx.open(create=True), path, budgets, limit=limit, progress=progress
        )
    _print(result, as_json, locomo_context_table, save)


def _save(result: dict, path: Path | None) -> None:
    """Keep ``result`` in a result file with the command line of this run."""
    if path is not None:
        from ..bench.record import command_line, save

        save(result, path, command_line(click.get_current_context()))


def _print(
    result: dict, as_json: bool, table: Callable[[dict], str], path: Path | None = None
) -> None:
    """A benchmark's result: one JSON object to stdout, or its readable table; then saved
    (a file that cannot be written after all loses nothing printed)."""
    if as_json:
        emit_json(result)
    else:
        click.echo(table(result))
    _save(result, path)


def register(cli: click.Group) -> None:
    cli.add_command(bench)


def _chat_model(ctx: Context, model: str | None):
    """A ChatModel for ``model`` on the configured endpoint, or the configured model itself.

    A name different from ARCHIVIST_LLM_MODEL builds a second client from the same
    settings (provider, base URL, key) with only the model name changed.
    """
    from ..llm import get_chat_model

    settings = ctx.settings
    if model is None:
        return get_chat_model(settings)
    provider = settings.llm if settings.llm not in ("", "none") else "openai"
    return get_chat_model(settings.with_(llm=provider, llm_model=model))


def _locomo_qa(
    ctx: Context,
    path: Path,
    no_llm: bool,
    as_json: bool,
    limit: int | None,
    out: Path | None,
    answer_model: str | None,
    judge_model: str | None,
    save: Path | None,
) -> None:
    """Run the QA benchmark and write results.json, results.md and chart.png to ``out``."""
    import json

    from ..bench.chart import bar_chart
    from ..bench.qa import run_locomo_qa
    from ..bench.report import locomo_qa_table

    answer = _chat_model(ctx, answer_model) if answer_model or not no_llm else None
    judge = _chat_model(ctx, judge_model) if judge_model else answer
    if no_llm:  # the heuristic archivist ingests; an explicit --answer-model still answers
        ctx.settings = ctx.settings.with_(llm="none")
    with StagedProgress(enabled=not as_json) as progress:
        result = run_locomo_qa(
            ctx.open(create=True),
            path,
            answer_llm=answer,
            judge_llm=judge,
            limit=limit,
            progress=progress,
        )
    table = locomo_qa_table(result)
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        (out / "results.json").write_text(
            json.dumps(result, indent=2, ensure_ascii=False, default=str), encoding="utf-8"
        )
        series = {s: row["f1"] for s, row in result["systems"].items() if "f1" in row}
        png, colors = bar_chart(["1", "2", "3", "4", "5"], series)
        (out / "chart.png").write_bytes(png)
        legend = ", ".join(f"{s}: rgb{c}" for s, c in colors.items())
        (out / "results.md").write_text(
            f"{table}\n\n![F1 per category](chart.png)\n\nChart colours: {legend}.\n",
            encoding="utf-8",
        )
    if as_json:
        emit_json(result)
    else:
        click.echo(table)
        if out is not None:
            click.echo(f"\nwrote {out / 'results.json'}, {out / 'results.md'}, {out / 'chart.png'}")
    # the per-question records quote the dataset, whose licence keeps it out of a
    # repository the result file may go to; --out keeps them
    _save({k: v for k, v in result.items() if k != "items"}, save)


@bench.command("scale")
@click.option(
    "--sizes",
    default="10000,100000,1000000",
    show_default=True,
    help="Comma-separated store sizes (messages) to grow through.",
)
@click.option("--queries", default=100, show_default=True, type=click.IntRange(1, 10000))
@click.option(
    "--ann-from",
    type=click.IntRange(1),
    help="Store size (vectors) from which whole-store search scans 8-bit codes "
    "(default: the store's, 100000).",
)
@click.option(
    "--pg-dsn",
    help="Also grow a PostgreSQL store (pgvector) at this DSN in the same run, side by side "
    "(use an empty database or --pg-schema).",
)
@click.option("--pg-schema", default="public", show_default=True)
@click.option(
    "--pg-max",
    default=100_000,
    show_default=True,
    type=click.IntRange(1),
    help="Largest size grown on PostgreSQL (its inserts ran about 3,500 rows/s up to 1M "
    "here: a million takes five minutes).",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object to stdout.")
@save_option
@pass_ctx
def scale(
    ctx: Context,
    sizes: str,
    queries: int,
    ann_from: int | None,
    pg_dsn: str | None,
    pg_schema: str,
    pg_max: int,
    as_json: bool,
    save: Path | None,
) -> None:
    """Open, search and insert costs on a synthetic store as it grows (use a fresh --db)."""
    from dataclasses import replace

    from ..bench.report import scale_table
    from ..bench.scale import run_scale
    from ..service import MemoryService

    grow = _parse_ks(sizes, "--sizes")
    pg = None  # connected first: a wrong DSN fails before the SQLite run, not after it
    if pg_dsn:
        pg_settings = replace(ctx.settings, store="postgres", pg_dsn=pg_dsn, pg_schema=pg_schema)
        pg = MemoryService(settings=pg_settings)
    try:
        with StagedProgress(enabled=not as_json) as progress:
            result = run_scale(
                ctx.open(create=True), grow, queries, progress=progress, ann_from=ann_from
            )
            if pg is not None:
                on_pg = [n for n in grow if n <= pg_max]
                result["postgres"] = run_scale(pg, on_pg, queries, progress=progress)
                result["postgres"]["skipped_sizes"] = [n for n in grow if n > pg_max]
    finally:
        if pg is not None:
            pg.close()
    _print(result, as_json, scale_table, save)


@bench.command("add")
@click.option("--messages", default=3000, show_default=True, type=click.IntRange(2, 1_000_000))
@click.option("--adds", default=200, show_default=True, type=click.IntRange(1, 100_000))
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object to stdout.")
@save_option
@pass_ctx
def add(ctx: Context, messages: int, adds: int, as_json: bool, save: Path | None) -> None:
    """Latency of adding one message, with and without reconciliation on write.

    Two identical synthetic stores in a temp dir (heuristic archivist, the
    configured embedder); --db is not touched.
    """
    from ..bench.add import add_table, run_add

    with StagedProgress(enabled=not as_json) as progress:
        result = run_add(messages=messages, adds=adds, settings=ctx.settings, progress=progress)
    _print(result, as_json, add_table, save)


@bench.command("implicit")
@click.argument("pairs", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.argument("locomo", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "--budgets", default="1000,2000", show_default=True, help="Comma-separated token budgets."
)
@click.option("--seed", default=0, show_default=True, help="Where the cues are stitched in.")
@click.option("--no-llm", is_flag=True, help="Use the heuristic archivist even if an LLM is set.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object to stdout.")
@save_option
@pass_ctx
def implicit(
    ctx: Context,
    pairs: Path,
    locomo: Path,
    budgets: str,
    seed: int,
    no_llm: bool,
    as_json: bool,
    save: Path | None,
) -> None:
    """Whether a cue said once reaches the context of a later turn that needs it.

    PAIRS: {"items": [...]} of cue/trigger pairs (id, kind value|goal|state|lesson,
    cue: turns of A and B, cue_turn, trigger said by A). Each cue session is stitched
    into a conversation of LOCOMO (a LoCoMo file) in its first two thirds; each
    trigger is A's turn at the end. Use a fresh --db.
    """
    from ..bench.implicit import implicit_table, read_pairs, run_implicit

    read_pairs(pairs)  # a bad file stops here, before any model loads
    if no_llm:
        ctx.settings = ctx.settings.with_(llm="none")
    with StagedProgress(enabled=not as_json) as progress:
        result = run_implicit(
            ctx.open(create=True),
            locomo,
            pairs,
            _parse_ks(budgets, "--budgets"),
            seed=seed,
            progress=progress,
        )
    _print(result, as_json, implicit_table, save)
