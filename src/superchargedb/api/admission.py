"""ASGI wiring of admission control (the policy is ``superchargedb.admission``).

Per request, in this order, and holding no slot until the last step:

1. the per-address gate and the key lookup (``api/gate.py``): a share (tenant, principal) to
   count the request against; a request without a key counts against its address; a client
   that keeps sending after a 429 gets its further 429s held (``RefusalHold``, D-283);
2. the whole body, under the size limit and a minimum rate (``api/body.py``: 413, 408);
3. a slot of the request's class, shared fairly between tenants and principals (503).

The slot is given back when the response starts: the work is done by then (an object is read
from local disk), and writing the response waits only on the client, which must never hold a
slot. A streamed answer (``text/event-stream``) is the exception: its model writes while the
events go out, so it keeps its slot until the last one (D-235); a client that stops reading is
cut off after ``SCDB_WRITE_TIMEOUT_S`` (``api/transport.py``), which gives the slot back.
"""

from __future__ import annotations

import asyncio
from collections import Counter

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..admission import AddressGate, Admission, RefusalHold, Share, Ticket, classify
from ..effort import measured
from ..errors import PayloadTooLargeError, RateLimitedError, RequestTimeoutError, SCDBError
from ..service import Service
from .body import Body, ClientGone, check_declared, send_error
from .gate import authenticate_request, client_address, has_credentials, tenant_of


class AdmissionMiddleware:
    def __init__(self, app: ASGIApp, svc: Service) -> None:
        self.app = app
        self.svc = svc
        self.admission = Admission.from_settings(svc.settings)
        self.gate = AddressGate(svc.settings.auth_inflight_per_address)
        self.refusals = RefusalHold(
            svc.settings.rate_refusal_hold_s, svc.settings.rate_refusals_free_per_s
        )
        self.reading: Counter[str] = Counter()  # requests whose body is still arriving
        svc.metrics.gauge(
            "scdb_admission",
            "Admission control per request class: bodies being read (no slot), in flight,"
            " adaptive limit, queued, admitted, rejected",
            self._gauge,
        )

    def _gauge(self) -> dict[tuple[tuple[str, str], ...], float]:
        rows = self.admission.snapshot()
        for name, row in rows.items():
            row["reading"] = self.reading[name]
        return {
            (("class", name), ("state", k)): float(v)
            for name, row in rows.items()
            for k, v in row.items()
        }

    async def _share(self, scope: Scope) -> Share:
        ip = client_address(scope)
        if not has_credentials(scope):  # the route answers 401 if it needs a key
            return Share(f"addr:{ip}", f"addr:{ip}")
        await self.gate.enter(ip)
        try:
            p = await authenticate_request(self.svc, scope)
        finally:
            self.gate.leave(ip)
        return Share(tenant_of(p), p.id)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        name = (
            classify(scope.get("method", ""), scope.get("path", ""))
            if scope["type"] == "http"
            else None
        )
        if name is None:
            await self.app(scope, receive, send)
            return
        s = self.svc.settings
        is_object = scope.get("path", "").startswith("/v1/objects/")
        limit = s.max_object_bytes if is_object else s.max_body_bytes
        body = Body(s.body_spool_bytes)
        try:
            try:
                check_declared(scope, limit)
                share = await self._share(scope)
                self.reading[name] += 1
                try:
                    await body.read(receive, limit, s.body_timeout_s, s.body_min_bytes_per_s)
                finally:
                    self.reading[name] -= 1
            except ClientGone:
                return
            except SCDBError as exc:
                if isinstance(exc, RateLimitedError):
                    hold = self.refusals.delay(client_address(scope))
                    if hold:  # it did not wait as told: its next request comes no sooner
                        await asyncio.sleep(hold)
                # The body is left unread (too large, too slow): the connection cannot be reused.
                unread = isinstance(exc, PayloadTooLargeError | RequestTimeoutError)
                await send_error(send, exc, close=unread)
                return
            try:
                ticket = await self.admission.acquire(name, share)
            except SCDBError as exc:
                await send_error(send, exc)
                return
            await self._run(scope, body.replay(receive), send, ticket)
        finally:
            body.close()

    async def _run(self, scope: Scope, receive: Receive, send: Send, ticket: Ticket) -> None:
        released = False
        with measured() as effort:

            def release() -> None:
                nonlocal released
                if not released:
                    released = True
                    self.admission.release(ticket, effort.tokens)

            streaming = False

            async def sending(message: Message) -> None:
                nonlocal streaming
                if message["type"] == "http.response.start":
                    # A streamed answer is still being written by its model (D-235): it keeps
                    # its slot until its last event; anything else is done by now.
                    streaming = _is_event_stream(message)
                    if not streaming:
                        release()  # from here on only the client is waited for
                elif streaming and not message.get("more_body", False):
                    release()
                await send(message)

            try:
                await self.app(scope, receive, sending)
            finally:
                release()


def _is_event_stream(start: Message) -> bool:
    for k, v in start.get("headers") or []:
        if k.lower() == b"content-type":
            return bytes(v).split(b";")[0].strip().lower() == b"text/event-stream"
    return False
