"""``/mcp``: the MCP server (``mcp_server.py``) over streamable HTTP, on the API server.

The MCP request must carry an API key (401 otherwise, before the SDK sees it). Each tool then
calls this same API in-process, through every middleware, with that key and the tool's scope
as ``X-Aegis-Scope``: the gate, admission, the scope clamp, tiers and ACLs apply as to any
request, and the caller's address is kept for the per-address limits. Stateless (D-156): any
API process can answer any MCP request, as for the rest of the API.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

import httpx
from fastapi import FastAPI
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from ..errors import SCDBError, UnavailableError
from ..service import Service
from .body import send_error
from .gate import authenticate_request

log = logging.getLogger("superchargedb.api")


def register_mcp(app: FastAPI, svc: Service) -> None:
    try:
        from mcp.server.transport_security import TransportSecuritySettings

        from ..mcp_server import build, raise_for
    except ImportError:  # an environment installed before mcp became a dependency
        log.warning("the MCP SDK is not installed: no /mcp endpoint (pip install -e .)")
        return

    async def call(
        method: str,
        path: str,
        params: Mapping[str, Any] | None,
        body: Any,
        scope: str | None,
        headers: Mapping[str, str] | None,
    ) -> Any:
        hdrs = {"Authorization": (headers or {}).get("authorization", "")}
        if scope:
            hdrs["X-Aegis-Scope"] = scope
        client = ((headers or {}).get("x-scdb-mcp-client") or "127.0.0.1", 0)
        transport = httpx.ASGITransport(app=app, client=client)
        async with httpx.AsyncClient(transport=transport, base_url="http://mcp.internal") as c:
            r = await c.request(method, path, params=params, json=body, headers=hdrs)
        return raise_for(r)

    mcp = build(call)
    running: list[Any] = []  # the session manager of the lifespan now running

    def fresh_manager() -> Any:
        # A manager runs once; a new lifespan (a test client, schemathesis) gets a new one.
        # A key is required on every request (a browser cannot add one), so a rebinding page
        # gains nothing: the SDK's Host check would only refuse a server bound to another name.
        mcp.streamable_http_app(
            streamable_http_path="/mcp",
            stateless_http=True,
            json_response=True,
            transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        )
        return mcp.session_manager

    class Endpoint:  # an ASGI app, not a function: Starlette then passes it scope/receive/send
        async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
            try:
                await authenticate_request(svc, scope)
                if not running:
                    raise UnavailableError("the MCP endpoint is not running (no lifespan)")
            except SCDBError as exc:
                await send_error(send, exc)
                return
            # The tools' in-process calls count against the caller's address, not loopback.
            peer = scope.get("client")
            hdrs = [(k, v) for k, v in scope.get("headers", []) if k != b"x-scdb-mcp-client"]
            if peer:
                hdrs.append((b"x-scdb-mcp-client", peer[0].encode()))
            await running[-1].handle_request({**scope, "headers": hdrs}, receive, send)

    app.router.routes.append(Route("/mcp", Endpoint(), methods=["GET", "POST", "DELETE"]))

    previous = app.router.lifespan_context

    @asynccontextmanager
    async def lifespan(a: Any) -> AsyncIterator[Any]:
        manager = fresh_manager()
        async with manager.run():
            running.append(manager)
            try:
                async with previous(a) as state:
                    yield state
            finally:
                running.remove(manager)

    app.router.lifespan_context = lifespan
