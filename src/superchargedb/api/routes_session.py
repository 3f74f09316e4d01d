"""``POST /v1/session`` and ``DELETE /v1/session``: the console's session cookie (D-150).

The key signs in; the cookie it sets lets ``<img>``, ``<audio>`` and ``<video>`` load objects
and previews (the gate accepts it on GET/HEAD only, ``api/gate.py``); sign-out ends it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import Depends, FastAPI, Request
from fastapi.responses import Response
from starlette.concurrency import run_in_threadpool

from .. import console_sessions
from ..service import Service
from ..types import Principal
from .openapi import ERROR_RESPONSES

PrincipalDep = Callable[..., Awaitable[Principal]]


def register_session(app: FastAPI, svc: Service, principal: PrincipalDep) -> None:
    s = svc.settings

    def cookie(request: Request, value: str, max_age: int) -> str:
        # Secure whenever the page came over TLS; a plain-HTTP loopback console still works.
        secure = "; Secure" if request.url.scheme == "https" else ""
        return (
            f"{console_sessions.COOKIE}={value}; Path=/v1/; Max-Age={max_age}; HttpOnly;"
            f" SameSite=Strict{secure}"
        )

    @app.post("/v1/session", tags=["auth"], responses=ERROR_RESPONSES.subset(401))
    async def sign_in(
        request: Request, response: Response, p: Principal = Depends(principal)
    ) -> Any:
        def make() -> str:
            return console_sessions.create(svc.auth_store.sessions, p, s.console_session_max_s)

        token = await run_in_threadpool(make)
        response.headers["Set-Cookie"] = cookie(request, token, s.console_session_max_s)
        return {
            "principal": p.name,
            "idle_s": s.console_session_idle_s,
            "max_s": s.console_session_max_s,
        }

    @app.delete("/v1/session", tags=["auth"], responses=ERROR_RESPONSES.subset(401))
    async def sign_out(
        request: Request, response: Response, p: Principal = Depends(principal)
    ) -> Any:
        token = console_sessions.cookie_of(request.scope.get("headers", []))

        def drop() -> bool:
            if token is None:
                return False
            return console_sessions.end(svc.auth_store.sessions, token, p.id)

        ended = await run_in_threadpool(drop)
        response.headers["Set-Cookie"] = cookie(request, "", 0)
        return {"ended": ended}
