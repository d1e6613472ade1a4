"""``archivist profile NAME``: what holds for a person now (or at a time), grouped."""

from __future__ import annotations

import click

from .common import Context, at_option, emit_json, parse_at, pass_ctx


@click.command()
@click.argument("person")
@at_option()
@click.option("--json", "as_json", is_flag=True, help="Print the profile as JSON.")
@pass_ctx
def profile(ctx: Context, person: str, at: str | None, as_json: bool) -> None:
    """What holds for PERSON: home, work, relationships, family, health and diet, pets,
    possessions and hobbies, plans, other; each with since when, who said it, and what
    it replaced."""
    found = ctx.memory.profile(person, at=parse_at(at))
    if as_json:
        emit_json(found.to_dict())
    else:
        click.echo(found.text())


def register(cli: click.Group) -> None:
    cli.add_command(profile)
