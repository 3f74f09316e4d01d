"""ASGI wiring of admission control (the policy is ``superchargedb.admission``).

It runs before routing, authentication and body reading, so a refused or queued request costs
no thread, no catalog lookup and no buffered body. The slot is held until the response has been
sent completely (streamed answers included).
"""

from __future__ import annotations

import orjson
from starlette.types import ASGIApp, Receive, Scope, Send

from ..admission import Admission, classify
from ..errors import OverloadedError
from ..metrics import Metrics


class AdmissionMiddleware:
    def __init__(self, app: ASGIApp, admission: Admission, metrics: Metrics) -> None:
        self.app = app
        self.admission = admission
        metrics.gauge(
            "scdb_admission",
            "Admission control per request class:"
            " in flight, adaptive limit, queued, admitted, rejected",
            self._gauge,
        )

    def _gauge(self) -> dict[tuple[tuple[str, str], ...], float]:
        return {
            (("class", name), ("state", k)): float(v)
            for name, row in self.admission.snapshot().items()
            for k, v in row.items()
        }

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        name = (
            classify(scope.get("method", ""), scope.get("path", ""))
            if scope["type"] == "http"
            else None
        )
        if name is None:
            await self.app(scope, receive, send)
            return
        try:
            started = await self.admission.acquire(name)
        except OverloadedError as exc:
            await _send_503(send, exc)
            return
        try:
            await self.app(scope, receive, send)
        finally:
            self.admission.release(name, started)


async def _send_503(send: Send, exc: OverloadedError) -> None:
    body = orjson.dumps({"error": exc.to_dict()})
    await send(
        {
            "type": "http.response.start",
            "status": exc.http_status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"retry-after", str(exc.extra["retry_after"]).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
