"""The HTTP server's configuration: client deadlines and trusted proxies.

``uvicorn_config`` is the one place the server is configured; ``superchargedb serve`` and the
test suite's live server both use it, so tests run what production runs.

- Request heads: uvicorn waits for them without limit (its keep-alive timer only runs between
  requests), so a client that connects and sends half a header line holds a connection for ever.
  ``DeadlineProtocol`` closes a connection whose request head has not arrived
  ``header_timeout_s`` after its first byte (or after the connection opened).
- Responses: a client that stops reading fills the socket buffer, and the app's next write waits
  for it. When the buffer stays full for ``write_timeout_s`` the connection is aborted, which
  releases the waiting write (admission slots are already free by then, except a streamed
  answer's, which this gives back: ``api/admission.py``).
- Forwarded headers: uvicorn believes ``X-Forwarded-For`` from loopback peers by default, so
  any local client (or anything behind a local port forward) could pick the address that rate
  limits and the failed-authentication lockout count against. They are honoured only from the
  peers in ``SCDB_TRUSTED_PROXIES`` (default: none).
"""

from __future__ import annotations

import asyncio
from typing import Any

import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from ..settings import Settings


class DeadlineProtocol(H11Protocol):
    header_timeout_s: float = 10.0
    write_timeout_s: float = 30.0

    _header_timer: asyncio.TimerHandle | None = None
    _write_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm_header()

    def _between_requests(self) -> bool:
        return self.cycle is None or self.cycle.response_complete

    def _arm_header(self) -> None:
        self._disarm_header()
        self._header_timer = self.loop.call_later(self.header_timeout_s, self._header_expired)

    def _disarm_header(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _header_expired(self) -> None:
        self._header_timer = None
        if self._between_requests() and not self.transport.is_closing():
            self.transport.abort()

    def data_received(self, data: bytes) -> None:
        if self._header_timer is None and self._between_requests():
            self._arm_header()  # the first byte of the next request on a kept-alive connection
        super().data_received(data)
        if not self._between_requests():
            self._disarm_header()

    def pause_writing(self) -> None:
        super().pause_writing()
        if self._write_timer is None:
            self._write_timer = self.loop.call_later(self.write_timeout_s, self._write_expired)

    def resume_writing(self) -> None:
        super().resume_writing()
        if self._write_timer is not None:
            self._write_timer.cancel()
            self._write_timer = None

    def _write_expired(self) -> None:
        self._write_timer = None
        self.transport.abort()  # close() would wait for the unread buffer to drain

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm_header()
        if self._write_timer is not None:
            self._write_timer.cancel()
            self._write_timer = None
        super().connection_lost(exc)


def trusted_proxies(settings: Settings) -> list[str]:
    return [p.strip() for p in settings.trusted_proxies.split(",") if p.strip()]


def uvicorn_config(app: Any, settings: Settings, **overrides: Any) -> uvicorn.Config:
    """The server configuration for ``app`` (``overrides``: host, port, ... for tests)."""
    protocol = type(
        "SCDBProtocol",
        (DeadlineProtocol,),
        {
            "header_timeout_s": settings.header_timeout_s,
            "write_timeout_s": settings.write_timeout_s,
        },
    )
    trusted = trusted_proxies(settings)
    options: dict[str, Any] = {
        "host": settings.host,
        "port": settings.port,
        "log_level": "warning",
        "timeout_keep_alive": int(settings.keepalive_s),
        "http": protocol,
        # Not uvloop even where it is installed: it was measured and not adopted (D-287).
        "loop": "asyncio",
        "proxy_headers": bool(trusted),
        "forwarded_allow_ips": trusted,
    }
    options.update(overrides)
    return uvicorn.Config(app, **options)
