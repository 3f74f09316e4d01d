"""The outermost middleware: request id, security headers, read-your-writes, metrics, access log.

A plain ASGI middleware, not Starlette's ``BaseHTTPMiddleware``: that one runs every request's
app in a task of its own with memory streams and a task group, and under a flood of refused
requests its machinery was about half of the event loop's time (``bench/fairness.py``, profiled),
which every other tenant's requests then waited behind (D-284). What it does per request is
unchanged: the headers go on at the response's start, and the request is counted, metered and
logged then, with the time it took until that moment.
"""

from __future__ import annotations

import logging
import time
import uuid

from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .. import positions
from ..errors import ValidationError
from ..service import Service
from .body import send_error

access = logging.getLogger("superchargedb.access")

SECURITY_HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}
# Read-your-writes when searches may go to replicas (positions.py): a write's response carries
# the position its commit reached; a read that sends it back is answered from a node that far.
COMMIT_POSITION = "X-Commit-Position"
READ_AFTER = "X-Read-After"
_READ_AFTER = READ_AFTER.lower().encode()


class ObserveMiddleware:
    def __init__(self, app: ASGIApp, svc: Service) -> None:
        self.app = app
        self.svc = svc

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        rid = uuid.uuid4().hex[:16]
        state = scope.setdefault("state", {})
        state["request_id"] = rid
        t0 = time.perf_counter()
        after = next((v for k, v in scope.get("headers", []) if k == _READ_AFTER), None)
        written: list[list[int]] = [[]]  # the request's commit positions, once it runs

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                if written[0]:  # read-your-writes across replicas (D-271)
                    headers[COMMIT_POSITION] = positions.render(max(written[0]))
                for k, v in SECURITY_HEADERS.items():
                    headers.setdefault(k, v)
                headers["X-Request-Id"] = rid
                self._record(scope, state, rid, int(message["status"]), t0)
            await send(message)

        try:
            read_after = positions.parse(after.decode("latin-1")) if after is not None else None
        except ValueError as exc:
            await send_error(sending, ValidationError(str(exc), field=READ_AFTER))
            return
        with positions.tracking(read_after) as written[0]:
            await self.app(scope, receive, sending)

    def _record(
        self, scope: Scope, state: dict[str, object], rid: str, status: int, t0: float
    ) -> None:
        ms = (time.perf_counter() - t0) * 1000
        route = scope.get("route")
        name = getattr(route, "path", None) or "unmatched"
        metrics = self.svc.metrics
        metrics.inc(
            "scdb_requests_total",
            "HTTP requests by route and status",
            route=name,
            status=str(status),
        )
        metrics.observe("scdb_request_ms", "HTTP request latency (ms)", ms, route=name)
        who = state.get("principal")
        method = scope.get("method", "")
        if isinstance(who, str) and name.startswith("/v1/"):
            self.svc.meter.record(who, f"{method} {name}")
        access.info(
            "request",
            extra={
                "request_id": rid,
                "method": method,
                "route": name,
                "status": status,
                "ms": round(ms, 2),
                "principal": who,
            },
        )
