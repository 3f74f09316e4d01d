"""Console sessions: the cookie that lets ``<img>``, ``<audio>`` and ``<video>`` load (D-150).

Those elements cannot send a Bearer header. Signing in with a key (``POST /v1/session``) makes a
random token, sets it as an HttpOnly SameSite=Strict cookie and stores only its SHA-256 (in a
``SessionStore``, D-180), so every API process sharing the store accepts it. A session belongs
to the key that made it: each lookup joins the key and the principal again, so revoking the key,
expiring it or disabling the principal ends the session at once. The gate accepts the cookie on
GET/HEAD only (SameSite=Strict already keeps other sites out; GETs change nothing).
"""

from __future__ import annotations

import hashlib
import secrets
import time

from .errors import AuthError
from .storage.protocols_auth import SessionStore
from .types import Principal

COOKIE = "scdb_session"
TOKEN_PREFIX = "scs_"
# last_seen_at is written at most this often per session: a page of thumbnails must not turn
# every GET into a catalog write.
TOUCH_EVERY_MS = 30_000


def _now_ms() -> int:
    return int(time.time() * 1000)


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def create(sessions: SessionStore, p: Principal, max_s: int) -> str:
    """A new session for the key that authenticated ``p``; returns the cookie value."""
    if p.key_id is None:  # the operator and other keyless principals have no session
        raise AuthError("only an API key can sign in to the console")
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    now = _now_ms()
    sessions.start(_digest(token), p.id, p.key_id, at=now, expires_at=now + max_s * 1000)
    return token


def lookup(sessions: SessionStore, token: str, idle_s: int) -> tuple[Principal, bool]:
    """The session's principal and whether its last_seen_at is due a write, or 401.

    Every failure gives the key lookup's message: a caller learns nothing about why."""
    if not token.startswith(TOKEN_PREFIX) or len(token) > 128:
        raise AuthError("invalid session")
    found = sessions.find(_digest(token))
    now = _now_ms()
    if found is None or found.disabled or found.key_revoked_at is not None:
        raise AuthError("invalid session")
    if found.key_expires_at is not None and found.key_expires_at <= now:
        raise AuthError("invalid session")
    if found.expires_at <= now or found.last_seen_at + idle_s * 1000 <= now:
        raise AuthError("invalid session")
    return found.principal, now - found.last_seen_at >= TOUCH_EVERY_MS


def touch(sessions: SessionStore, token: str) -> None:
    sessions.touch(_digest(token), _now_ms())


def end(sessions: SessionStore, token: str, principal_id: str) -> bool:
    """Sign-out: removes the session if it is the caller's; True when one was removed."""
    return sessions.end(_digest(token), principal_id)


def cookie_of(headers: list[tuple[bytes, bytes]]) -> str | None:
    """The session cookie's value in raw ASGI headers, or None."""
    for name, value in headers:
        if name != b"cookie":
            continue
        for part in value.decode("latin-1").split(";"):
            k, _, v = part.strip().partition("=")
            if k == COOKIE and v:
                return v
    return None
