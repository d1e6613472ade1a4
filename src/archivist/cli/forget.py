"""``archivist forget``, ``correct`` and ``reset``: deletion that means what it says.

Each calls one MemoryService method; errors are one line with the error's exit code
(cli/main.py): an unknown id exits 6 (NotFound), bad input 3 (InputError). Each deletion
leaves a line in the audit log naming the CLI (``archivist audit``).
"""

from __future__ import annotations

import click

from ..errors import InputError
from .common import Context, emit_json, pass_ctx

ACTOR = "cli"  # who the audit log names for this command's deletions (`archivist audit`)


@click.command()
@click.option("--claim", "claim", metavar="ID", help="Forget one memory (claim) for good.")
@click.option("--message", "message", metavar="CONV:ID", help="Forget one message.")
@click.option("--conversation", help="Forget a whole conversation.")
@click.option("--person", metavar="NAME", help="Forget what a person said and claims about them.")
@click.option("--received", is_flag=True, help="With --person: also messages others sent them.")
@click.option("--json", "as_json", is_flag=True)
@pass_ctx
def forget(
    ctx: Context,
    claim: str | None,
    message: str | None,
    conversation: str | None,
    person: str | None,
    received: bool,
    as_json: bool,
) -> None:
    """Delete from every index: a claim, a message, a conversation or a person."""
    given = [x for x in (claim, message, conversation, person) if x is not None]
    if len(given) != 1:
        raise InputError("forget takes exactly one of --claim, --message, --conversation, --person")
    if received and person is None:
        raise InputError("--received goes with --person")
    mem = ctx.memory
    if claim is not None:
        what, n = f"claim {claim}", mem.delete(claim, actor=ACTOR)
    elif message is not None:
        conv, mid = _split_message(mem, message)
        what, n = f"message {mid} of {conv}", mem.forget_message(conv, mid, actor=ACTOR)
    elif conversation is not None:
        what, n = f"conversation {conversation}", mem.delete(conversation=conversation, actor=ACTOR)
    else:
        what = f"person {person}" + (" (with messages to them)" if received else "")
        n = mem.delete(person=person, received=received, actor=ACTOR)
    if as_json:
        emit_json({"forgot": what, "deleted": n})
    else:
        click.echo(f"forgot {what}: {n} deleted")


def _split_message(mem, ref: str) -> tuple[str, str]:
    """CONVERSATION:MESSAGE_ID, where either may hold colons ("user:alice:m3", "c:D1:4"):
    the split that names a stored message, else the first colon."""
    cuts = [i for i, ch in enumerate(ref) if ch == ":" and 0 < i < len(ref) - 1]
    if not cuts:
        raise InputError(f"--message takes CONVERSATION:MESSAGE_ID; got {ref!r}")
    for i in cuts:
        if mem.store.get_message(ref[:i], ref[i + 1 :]) is not None:
            return ref[:i], ref[i + 1 :]
    return ref[: cuts[0]], ref[cuts[0] + 1 :]


@click.command()
@click.argument("claim_id")
@click.argument("text")
@click.option("--reason", default="", help="Why (kept in the claim's history).")
@click.option("--json", "as_json", is_flag=True)
@pass_ctx
def correct(ctx: Context, claim_id: str, text: str, reason: str, as_json: bool) -> None:
    """Correct a memory: a new claim with TEXT supersedes CLAIM_ID (history kept)."""
    new = ctx.memory.update(claim_id, text, reason=reason)
    if as_json:
        emit_json(new.to_dict())
    else:
        click.echo(f"claim {claim_id} corrected: #{new.id} {new.text}")


@click.command()
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@pass_ctx
def reset(ctx: Context, yes: bool) -> None:
    """Forget everything in this store: messages, claims, people, jobs."""
    mem = ctx.memory
    if not yes:
        where = mem.stats().get("path", "this store")
        click.confirm(f"Forget everything in {where}?", abort=True)
    mem.reset(actor=ACTOR)
    click.echo("memory reset: everything forgotten")


def register(cli: click.Group) -> None:
    cli.add_command(forget)
    cli.add_command(correct)
    cli.add_command(reset)
