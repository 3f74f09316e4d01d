"""Objects (PUT, GET/HEAD with Range, ETag, sandboxing headers, DELETE) and jobs."""

from __future__ import annotations

import os
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

from fastapi import Depends, FastAPI, Header, Query, Request
from fastapi.responses import Response, StreamingResponse
from starlette.concurrency import iterate_in_threadpool, run_in_threadpool

from ..errors import PayloadTooLargeError, QuotaExceededError
from ..service import Service
from ..storage.protocols_service import StoredObject
from ..storage.sqlite.objects import INLINE_TYPES, parse_range
from ..types import Principal
from .openapi import ERROR_RESPONSES
from .scoping import narrowed, request_scope

PrincipalDep = Callable[..., Awaitable[Principal]]

OBJECT_HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "Content-Security-Policy": "sandbox; default-src 'none'",
    "Accept-Ranges": "bytes",
    "Cache-Control": "private, no-store",
}


def _file_chunks(path: str, start: int, length: int, block: int = 256 * 1024) -> Iterator[bytes]:
    with open(path, "rb") as f:
        f.seek(start)
        left = length
        while left > 0:
            data = f.read(min(block, left))
            if not data:
                return
            left -= len(data)
            yield data


def register_objects(app: FastAPI, svc: Service, principal: PrincipalDep) -> None:
    @app.put(
        "/v1/objects/{key:path}",
        tags=["objects"],
        responses=ERROR_RESPONSES.subset(401, 402, 403, 404, 409, 413, 422),
        status_code=201,
        openapi_extra={"requestBody": {"content": {"application/octet-stream": {"schema": {}}}}},
    )
    async def put_object(
        key: str,
        request: Request,
        p: Principal = Depends(principal),
        scope: str | None = Depends(request_scope),
        content_type: str | None = Header(default=None),
        if_match: str | None = Header(default=None),
        acl_groups: str | None = Query(default=None, max_length=2048),
    ) -> Any:
        # Spool the streamed body to a temp file first, so the catalog write never waits on
        # the network; the size limit and the tier's storage cap apply while streaming (the
        # service checks the cap again under its write lock).
        limit = svc.settings.max_object_bytes
        cap = await run_in_threadpool(svc.object_put_cap, p, key)
        groups = None if acl_groups is None else [g for g in acl_groups.split(",") if g]
        with tempfile.SpooledTemporaryFile(max_size=4 * 1024 * 1024) as tmp:
            size = 0
            async for chunk in request.stream():
                size += len(chunk)
                if size > limit:
                    raise PayloadTooLargeError(
                        f"object exceeds the limit of {limit} bytes", limit=limit
                    )
                if cap is not None and size > cap[0] - cap[1]:
                    raise QuotaExceededError(
                        f"the object would exceed your {p.tier} tier's object storage of"
                        f" {cap[0]} bytes",
                        limit=cap[0],
                        used=cap[1],
                        requested=size,
                    )
                tmp.write(chunk)
            tmp.seek(0)

            def chunks() -> Iterator[bytes]:
                while data := tmp.read(256 * 1024):
                    yield data

            return await run_in_threadpool(
                svc.put_object, p, key, chunks(), content_type, scope, groups, if_match
            )

    @app.get(
        "/v1/objects/{key:path}",
        tags=["objects"],
        responses={
            **ERROR_RESPONSES.subset(401, 403, 404),
            206: {"description": "Partial"},
            416: {"description": "Range not satisfiable"},
        },
    )
    async def get_object(
        key: str,
        p: Principal = Depends(principal),
        scope: str | None = Depends(request_scope),
        range_: str | None = Header(default=None, alias="Range"),
        if_none_match: str | None = Header(default=None),
    ) -> Response:
        obj = await run_in_threadpool(svc.object_for_read, narrowed(svc, p, scope), key)
        return _object_response(svc, key, obj, range_, if_none_match, body=True)

    @app.head(
        "/v1/objects/{key:path}",
        tags=["objects"],
        responses={
            **ERROR_RESPONSES.subset(401, 403, 404),
            206: {"description": "Partial"},
            416: {"description": "Range not satisfiable"},
        },
    )
    async def head_object(
        key: str,
        p: Principal = Depends(principal),
        scope: str | None = Depends(request_scope),
        range_: str | None = Header(default=None, alias="Range"),
        if_none_match: str | None = Header(default=None),
    ) -> Response:
        obj = await run_in_threadpool(svc.object_for_read, narrowed(svc, p, scope), key)
        return _object_response(svc, key, obj, range_, if_none_match, body=False)

    @app.delete(
        "/v1/objects/{key:path}",
        tags=["objects"],
        responses=ERROR_RESPONSES.subset(401, 403, 404, 409),
    )
    async def delete_object(
        key: str,
        p: Principal = Depends(principal),
        scope: str | None = Depends(request_scope),
        cascade: bool = Query(default=False),
    ) -> Any:
        return await run_in_threadpool(svc.delete_object, narrowed(svc, p, scope), key, cascade)

    @app.get("/v1/jobs", tags=["jobs"], responses=ERROR_RESPONSES.subset(401, 403, 422))
    async def list_jobs(
        p: Principal = Depends(principal),
        scope: str | None = Depends(request_scope),
        state: str | None = Query(default=None),
        cursor: str | None = Query(default=None, max_length=512),
        limit: int | None = Query(default=None),
    ) -> Any:
        return await run_in_threadpool(svc.list_jobs, narrowed(svc, p, scope), state, cursor, limit)

    @app.get("/v1/jobs/{job_id}", tags=["jobs"], responses=ERROR_RESPONSES.subset(401, 403, 404))
    async def get_job(
        job_id: str,
        p: Principal = Depends(principal),
        scope: str | None = Depends(request_scope),
    ) -> Any:
        return await run_in_threadpool(svc.get_job, narrowed(svc, p, scope), job_id)


def _object_response(
    svc: Service,
    key: str,
    obj: StoredObject,
    range_: str | None,
    if_none_match: str | None,
    body: bool,
) -> Response:
    """GET's answer; HEAD's is the same status and headers without the body (RFC 9110 9.3.2)."""
    size = obj.size
    etag = obj.etag
    ctype = obj.content_type
    headers = dict(OBJECT_HEADERS)
    headers["ETag"] = etag
    name = key.rsplit("/", 1)[-1]
    disp = "inline" if INLINE_TYPES.match(ctype) else "attachment"
    headers["Content-Disposition"] = f'{disp}; filename="{name}"'
    if if_none_match == etag:
        return Response(status_code=304, headers=headers)
    path = os.fspath(svc.blobs.path(obj.sha256))
    rng = parse_range(range_, size)
    if rng == "unsatisfiable":
        headers["Content-Range"] = f"bytes */{size}"
        return Response(status_code=416, headers=headers)
    status, start, length = 200, 0, size
    if isinstance(rng, tuple):
        start, end = rng
        status, length = 206, end - start + 1
        headers["Content-Range"] = f"bytes {start}-{end}/{size}"
    headers["Content-Length"] = str(length)
    if not body:
        return Response(status_code=status, media_type=ctype, headers=headers)
    chunks: AsyncIterator[bytes] = iterate_in_threadpool(_file_chunks(path, start, length))
    return StreamingResponse(chunks, status_code=status, media_type=ctype, headers=headers)
