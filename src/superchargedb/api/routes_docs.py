"""Document and Unit listing, ACL changes, replace, usage."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

from fastapi import Depends, FastAPI, Query, Request
from starlette.concurrency import run_in_threadpool

from ..errors import ValidationError
from ..service import Service
from ..types import Principal
from .openapi import ERROR_RESPONSES
from .scoping import request_scope

PrincipalDep = Callable[..., Awaitable[Principal]]
BodyOf = Callable[[Request], Awaitable[Any]]


def iso_ms(value: str | None, name: str) -> int | None:
    if value is None:
        return None
    try:
        d = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise ValidationError(f"{name}: expected an ISO-8601 time", field=name) from None
    if d.tzinfo is None:
        d = d.replace(tzinfo=UTC)
    return int(d.timestamp() * 1000)


def register_docs(app: FastAPI, svc: Service, principal: PrincipalDep, body_of: BodyOf) -> None:
    read_errs = ERROR_RESPONSES.subset(401, 403, 404, 422)

    @app.get("/v1/docs", tags=["docs"], responses=read_errs)
    async def list_docs(
        p: Principal = Depends(principal),
        scope: str | None = Depends(request_scope),
        cursor: str | None = Query(default=None, max_length=512),
        limit: int | None = Query(default=None),
        plane: str | None = Query(default=None),
        modality: str | None = Query(default=None),
        t_from: str | None = Query(default=None, alias="from"),
        t_to: str | None = Query(default=None, alias="to"),
    ) -> Any:
        return await run_in_threadpool(
            lambda: svc.list_docs(
                p,
                scope,
                None,
                cursor=cursor,
                limit=limit,
                plane=plane,
                modality=modality,
                t_from=iso_ms(t_from, "from"),
                t_to=iso_ms(t_to, "to"),
            )
        )

    @app.get("/v1/units", tags=["units"], responses=read_errs)
    async def list_units(
        p: Principal = Depends(principal),
        scope: str | None = Depends(request_scope),
        doc_id: str | None = Query(default=None, max_length=512),
        cursor: str | None = Query(default=None, max_length=512),
        limit: int | None = Query(default=None),
        plane: str | None = Query(default=None),
        modality: str | None = Query(default=None),
        t_from: str | None = Query(default=None, alias="from"),
        t_to: str | None = Query(default=None, alias="to"),
    ) -> Any:
        return await run_in_threadpool(
            lambda: svc.list_units(
                p,
                scope,
                None,
                doc_id=doc_id,
                cursor=cursor,
                limit=limit,
                plane=plane,
                modality=modality,
                t_from=iso_ms(t_from, "from"),
                t_to=iso_ms(t_to, "to"),
            )
        )

    @app.patch("/v1/docs/{doc_id:path}", tags=["docs"], responses=read_errs)
    async def patch_doc(
        doc_id: str,
        request: Request,
        p: Principal = Depends(principal),
        scope: str | None = Depends(request_scope),
    ) -> Any:
        body = await body_of(request)
        return await run_in_threadpool(svc.patch_doc, p, doc_id, body, scope, None)

    @app.put(
        "/v1/docs/{doc_id:path}",
        tags=["docs"],
        responses=ERROR_RESPONSES.subset(401, 402, 403, 413, 422),
    )
    async def put_doc(
        doc_id: str,
        request: Request,
        p: Principal = Depends(principal),
        scope: str | None = Depends(request_scope),
    ) -> Any:
        body = await body_of(request)
        return await run_in_threadpool(svc.put_doc, p, doc_id, body, scope)

    @app.get("/v1/usage", tags=["usage"], responses=ERROR_RESPONSES.subset(401, 403, 422))
    async def usage(
        p: Principal = Depends(principal),
        t_from: str | None = Query(default=None, alias="from"),
        t_to: str | None = Query(default=None, alias="to"),
    ) -> Any:
        return await run_in_threadpool(svc.usage, p, iso_ms(t_from, "from"), iso_ms(t_to, "to"))
