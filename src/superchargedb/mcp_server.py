"""The MCP server: SuperChargeDB's search, cited answers, Units, documents and ``me`` as tools.

Built on the official MCP Python SDK. Every tool is a call of the HTTP API with the caller's key
(D-156): ``superchargedb mcp`` (stdio) is an HTTP client of a running server, so it never takes
the data dir's lock; the streamable-HTTP endpoint on the API server (``/mcp``) sends the same
requests through the API in-process with the key the MCP request carried. A tool's ``scope`` is
sent as ``X-Aegis-Scope``, so it is clamped exactly as for any other request, and an error is
the API's (a 403 ``scope_forbidden``, a 402 on the free tier) in the tool's error text. Each
result carries ``source_uri`` and the Locator, so an assistant can cite.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import httpx
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError

from . import __version__

# (method, path, query params, JSON body, X-Aegis-Scope, the MCP request's HTTP headers)
Call = Callable[
    [str, str, Mapping[str, Any] | None, Any, str | None, Mapping[str, str] | None],
    Awaitable[Any],
]

INSTRUCTIONS = (
    "SuperChargeDB is a retrieval database that answers with citations. Use `search` for "
    "passages, `answer` for a cited answer, `get_unit` to read one passage with its Locator, "
    "`list_documents` to browse and `me` for your grants. Cite each passage by its source_uri "
    "and locator. `scope` narrows a call to part of your grants (default: your active scope)."
)
TEXT_CHARS = 2000  # a hit's text is cut here: the assistant can read the whole Unit by id


def raise_for(r: httpx.Response) -> Any:
    """The JSON of a success, or a ToolError carrying the API's status, code and message."""
    try:
        body = r.json()
    except ValueError:
        body = None
    if r.is_success:
        return body
    err = (body or {}).get("error") if isinstance(body, dict) else None
    code = err.get("code", "http_error") if isinstance(err, dict) else "http_error"
    msg = err.get("message", r.reason_phrase) if isinstance(err, dict) else r.reason_phrase
    raise ToolError(f"HTTP {r.status_code} {code}: {msg}")


def _hit(h: Mapping[str, Any]) -> dict[str, Any]:
    text = str(h.get("text") or "")
    return {
        "unit_id": h.get("unit_id"),
        "source_uri": h.get("source_uri"),
        "locator": h.get("locator"),
        "doc_id": h.get("doc_id"),
        "scope": h.get("scope"),
        "plane": h.get("plane"),
        "score": h.get("score"),
        "text": text[:TEXT_CHARS] + ("…" if len(text) > TEXT_CHARS else ""),
    }


def build(call: Call) -> MCPServer:
    mcp: MCPServer = MCPServer(
        name="superchargedb",
        version=__version__,
        instructions=INSTRUCTIONS,
        # The SDK calls basicConfig (a no-op once logging is set up); its default level is INFO.
        log_level="WARNING",
    )

    def headers(ctx: Context) -> Mapping[str, str] | None:
        try:
            return ctx.headers
        except ValueError:  # no request (a direct call in-process)
            return None

    @mcp.tool(description="Hybrid search; each hit has its source_uri and Locator.")
    async def search(
        q: str,
        ctx: Context,
        scope: str | None = None,
        top_k: int = 8,
        planes: list[str] | None = None,
    ) -> dict[str, Any]:
        body: dict[str, Any] = {"q": q, "top_k": top_k, "snippets": False}
        if planes:
            body["planes"] = planes
        out = await call("POST", "/v1/search", None, body, scope, headers(ctx))
        return {"hits": [_hit(h) for h in out.get("hits", [])]}

    @mcp.tool(description="A cited answer: sentences with [n] markers and numbered citations.")
    async def answer(q: str, ctx: Context, scope: str | None = None) -> dict[str, Any]:
        body = {"q": q, "answer": True, "top_k": 8}
        out = await call("POST", "/v1/answer", None, body, scope, headers(ctx))
        a = out.get("answer") or {}
        return {
            "text": a.get("text"),
            "refused": a.get("refused"),
            "provider": a.get("provider"),
            "citations": [
                {k: c.get(k) for k in ("index", "unit_id", "source_uri", "locator")}
                for c in a.get("citations", [])
            ],
        }

    @mcp.tool(description="One Unit by id: its text, source_uri and Locator.")
    async def get_unit(unit_id: str, ctx: Context, scope: str | None = None) -> dict[str, Any]:
        u = await call("GET", f"/v1/units/{unit_id}", None, None, scope, headers(ctx))
        keys = ("unit_id", "text", "source_uri", "locator", "doc_id", "scope", "plane", "chunk")
        return {k: u.get(k) for k in keys}

    @mcp.tool(description="Documents visible to you, a page at a time (pass next_cursor on).")
    async def list_documents(
        ctx: Context, scope: str | None = None, cursor: str | None = None, limit: int = 50
    ) -> dict[str, Any]:
        params = {"limit": limit, **({"cursor": cursor} if cursor else {})}
        out = await call("GET", "/v1/docs", params, None, scope, headers(ctx))
        return {"docs": out.get("docs", []), "next_cursor": out.get("next_cursor")}

    @mcp.tool(description="Who you are: perms, tier, granted scopes, active scope, quota.")
    async def me(ctx: Context) -> dict[str, Any]:
        return dict(await call("GET", "/v1/me", None, None, None, headers(ctx)))

    return mcp


def http_call(base_url: str, api_key: str, timeout: float = 60.0) -> Call:
    """Tools over HTTP with one key (``superchargedb mcp``, stdio)."""
    client = httpx.AsyncClient(
        base_url=base_url, timeout=timeout, headers={"Authorization": f"Bearer {api_key}"}
    )

    async def call(
        method: str,
        path: str,
        params: Mapping[str, Any] | None,
        body: Any,
        scope: str | None,
        _: Mapping[str, str] | None,
    ) -> Any:
        hdrs = {"X-Aegis-Scope": scope} if scope else {}
        try:
            r = await client.request(method, path, params=params, json=body, headers=hdrs)
        except httpx.HTTPError as exc:
            msg = f"the SuperChargeDB server at {base_url} cannot be reached: {exc}"
            raise ToolError(msg) from None
        return raise_for(r)

    return call
