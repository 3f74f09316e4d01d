"""Admin routes: principals, keys, the audit chain (tenant admins are bounded, D-7)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import Depends, FastAPI, Request
from starlette.concurrency import run_in_threadpool

from ..errors import ValidationError
from ..service import Service
from ..types import Principal
from .openapi import ERROR_RESPONSES

PrincipalDep = Callable[..., Awaitable[Principal]]
BodyOf = Callable[[Request], Awaitable[Any]]


def register_admin(app: FastAPI, svc: Service, principal: PrincipalDep, body_of: BodyOf) -> None:
    errs = ERROR_RESPONSES.subset(401, 403, 404, 409, 422)

    @app.post("/v1/admin/principals", tags=["admin"], responses=errs, status_code=201)
    async def create_principal(request: Request, p: Principal = Depends(principal)) -> Any:
        body = await body_of(request)
        return await run_in_threadpool(svc.admin_create_principal, p, body)

    @app.get("/v1/admin/principals", tags=["admin"], responses=errs)
    async def list_principals(p: Principal = Depends(principal)) -> Any:
        return await run_in_threadpool(svc.admin_list_principals, p)

    @app.get("/v1/admin/principals/{name}", tags=["admin"], responses=errs)
    async def get_principal(name: str, p: Principal = Depends(principal)) -> Any:
        return await run_in_threadpool(svc.admin_get_principal, p, name)

    @app.patch("/v1/admin/principals/{name}", tags=["admin"], responses=errs)
    async def update_principal(
        name: str, request: Request, p: Principal = Depends(principal)
    ) -> Any:
        body = await body_of(request)
        return await run_in_threadpool(svc.admin_update_principal, p, name, body)

    @app.get("/v1/admin/principals/{name}/keys", tags=["admin"], responses=errs)
    async def list_keys(name: str, p: Principal = Depends(principal)) -> Any:
        return await run_in_threadpool(svc.admin_list_keys, p, name)

    async def options(request: Request, name: str) -> Any:
        """The one optional field of a key route's body: empty or ``{}`` means its default."""
        raw = await request.body()
        body = await body_of(request) if raw.strip() else {}
        if not isinstance(body, dict):
            raise ValidationError("body must be a JSON object")
        unknown = set(body) - {name}
        if unknown:
            raise ValidationError(f"unknown field(s): {sorted(unknown)}")
        return body

    @app.post("/v1/admin/principals/{name}/keys", tags=["admin"], responses=errs, status_code=201)
    async def create_key(name: str, request: Request, p: Principal = Depends(principal)) -> Any:
        body = await options(request, "expires_at")
        expires = _int_or_none(body.get("expires_at"), "expires_at")
        return await run_in_threadpool(svc.admin_create_key, p, name, expires)

    @app.delete("/v1/admin/keys/{key_id}", tags=["admin"], responses=errs)
    async def revoke_key(key_id: str, p: Principal = Depends(principal)) -> Any:
        return await run_in_threadpool(svc.admin_revoke_key, p, key_id)

    @app.post("/v1/admin/keys/{key_id}/rotate", tags=["admin"], responses=errs)
    async def rotate_key(key_id: str, request: Request, p: Principal = Depends(principal)) -> Any:
        body = await options(request, "overlap_s")
        overlap = _int_or_none(body.get("overlap_s", 0), "overlap_s")
        if overlap is None:  # null is not "no overlap": a wrong type like any other
            raise ValidationError("overlap_s must be an integer", field="overlap_s")
        return await run_in_threadpool(svc.admin_rotate_key, p, key_id, overlap)

    @app.get("/v1/audit/verify", tags=["admin"], responses=ERROR_RESPONSES.subset(401, 403))
    async def audit_verify(p: Principal = Depends(principal)) -> Any:
        return await run_in_threadpool(svc.audit_verify, p)


def _int_or_none(v: Any, field: str) -> int | None:
    if v is None:
        return None
    # Bounded so that epoch-ms arithmetic and SQLite's 64-bit integers cannot overflow (a 500).
    if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= 2**53:
        raise ValidationError(f"{field}: expected an integer between 0 and 2^53", field=field)
    return v
