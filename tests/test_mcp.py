"""The MCP server driven by the SDK's own client, over streamable HTTP (on the API server) and
over stdio (``superchargedb mcp`` as a subprocess, an HTTP client of the live server)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from conftest import ALICE, LiveServer

mcp_client = pytest.importorskip("mcp.client", reason="pip install -e . (mcp is a dependency)")
from mcp.client.stdio import StdioServerParameters  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402

SRC = str(Path(__file__).resolve().parent.parent / "src")
TOOLS = {"search", "answer", "get_unit", "list_documents", "me"}
QUESTION = "How fast was the failover cutover?"


@asynccontextmanager
async def over_http(url: str, key: str) -> AsyncIterator[Any]:
    import httpx2  # the SDK's HTTP client

    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=60)
    async with mcp_client.Client(streamable_http_client(f"{url}/mcp", http_client=http)) as c:
        yield c


@asynccontextmanager
async def over_stdio(url: str, key: str) -> AsyncIterator[Any]:
    env = {**os.environ, "SCDB_API_KEY": key, "PYTHONPATH": SRC}
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "superchargedb.cli.main", "mcp", "--url", url],
        env=env,
    )
    async with mcp_client.Client(params) as c:
        yield c


def data(result: Any) -> Any:
    assert not result.is_error, result.content
    return result.structured_content or json.loads(result.content[0].text)


async def tour(connect: Any, url: str) -> None:
    async with connect(url, "aegis_sk_alice") as c:
        assert {t.name for t in (await c.list_tools()).tools} == TOOLS
        hits = data(await c.call_tool("search", {"q": "failover cutover", "top_k": 3}))["hits"]
        assert hits and all("source_uri" in h and "locator" in h for h in hits)
        ans = data(await c.call_tool("answer", {"q": QUESTION}))
        assert ans["citations"] and "[1]" in ans["text"]
        cite = ans["citations"][0]
        assert cite["source_uri"] and cite["locator"]["kind"] == "char_span"
        unit = data(await c.call_tool("get_unit", {"unit_id": cite["unit_id"]}))
        assert unit["source_uri"] == cite["source_uri"]
        docs = data(await c.call_tool("list_documents", {}))["docs"]
        assert "failover-runbook" in {d["doc_id"] for d in docs}
        assert data(await c.call_tool("me", {}))["active_scope"] == "acme/alpha/backend"
        # A scope outside the grants: the API's own 403, in the tool's error.
        bad = await c.call_tool("search", {"q": "pricing", "scope": "acme/beta"})
        api = httpx.post(
            f"{url}/v1/search", headers={**ALICE, "X-Aegis-Scope": "acme/beta"}, json={"q": "x"}
        )
        assert api.status_code == 403
        assert bad.is_error and f"HTTP 403 {api.json()['error']['code']}" in bad.content[0].text
    async with connect(url, "aegis_sk_carol") as c:
        # The free tier has no answers: the API's 402.
        refused = await c.call_tool("answer", {"q": QUESTION})
        assert refused.is_error and "HTTP 402" in refused.content[0].text
        # Another tenant's Units never appear.
        hits = data(await c.call_tool("search", {"q": "failover cutover 0.8 seconds"}))["hits"]
        assert all(h["scope"].startswith("acme/beta") for h in hits)
        alice_unit = cite["unit_id"]
        gone = await c.call_tool("get_unit", {"unit_id": alice_unit})
        assert gone.is_error and "HTTP 404" in gone.content[0].text


def test_mcp_over_streamable_http(live: LiveServer, svc: Any) -> None:
    from superchargedb.demo import seed

    seed(svc)
    asyncio.run(tour(over_http, live.url))
    # No key: refused before the MCP layer, in the API's error shape.
    r = httpx.post(f"{live.url}/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
    assert r.status_code == 401 and r.json()["error"]["code"] == "unauthorized"


def test_mcp_over_stdio(live: LiveServer, svc: Any) -> None:
    from superchargedb.demo import seed

    seed(svc)
    asyncio.run(tour(over_stdio, live.url))
    env = {k: v for k, v in os.environ.items() if k != "SCDB_API_KEY"}
    out = subprocess.run(
        [sys.executable, "-m", "superchargedb.cli.main", "mcp", "--url", live.url],
        env={**env, "PYTHONPATH": SRC},
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert out.returncode == 2 and "needs an API key" in out.stderr
