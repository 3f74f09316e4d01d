"""``GET /v1/me``: who the caller is, what it may do and how much of its quota is used.

The console's scope picker offers ``scopes`` and starts at ``active_scope``; the MCP tools read
the same object. Every authenticated principal may ask about itself (no permission needed).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import Depends, FastAPI
from starlette.concurrency import run_in_threadpool

from ..auth.admin import principal_dict
from ..service import Service
from ..types import Principal
from .openapi import ERROR_RESPONSES

PrincipalDep = Callable[..., Awaitable[Principal]]


def describe(svc: Service, p: Principal) -> dict[str, Any]:
    me = principal_dict(p)
    for internal in ("doc_quota", "disabled"):  # the quota is shown with its use below
        me.pop(internal, None)
    return {
        **me,
        "quota": {
            "documents": {"used": svc.documents_used(p), "quota": p.doc_quota},
            **svc.object_usage(p),
        },
    }


def register_me(app: FastAPI, svc: Service, principal: PrincipalDep) -> None:
    @app.get("/v1/me", tags=["auth"], responses=ERROR_RESPONSES.subset(401))
    async def me(p: Principal = Depends(principal)) -> Any:
        return await run_in_threadpool(describe, svc, p)
