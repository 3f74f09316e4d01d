"""``GET /v1/stats``: a tenant admin's figures for its own scopes (stats.py)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import Depends, FastAPI
from starlette.concurrency import run_in_threadpool

from .. import stats
from ..service import Service
from ..types import Principal
from .openapi import ERROR_RESPONSES

PrincipalDep = Callable[..., Awaitable[Principal]]


def register_stats(app: FastAPI, svc: Service, principal: PrincipalDep) -> None:
    @app.get("/v1/stats", tags=["admin"], responses=ERROR_RESPONSES.subset(401, 403))
    async def tenant_stats(p: Principal = Depends(principal)) -> Any:
        def compute() -> dict[str, Any]:
            # A blocking read: off the event loop, on a worker thread.
            return stats.tenant_stats(svc.counts, p)

        return await run_in_threadpool(compute)
