"""``archivist mcp``: serve memory to MCP clients (Claude Desktop, IDEs, agents) over stdio."""

from __future__ import annotations

import click

from ..errors import ConfigError
from .common import Context, pass_ctx


@click.command("mcp")
@click.option("--name", default="archivist", show_default=True, help="Server name clients see.")
@pass_ctx
def mcp_command(ctx: Context, name: str) -> None:
    """Run the MCP server over stdio: 12 tools (remember, recall, ask, profile,
    context, forget, add_memory, get_memories, get_memory, update_memory,
    delete_memory, memory_history) and the people as resources.

    Stdout carries the protocol, so nothing else is printed there; the store
    is the one --db / ARCHIVIST_DB names.
    """
    try:
        from ..server.mcp import build_server
    except ImportError as e:  # the SDK is an optional extra
        raise ConfigError(
            f"the MCP server needs the 'mcp' package ({e}); pip install 'archivist[mcp]' "
            "(from a clone: pip install '.[mcp]')"
        ) from e
    build_server(ctx.open(create=True), name=name).run("stdio")


def register(cli: click.Group) -> None:
    cli.add_command(mcp_command)
