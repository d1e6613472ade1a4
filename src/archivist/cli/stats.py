"""``archivist stats``: what the store holds."""

from __future__ import annotations

import click

from .common import Context, emit_json, pass_ctx


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
@pass_ctx
def stats(ctx: Context, as_json: bool) -> None:
    """Counts of conversations, sessions, messages, people and vectors."""
    s = ctx.memory.stats()
    s["conversation_list"] = ctx.memory.conversations()
    s["llm"] = ctx.memory.llm_summary()
    s["archivist"] = ctx.memory.archivist.name
    if as_json:
        emit_json(s)
        return
    click.echo(f"store:         {s['path']} ({s['bytes'] / 1e6:.1f} MB)")
    for key in (
        "conversations",
        "sessions",
        "messages",
        "people",
        "persons",
        "episodes",
        "claims",
        "entities",
        "conflicts",
        "decisions",
        "scenes",
        "summaries",
    ):
        click.echo(f"{key + ':':<15}{s[key]}")
    if s.get("messages_out_of_range"):
        click.echo(
            f"out of range:  {s['messages_out_of_range']} messages dated outside the years "
            "accepted (kept; time grounding and extraction skip them)"
        )
    status = ", ".join(f"{n} {k}" for k, n in sorted(s["claims_by_status"].items()))
    click.echo(f"claim status:  {status or '-'}")
    jobs = ", ".join(f"{n} {k}" for k, n in sorted(s["jobs"].items()))
    click.echo(f"jobs:          {jobs or 'none'}")
    click.echo(f"embed model:   {s['embed_model'] or '(none yet)'}")
    for model, n in s["vectors"].items():
        click.echo(f"vectors:       {n} ({model})")
    if s["llm"]["model"]:
        click.echo(f"llm:           {s['llm']['model']} (archivist {s['archivist']})")
    else:
        click.echo("llm:           none configured (heuristic archivist)")
    click.echo(
        f"claims:        {s['claims_rejected']} rejected at validation; "
        f"{s['sessions_extracted']} sessions extracted; {s['llm_cache_entries']} cached LLM answers"
    )
    for model, tasks in s["llm"]["lifetime"].items():
        for task, row in tasks.items():
            click.echo(
                f"  {model} {task}: {row['calls']} calls, {row['cache_hits']} cache hits, "
                f"{row['input_tokens']} in / {row['output_tokens']} out tokens, "
                f"{row['seconds']:.1f} s, {row['failures']} failures"
            )
    for c in s["conversation_list"]:
        click.echo(
            f"  {c['id']}: {c['messages']} messages, {c['sessions']} sessions, "
            f"{', '.join(c['participants'])}"
        )


def register(cli: click.Group) -> None:
    cli.add_command(stats)
