"""The HTTP API: thin adapters over the service facade (the only module importing FastAPI)."""

from __future__ import annotations

import hmac
import logging
from collections.abc import Iterator
from pathlib import PurePath
from typing import Any

import orjson
from fastapi import Depends, FastAPI, Header, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response, StreamingResponse
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException

from .. import __version__
from ..errors import AuthError, InsufficientStorageError, SCDBError
from ..preview import Previews, with_boxes
from ..schemas import AegisQuery, IngestRequest
from ..service import Service
from ..storage.disk import STORAGE_ERRORS, is_disk_full
from ..types import Principal
from .admission import AdmissionMiddleware
from .body import parse_json
from .gate import authenticate_request
from .observe import COMMIT_POSITION, READ_AFTER, ObserveMiddleware
from .openapi import ERROR_RESPONSES, body_schema, install_openapi
from .routes_admin import register_admin
from .routes_docs import register_docs
from .routes_mcp import register_mcp
from .routes_me import register_me
from .routes_objects import register_objects
from .routes_session import register_session
from .routes_stats import register_stats
from .routes_ui import other_page, register_ui
from .scoping import narrowed, request_scope

log = logging.getLogger("superchargedb.api")

# A preview is drawn for one authorized caller: no shared cache may keep it, and the browser
# asks again each time (an ACL change applies at once; the server's render cache makes it cheap).
PREVIEW_HEADERS = {"Cache-Control": "private, no-cache", "Vary": "Authorization, Cookie"}


def _json_default(o: Any) -> Any:
    """What jsonable_encoder used to convert before routes returned Responses directly."""
    if isinstance(o, set | frozenset):
        return sorted(o)
    if hasattr(o, "tolist"):  # numpy scalars and arrays
        return o.tolist()
    if isinstance(o, PurePath):
        return str(o)
    raise TypeError(f"not JSON serializable: {type(o).__name__}")


class OrjsonResponse(JSONResponse):
    def render(self, content: Any) -> bytes:
        return orjson.dumps(content, default=_json_default)


def error_response(exc: SCDBError) -> Response:
    headers = None
    retry = exc.extra.get("retry_after")
    if retry is not None:
        headers = {"Retry-After": str(retry)}
    return OrjsonResponse({"error": exc.to_dict()}, status_code=exc.http_status, headers=headers)


def create_app(svc: Service) -> FastAPI:
    app = FastAPI(
        title="SuperChargeDB",
        version=__version__,
        description="Multimodal retrieval with hybrid search and cited answers.",
        default_response_class=OrjsonResponse,
    )
    app.state.svc = svc
    # Asked once now: a process on PostgreSQL starts building its lexical index (D-267) here,
    # not on its first search.
    _ = svc.ready
    s = svc.settings
    # Key lookup, then the whole body (size limit, minimum rate), then a fair slot.
    app.add_middleware(AdmissionMiddleware, svc=svc)
    origins = [o.strip() for o in s.cors_origins.split(",") if o.strip()]
    if origins:  # CORS is off unless configured
        from fastapi.middleware.cors import CORSMiddleware

        app.add_middleware(
            CORSMiddleware,
            allow_origins=origins,
            allow_methods=["GET", "POST", "PUT", "PATCH", "DELETE"],
            allow_headers=[
                "Authorization",
                "Content-Type",
                "X-Aegis-Scope",
                "Range",
                "If-Match",
                READ_AFTER,
            ],
            expose_headers=[
                "X-Request-Id",
                "ETag",
                "Content-Range",
                "Retry-After",
                COMMIT_POSITION,
            ],
        )
    # Outermost: the request id, the security headers and the access log cover every answer,
    # refusals included.
    app.add_middleware(ObserveMiddleware, svc=svc)

    @app.exception_handler(SCDBError)
    async def _scdb(_: Request, exc: SCDBError) -> Response:
        return error_response(exc)

    @app.exception_handler(RequestValidationError)
    async def _validation(_: Request, exc: RequestValidationError) -> Response:
        errs = exc.errors()
        first = errs[0] if errs else {"loc": [], "msg": "invalid request"}
        where = ".".join(str(p) for p in first.get("loc", []))
        body = {
            "error": {
                "code": "validation_error",
                "message": f"{where}: {first.get('msg')}",
            }
        }
        return OrjsonResponse(body, status_code=422)

    @app.exception_handler(StarletteHTTPException)
    async def _http(_: Request, exc: StarletteHTTPException) -> Response:
        # A missing route is not a missing record: give it its own code.
        code = {404: "route_not_found", 405: "method_not_allowed"}.get(
            exc.status_code, "http_error"
        )
        return OrjsonResponse(
            {"error": {"code": code, "message": str(exc.detail)}}, status_code=exc.status_code
        )

    # Handlers for these classes run inside the app: a handler for Exception runs in the
    # outermost middleware, which re-raises after responding, so uvicorn logs a traceback and
    # drops the keep-alive connection on every disk-full 507.
    async def _storage(_: Request, exc: Exception) -> Response:
        if not is_disk_full(exc):
            raise exc
        log.error("disk full: %s", exc)
        return error_response(
            InsufficientStorageError("the server is out of disk space; nothing was written")
        )

    for cls in STORAGE_ERRORS:
        app.add_exception_handler(cls, _storage)

    @app.exception_handler(Exception)
    async def _internal(_: Request, exc: Exception) -> Response:
        if is_disk_full(exc):  # the transaction rolled back: report, do not crash
            log.error("disk full: %s", exc)
            return error_response(
                InsufficientStorageError("the server is out of disk space; nothing was written")
            )
        log.exception("unhandled error")
        return OrjsonResponse(
            {"error": {"code": "internal", "message": "internal error"}}, status_code=500
        )

    async def principal(
        request: Request,
        authorization: str | None = Header(default=None, include_in_schema=False),
    ) -> Principal:
        # Once per request: admission control has usually looked the key up already.
        return await authenticate_request(svc, request.scope)

    async def body_of(request: Request) -> Any:
        return parse_json(await request.body(), s.max_json_depth)

    @app.get("/healthz", tags=["ops"])
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/readyz", tags=["ops"], responses={503: ERROR_RESPONSES[503]})
    async def readyz() -> Response:
        if svc.ready:
            return OrjsonResponse({"status": "ready"})
        return OrjsonResponse(
            {"error": {"code": "unavailable", "message": "index replay in progress"}},
            status_code=503,
        )

    @app.post(
        "/v1/ingest",
        tags=["units"],
        responses=ERROR_RESPONSES.subset(401, 402, 403, 413, 422),
        openapi_extra=body_schema(IngestRequest),
    )
    async def ingest(
        request: Request,
        p: Principal = Depends(principal),
        scope: str | None = Depends(request_scope),
    ) -> Any:
        body = await body_of(request)
        # A Response skips FastAPI's jsonable_encoder walk over every value (orjson does it all).
        return OrjsonResponse(await run_in_threadpool(svc.ingest, p, body, scope))

    @app.post(
        "/v1/search",
        tags=["search"],
        responses=ERROR_RESPONSES.subset(401, 402, 403, 413, 422),
        openapi_extra=body_schema(AegisQuery),
    )
    async def search(
        request: Request,
        p: Principal = Depends(principal),
        scope: str | None = Depends(request_scope),
    ) -> Any:
        body = await body_of(request)
        return OrjsonResponse(await run_in_threadpool(svc.search, p, body, scope, None))

    @app.post(
        "/v1/answer",
        tags=["answers"],
        responses={
            **ERROR_RESPONSES.subset(401, 402, 403, 413, 422),
            200: {
                "description": "The answer (JSON), or server-sent events with stream: true",
                "content": {
                    "application/json": {"schema": {"type": "object"}},
                    # Each event: `event:` sentence | citation | final | error, `data:` JSON.
                    "text/event-stream": {
                        "schema": {
                            "type": "object",
                            "properties": {
                                "event": {
                                    "type": "string",
                                    "enum": ["sentence", "citation", "final", "error"],
                                },
                                "data": {"type": "string"},
                            },
                        }
                    },
                },
            },
        },
        openapi_extra={
            **body_schema(AegisQuery),
            "description": (
                "A grounded answer with [n] citations. With `stream: true` the response is "
                "`text/event-stream`: `event: sentence` (a verified sentence), `event: citation`,"
                " `event: final` (the same object as the non-streaming call) or `event: error`."
            ),
        },
    )
    async def answer(
        request: Request,
        p: Principal = Depends(principal),
        scope: str | None = Depends(request_scope),
    ) -> Any:
        body = await body_of(request)
        stream = isinstance(body, dict) and body.get("stream") is True
        if not stream:
            return OrjsonResponse(await run_in_threadpool(svc.answer, p, body, scope, None))
        # Everything that can fail with a status (401/402/403/422) and the refusal gate is
        # decided before the first byte (D-37); the model's sentences follow as it writes them
        # (D-235), read on the threadpool one event at a time.
        answer_events = await run_in_threadpool(svc.answer_stream, p, body, scope, None)

        def events() -> Iterator[bytes]:
            try:
                for name, data in answer_events:
                    yield b"event: " + name.encode() + b"\ndata: " + orjson.dumps(data) + b"\n\n"
            except Exception:  # after the first byte an error can only be an event
                log.exception("stream failed")
                err = {"code": "internal", "message": "stream failed"}
                yield b"event: error\ndata: " + orjson.dumps(err) + b"\n\n"

        return StreamingResponse(events(), media_type="text/event-stream")

    @app.get(
        "/v1/units/{unit_id}",
        tags=["units"],
        responses=ERROR_RESPONSES.subset(401, 403, 404, 422),
    )
    async def get_unit(
        unit_id: str,
        words: bool = Query(False, description="add the Unit's words (char span, times, boxes)"),
        p: Principal = Depends(principal),
        scope: str | None = Depends(request_scope),
    ) -> Any:
        who = narrowed(svc, p, scope)

        return await run_in_threadpool(lambda: svc.get_unit(who, unit_id, words=words))

    previews = app.state.previews = Previews(s)

    @app.get(
        "/v1/units/{unit_id}/preview",
        tags=["units"],
        responses={
            **ERROR_RESPONSES.subset(401, 403, 404, 422, 503),
            200: {
                "content": {"image/png": {}, "image/jpeg": {}},
                "description": "PNG (a page or image with its box); JPEG (a video shot's keyframe)",
            },
        },
        response_class=Response,
    )
    async def unit_preview(
        unit_id: str,
        p: Principal = Depends(principal),
        scope: str | None = Depends(request_scope),
        page: int | None = Query(default=None, ge=1, le=100_000),
        boxes: str | None = Query(
            default=None,
            max_length=4096,
            description="a citation's boxes to draw instead of the Unit's: x0,y0,x1,y1;...",
        ),
    ) -> Response:
        # Authorized first: only then is the rendering cache consulted.
        src = await run_in_threadpool(svc.preview_source, narrowed(svc, p, scope), unit_id)
        if src.still is not None:  # a video shot's keyframe (D-236): one picture, no pages
            return Response(src.still, media_type=src.mime, headers=PREVIEW_HEADERS)
        src = other_page(with_boxes(src, boxes), page)
        png = await previews.png(p.name, src)
        return Response(png, media_type="image/png", headers=PREVIEW_HEADERS)

    @app.delete(
        "/v1/units/{unit_id}",
        tags=["units"],
        responses=ERROR_RESPONSES.subset(401, 403, 404, 422),
    )
    async def delete_unit(
        unit_id: str,
        p: Principal = Depends(principal),
        scope: str | None = Depends(request_scope),
    ) -> Any:
        return await run_in_threadpool(svc.delete_unit, narrowed(svc, p, scope), unit_id)

    @app.delete(
        "/v1/docs/{doc_id:path}",
        tags=["docs"],
        responses=ERROR_RESPONSES.subset(401, 403, 404, 422),
    )
    async def delete_doc(
        doc_id: str,
        p: Principal = Depends(principal),
        scope: str | None = Depends(request_scope),
    ) -> Any:
        return await run_in_threadpool(svc.delete_doc, p, doc_id, scope, None)

    register_admin(app, svc, principal, body_of)
    register_docs(app, svc, principal, body_of)
    register_objects(app, svc, principal)
    register_stats(app, svc, principal)
    register_me(app, svc, principal)
    register_session(app, svc, principal)
    register_ui(app)
    register_mcp(app, svc)

    @app.get(
        "/metrics",
        tags=["ops"],
        response_class=Response,
        responses={
            200: {
                "content": {"text/plain": {"schema": {"type": "string"}}},
                "description": "Prometheus text format",
            },
            **ERROR_RESPONSES.subset(401, 404),
        },
    )
    async def metrics(
        authorization: str | None = Header(default=None, include_in_schema=False),
    ) -> Response:
        # Deployment-wide figures are the operator's: no token configured, no route.
        if not s.metrics_token:
            raise StarletteHTTPException(404, "Not Found")
        given = (authorization or "").removeprefix("Bearer ").strip().encode()
        if not authorization or not hmac.compare_digest(given, s.metrics_token.encode()):
            raise AuthError("GET /metrics needs Authorization: Bearer $SCDB_METRICS_TOKEN")
        return Response(svc.metrics.render(), media_type="text/plain; version=0.0.4")

    install_openapi(app, s.max_top_k)
    return app
