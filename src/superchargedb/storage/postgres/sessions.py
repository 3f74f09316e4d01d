"""The console's sessions on PostgreSQL (``SessionStore``, D-150, D-180).

Only the token's SHA-256 is stored, so every API process on the database accepts the cookie. A
lookup joins the key and the principal again, so a revoked or expired key or a disabled principal
shows at once. Each call is its own autocommit statement (no session write is audited): a start
sweeps the expired sessions and inserts in one statement; an end deletes a session only where it
is the caller's.
"""

from __future__ import annotations

from dataclasses import replace

from ..protocols_auth import SessionState
from .principals import PRINCIPAL, principal_of
from .sql import Sql, refuse_nul

_N = PRINCIPAL.count(",") + 1


class PgSessions:
    def __init__(self, sql: Sql) -> None:
        self.sql = sql

    def start(
        self, token_hash: str, principal_id: str, key_id: str, *, at: int, expires_at: int
    ) -> None:
        refuse_nul("a session", token_hash, principal_id, key_id)
        self.sql.do(
            "WITH gone AS (DELETE FROM console_sessions WHERE expires_at <= %s)"
            " INSERT INTO console_sessions(token_hash, principal_id, key_id, created_at,"
            " last_seen_at, expires_at) VALUES (%s, %s, %s, %s, %s, %s)",
            [at, token_hash, principal_id, key_id, at, at, expires_at],
        )

    def find(self, token_hash: str) -> SessionState | None:
        if "\0" in token_hash:
            return None
        rows = self.sql.rows(
            f"SELECT {PRINCIPAL}, p.disabled, s.last_seen_at, s.expires_at, k.id, k.issued_by,"
            " k.revoked_at, k.expires_at FROM console_sessions s"
            " JOIN api_keys k ON k.id = s.key_id JOIN principals p ON p.id = s.principal_id"
            " WHERE s.token_hash = %s",
            [token_hash],
        )
        if not rows:
            return None
        r = rows[0]
        p = replace(principal_of(r), key_id=r[_N + 3], key_issuer=r[_N + 4])
        return SessionState(
            principal=p,
            last_seen_at=int(r[_N + 1]),
            expires_at=int(r[_N + 2]),
            key_expires_at=r[_N + 6],
            key_revoked_at=r[_N + 5],
            disabled=bool(r[_N]),
        )

    def touch(self, token_hash: str, at: int) -> None:
        if "\0" not in token_hash:
            self.sql.do(
                "UPDATE console_sessions SET last_seen_at = %s WHERE token_hash = %s",
                [at, token_hash],
            )

    def end(self, token_hash: str, principal_id: str) -> bool:
        if "\0" in token_hash or "\0" in principal_id:
            return False
        gone = self.sql.rows(
            "DELETE FROM console_sessions WHERE token_hash = %s AND principal_id = %s RETURNING 1",
            [token_hash, principal_id],
        )
        return bool(gone)
