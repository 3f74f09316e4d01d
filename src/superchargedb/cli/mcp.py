"""``superchargedb mcp``: the MCP server over stdio, as an HTTP client of a running server.

It never opens the data dir (so it never takes its lock); the key comes from ``--key`` or
``$SCDB_API_KEY`` and is required: without one the command exits before speaking MCP.
"""

from __future__ import annotations

import os

import typer


def register(app: typer.Typer) -> None:
    @app.command()
    def mcp(
        url: str = typer.Option(
            os.environ.get("SCDB_URL", "http://127.0.0.1:8080"), help="The server's base URL"
        ),
        key: str | None = typer.Option(
            None, help="API key (default: $SCDB_API_KEY); never logged", show_default=False
        ),
    ) -> None:
        """Serve the MCP tools (search, answer, get_unit, list_documents, me) over stdio."""
        from ..mcp_server import build, http_call

        api_key = key or os.environ.get("SCDB_API_KEY")
        if not api_key:
            typer.echo("superchargedb mcp needs an API key: --key or $SCDB_API_KEY", err=True)
            raise typer.Exit(2)
        build(http_call(url.rstrip("/"), api_key)).run("stdio")
