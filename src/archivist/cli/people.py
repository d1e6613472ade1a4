"""``archivist people`` (persons across conversations, ``declare``, ``resolve``) and
``archivist decisions`` (the identity decisions with their reasons and evidence)."""

from __future__ import annotations

import click

from .common import Context, emit_json, pass_ctx


def _person_dict(p, counts: dict[tuple[str, str], int]) -> dict:
    from ..lang.text import person_key

    identities = [
        {"conversation": c, "name": n, "messages": counts.get((c, person_key(n)), 0)}
        for c, n in p.identities
    ]
    return {
        "id": p.id,
        "name": p.name,
        "declared": p.declared,
        "messages": sum(i["messages"] for i in identities),
        "identities": identities,
    }


def _decision_dict(d) -> dict:
    return {
        "id": d.id,
        "kind": d.kind,
        "verdict": d.verdict,
        "a": d.a,
        "b": d.b,
        "method": d.method,
        "reasons": d.reasons,
        "evidence": list(d.evidence),
        "steps": list(d.steps),
        "created_at": d.created_at.isoformat() if d.created_at else None,
    }


@click.group(invoke_without_command=True)
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def people(click_ctx: click.Context, as_json: bool) -> None:
    """Persons across conversations, each with its (conversation, name) identities."""
    if click_ctx.invoked_subcommand is not None:
        return
    ctx = click_ctx.find_object(Context)
    found = ctx.memory.persons()
    counts = ctx.memory.store.identity_message_counts()
    rows = [_person_dict(p, counts) for p in found]
    if as_json:
        emit_json(rows)
        return
    for r in rows:
        flag = " [declared]" if r["declared"] else ""
        where = ", ".join(
            f"{i['conversation']}/{i['name']} ({i['messages']})" for i in r["identities"]
        )
        click.echo(f"{r['id']}  {r['name']}{flag}: {r['messages']} messages in {where}")
    if not rows:
        click.echo("(no persons: run `archivist ingest` first)")


@people.command("declare")
@click.argument("user_id")
@click.argument("conversation")
@click.argument("name")
@click.option("--json", "as_json", is_flag=True)
@pass_ctx
def declare(ctx: Context, user_id: str, conversation: str, name: str, as_json: bool) -> None:
    """State that NAME in CONVERSATION is the user USER_ID (merges without an LLM)."""
    p = ctx.memory.declare_identity(user_id, conversation, name)
    row = _person_dict(p, ctx.memory.store.identity_message_counts())
    if as_json:
        emit_json(row)
        return
    where = ", ".join(f"{i['conversation']}/{i['name']}" for i in row["identities"])
    click.echo(f"{p.id}: {where}")


@people.command("merge")
@click.argument("keep")
@click.argument("drop")
@click.option("--reason", default="", help="Why (kept with the decision).")
@click.option("--json", "as_json", is_flag=True)
@pass_ctx
def merge(ctx: Context, keep: str, drop: str, reason: str, as_json: bool) -> None:
    """KEEP and DROP (ids, or names one person goes by) are one person: your decision."""
    p = ctx.memory.merge_people(keep, drop, reason=reason)
    _show(ctx, p, as_json)


@people.command("split")
@click.argument("person")
@click.argument("conversation")
@click.argument("name")
@click.option("--reason", default="", help="Why (kept with the decision).")
@click.option("--json", "as_json", is_flag=True)
@pass_ctx
def split(
    ctx: Context, person: str, conversation: str, name: str, reason: str, as_json: bool
) -> None:
    """NAME in CONVERSATION is not PERSON: it becomes a person of its own, for good."""
    p = ctx.memory.split_person(person, conversation, name, reason=reason)
    _show(ctx, p, as_json)


def _show(ctx: Context, p, as_json: bool) -> None:
    row = _person_dict(p, ctx.memory.store.identity_message_counts())
    if as_json:
        emit_json(row)
        return
    where = ", ".join(f"{i['conversation']}/{i['name']}" for i in row["identities"])
    click.echo(f"{p.id}  {p.name}: {where}")


@people.command("resolve")
@click.option("--max-steps", type=click.IntRange(1, 50), help="Agent steps per candidate pair.")
@click.option("--json", "as_json", is_flag=True)
@pass_ctx
def resolve(ctx: Context, max_steps: int | None, as_json: bool) -> None:
    """Decide every undecided candidate pair now (an agent with an LLM, else SEPARATE)."""
    result = ctx.memory.resolve_people(max_steps=max_steps)
    if as_json:
        emit_json(result)
    elif "skipped" in result:
        click.echo(f"skipped: {result['skipped']}")
    else:
        click.echo(", ".join(f"{k} {v}" for k, v in result.items()))


@click.command()
@click.option("--verdict", type=click.Choice(["MERGE", "SEPARATE"]), help="Only this verdict.")
@click.option("--json", "as_json", is_flag=True)
@pass_ctx
def decisions(ctx: Context, verdict: str | None, as_json: bool) -> None:
    """Identity decisions: verdict, the two sides, method, reasons and evidence."""
    rows = [
        _decision_dict(d) for d in ctx.memory.decisions() if verdict is None or d.verdict == verdict
    ]
    if as_json:
        emit_json(rows)
        return
    for r in rows:
        evidence = f"\n    evidence: {', '.join(r['evidence'])}" if r["evidence"] else ""
        click.echo(f"{r['verdict']:<8} {r['a']}  <>  {r['b']}  [{r['method']}]")
        click.echo(f"    {r['reasons']}{evidence}")
    if not rows:
        click.echo("(no decisions: run `archivist people resolve`)")


def register(cli: click.Group) -> None:
    cli.add_command(people)
    cli.add_command(decisions)
