"""Request bodies: size enforced while streaming, strict JSON, bounded nesting (DECISIONS 19)."""

from __future__ import annotations

from typing import Any

import orjson
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..errors import PayloadTooLargeError, ValidationError


class BodyLimitMiddleware:
    """Rejects a body over ``max_bytes`` from its Content-Length, or as soon as the streamed
    bytes pass the limit, before anything is buffered whole or parsed."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("path", "").startswith("/v1/objects/"):
            # Object uploads stream to disk under their own, larger limit (max_object_bytes).
            await self.app(scope, receive, send)
            return
        for name, value in scope.get("headers", []):
            if name == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    declared = -1
                if declared < 0 or declared > self.max_bytes:
                    await _send_413(send, self.max_bytes)
                    return
        seen = 0
        limit = self.max_bytes

        async def limited() -> Message:
            nonlocal seen
            msg = await receive()
            if msg["type"] == "http.request":
                seen += len(msg.get("body", b""))
                if seen > limit:
                    raise PayloadTooLargeError(
                        f"request body exceeds the limit of {limit} bytes", limit=limit
                    )
            return msg

        await self.app(scope, limited, send)


async def _send_413(send: Send, limit: int) -> None:
    body = orjson.dumps(
        {
            "error": {
                "code": "payload_too_large",
                "message": f"request body exceeds the limit of {limit} bytes",
                "limit": limit,
            }
        }
    )
    await send(
        {
            "type": "http.response.start",
            "status": 413,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
            ],
        }
    )
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
