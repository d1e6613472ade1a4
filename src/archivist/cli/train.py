"""``archivist train judge|bears``: train what the package ships (the judge needs the
``train`` extra; the map of what a turn bears on needs numpy only)."""

from __future__ import annotations

import click

# Each command hands its arguments to its trainer's own parser (--help too: it lists them)
FORWARD = {"ignore_unknown_options": True, "allow_extra_args": True, "help_option_names": []}


@click.group()
def train() -> None:
    """Train what archivist ships.

    The judge needs the train extra: pip install 'archivist[train]'
    (a clone: pip install '.[train]'); the map of what a turn bears on needs numpy only.
    """


@train.command("judge", context_settings=FORWARD)
@click.pass_context
def judge(ctx: click.Context) -> None:
    """Fine-tune the judge on training/judge/*.jsonl and export it (--help: its options)."""
    from ..train.judge import main

    raise SystemExit(main(list(ctx.args)))


def register(cli: click.Group) -> None:
    cli.add_command(train)


@train.command("bears", context_settings=FORWARD)
@click.pass_context
def bears(ctx: click.Context) -> None:
    """Fit the map of what a turn bears on from training/implicit (--help: its options).

    Numpy only: needs no train extra.
    """
    from ..train.bears import main

    raise SystemExit(main(list(ctx.args)))
