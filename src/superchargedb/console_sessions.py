"""Console sessions: the cookie that lets ``<img>``, ``<audio>`` and ``<video>`` load (D-150).

Those elements cannot send a Bearer header. Signing in with a key (``POST /v1/session``) makes a
random token, sets it as an HttpOnly SameSite=Strict cookie and stores only its SHA-256 in the
catalog, so every API process sharing the catalog accepts it. A session belongs to the key that
made it: each request joins the key and the principal again, so revoking the key, expiring it or
disabling the principal ends the session at once. The gate accepts the cookie on GET/HEAD only
(SameSite=Strict already keeps other sites out; GETs change nothing).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import sqlite3
import time
from dataclasses import replace

from .errors import AuthError
from .storage.sqlite.principals import row_to_principal
from .types import Principal

COOKIE = "scdb_session"
TOKEN_PREFIX = "scs_"
# last_seen_at is written at most this often per session: a page of thumbnails must not turn
# every GET into a catalog write.
TOUCH_EVERY_MS = 30_000

_SQL = (
    "SELECT p.*, s.last_seen_at, s.expires_at AS s_expires, k.id AS key_id, k.issued_by,"
    " k.revoked_at, k.expires_at AS k_expires FROM console_sessions s"
    " JOIN api_keys k ON k.id = s.key_id JOIN principals p ON p.id = s.principal_id"
    " WHERE s.token_hash = ?"
)


def _now_ms() -> int:
    return int(time.time() * 1000)


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def create(w: sqlite3.Connection, p: Principal, max_s: int) -> str:
    """A new session for the key that authenticated ``p``; returns the cookie value."""
    if p.key_id is None:  # the operator and other keyless principals have no session
        raise AuthError("only an API key can sign in to the console")
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    now = _now_ms()
    w.execute("DELETE FROM console_sessions WHERE expires_at <= ?", (now,))
    w.execute(
        "INSERT INTO console_sessions(token_hash, principal_id, key_id, created_at,"
        " last_seen_at, expires_at) VALUES (?,?,?,?,?,?)",
        (_digest(token), p.id, p.key_id, now, now, now + max_s * 1000),
    )
    return token


def lookup(conn: sqlite3.Connection, token: str, idle_s: int) -> tuple[Principal, bool]:
    """The session's principal and whether its last_seen_at is due a write, or 401.

    Every failure gives the key lookup's message: a caller learns nothing about why."""
    if not token.startswith(TOKEN_PREFIX) or len(token) > 128:
        raise AuthError("invalid session")
    digest = _digest(token)
    row = conn.execute(_SQL, (digest,)).fetchone()
    now = _now_ms()
    if row is None or row["disabled"] or row["revoked_at"] is not None:
        raise AuthError("invalid session")
    if row["k_expires"] is not None and row["k_expires"] <= now:
        raise AuthError("invalid session")
    if row["s_expires"] <= now or row["last_seen_at"] + idle_s * 1000 <= now:
        raise AuthError("invalid session")
    p = replace(row_to_principal(row), key_id=row["key_id"], key_issuer=row["issued_by"])
    return p, now - row["last_seen_at"] >= TOUCH_EVERY_MS


def touch(w: sqlite3.Connection, token: str) -> None:
    w.execute(
        "UPDATE console_sessions SET last_seen_at = ? WHERE token_hash = ?",
        (_now_ms(), _digest(token)),
    )


def end(w: sqlite3.Connection, token: str, principal_id: str) -> bool:
    """Sign-out: removes the session if it is the caller's; True when one was removed."""
    digest = _digest(token)
    row = w.execute(
        "SELECT token_hash, principal_id FROM console_sessions WHERE token_hash = ?", (digest,)
    ).fetchone()
    if row is None or not hmac.compare_digest(row["principal_id"], principal_id):
        return False
    w.execute("DELETE FROM console_sessions WHERE token_hash = ?", (digest,))
    return True


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
