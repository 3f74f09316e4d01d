"""Request bodies: read whole before admission under a size limit and a minimum rate, strict
JSON, bounded nesting (D-19)."""

from __future__ import annotations

import asyncio
import tempfile
from typing import Any

import orjson
from starlette.types import Message, Receive, Scope, Send

from ..errors import PayloadTooLargeError, RequestTimeoutError, SCDBError, ValidationError


class ClientGone(Exception):
    """The client disconnected before its body had arrived."""


def declared_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", []):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return -1
    return None


def check_declared(scope: Scope, limit: int) -> None:
    """A Content-Length over the limit is refused before a byte of the body is read."""
    declared = declared_length(scope)
    if declared is not None and (declared < 0 or declared > limit):
        raise PayloadTooLargeError(f"request body exceeds the limit of {limit} bytes", limit=limit)


class Body:
    """A request body read whole before the request takes a slot: in memory, or spooled to a
    temporary file past ``spool_bytes``; ``replay`` hands it to the app as it arrived."""

    def __init__(self, spool_bytes: int) -> None:
        self.file = tempfile.SpooledTemporaryFile(max_size=spool_bytes)  # noqa: SIM115 (close())
        self.size = 0

    async def read(
        self, receive: Receive, limit: int, timeout_s: float, min_bytes_per_s: float
    ) -> None:
        """Read until the end of the body. The client gets ``timeout_s`` plus the time its bytes
        so far take at ``min_bytes_per_s``: one byte and then silence is a 408 after about
        ``timeout_s``, a steady sender at the minimum rate is never cut off."""
        loop = asyncio.get_running_loop()
        start = loop.time()
        while True:
            left = start + timeout_s + self.size / min_bytes_per_s - loop.time()
            try:
                if left <= 0:
                    raise TimeoutError
                msg = await asyncio.wait_for(receive(), left)
            except TimeoutError:
                raise RequestTimeoutError(
                    f"the request body arrived too slowly (at least {min_bytes_per_s:g} bytes/s"
                    f" after the first {timeout_s:g} s)",
                    timeout_s=timeout_s,
                    min_bytes_per_s=min_bytes_per_s,
                ) from None
            if msg["type"] == "http.disconnect":
                raise ClientGone
            chunk = msg.get("body", b"")
            self.size += len(chunk)
            if self.size > limit:
                raise PayloadTooLargeError(
                    f"request body exceeds the limit of {limit} bytes", limit=limit
                )
            if chunk:
                self.file.write(chunk)
            if not msg.get("more_body", False):
                self.file.seek(0)
                return

    def replay(self, receive: Receive, block: int = 256 * 1024) -> Receive:
        """The body in ``block``-sized messages, then the connection's own events (disconnect)."""
        done = False

        async def replayed() -> Message:
            nonlocal done
            if done:
                return await receive()
            data = self.file.read(block)
            more = self.file.tell() < self.size
            done = not more
            return {"type": "http.request", "body": data, "more_body": more}

        return replayed

    def close(self) -> None:
        self.file.close()


async def send_error(send: Send, exc: SCDBError, *, close: bool = False) -> None:
    """An error answered before the app runs, in the shape of every other error."""
    body = orjson.dumps({"error": exc.to_dict()})
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
    ]
    retry = exc.extra.get("retry_after")
    if retry is not None:
        headers.append((b"retry-after", str(retry).encode()))
    if close:  # the rest of the body is never read: the connection cannot be reused
        headers.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": exc.http_status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def parse_json(raw: bytes, max_depth: int) -> Any:
    """Strict JSON (no NaN/Infinity, valid UTF-8) with nesting at most ``max_depth``."""
    if not raw.strip():
        raise ValidationError("request body is empty; a JSON object is expected")
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise ValidationError(f"invalid JSON: {exc.msg}") from None
    _check_depth(value, max_depth)
    return value


def _check_depth(value: Any, max_depth: int) -> None:
    stack = [(value, 1)]
    while stack:
        v, d = stack.pop()
        if isinstance(v, dict):
            if d > max_depth:
                raise ValidationError(f"JSON nested deeper than {max_depth} levels")
            stack.extend((x, d + 1) for x in v.values())
        elif isinstance(v, list):
            if d > max_depth:
                raise ValidationError(f"JSON nested deeper than {max_depth} levels")
            stack.extend((x, d + 1) for x in v)
