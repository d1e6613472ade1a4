"""``archivist demo``: the zero-setup tour on embedded defaults.

It ingests a small three-session conversation the package ships (written for
archivist, no third-party data), then runs a few searches, so a fresh install
shows the whole write and read path with no API key and no network.
"""

from __future__ import annotations

import time
from importlib import resources
from pathlib import Path

import click
import platformdirs

from ..config import Settings
from ..service import MemoryService
from .common import Context, emit_json
from .search import print_hits

DEMO_QUERIES = (
    ("When did Ana get her cat?", {}),
    ("What kind of planes does Lee fly?", {"person": "Lee"}),
    ("Who is Ana's head nurse?", {}),
    ("Where are Ana and her sister going in September?", {}),
)


def sample_path() -> Path:
    """The shipped sample conversation (generic JSONL format)."""
    return Path(str(resources.files("archivist") / "data" / "sample_conversation.jsonl"))


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print results as JSON.")
@click.pass_context
def demo(click_ctx: click.Context, as_json: bool) -> None:
    """Ingest a shipped sample conversation and show what memory finds.

    Uses --db if given, otherwise a separate demo store in the user data dir,
    so the demo never mixes into your own memory.
    """
    ctx: Context = click_ctx.obj
    settings: Settings = ctx.settings
    if click_ctx.parent is None or click_ctx.parent.params.get("db") is None:
        settings = settings.with_(db_path=Path(platformdirs.user_data_dir("archivist")) / "demo.db")
    with MemoryService(settings=settings) as memory:
        t0 = time.perf_counter()
        results = memory.add(sample_path(), format="jsonl")
        ingest_s = time.perf_counter() - t0
        added = sum(r.added for r in results)
        report = {
            "db": str(settings.resolved_db_path()),
            "embedder": memory.embedder.name,
            "llm": None,
            "ingested": {"messages_added": added, "seconds": round(ingest_s, 2)},
            "searches": [],
        }
        if not as_json:
            click.echo(f"store: {report['db']}")
            click.echo(
                f"ingested the sample conversation: {added} new messages in {ingest_s:.1f} s "
                f"(embedder {memory.embedder.name}; archivist {memory.archivist.name}: "
                f"{memory.stats()['claims']} claims"
                + ("" if memory.llm else ", no LLM configured")
                + ")"
            )
        for query, filters in DEMO_QUERIES:
            hits = memory.search(query, k=3, **filters)
            report["searches"].append(
                {"query": query, **filters, "hits": [h.to_dict() for h in hits]}
            )
            if not as_json:
                extra = "".join(f" --{k} {v}" for k, v in filters.items())
                click.echo(f"\n$ archivist search {query!r}{extra} -k 3")
                print_hits(hits)
    if as_json:
        emit_json(report)


def register(cli: click.Group) -> None:
    cli.add_command(demo)
