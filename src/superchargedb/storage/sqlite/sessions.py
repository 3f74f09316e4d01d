"""The console's sessions in the catalog (``SessionStore``, D-150, D-180).

Only the token's SHA-256 is stored, so every API process sharing the catalog accepts the cookie.
A lookup joins the key and the principal again, so a revoked or expired key or a disabled
principal shows at once. Each write is its own short transaction on the catalog's writer.
"""

from __future__ import annotations

import hmac
from dataclasses import replace

from ..protocols_auth import SessionState
from .catalog import Catalog
from .principals import row_to_principal

_SQL = (
    "SELECT p.*, s.last_seen_at, s.expires_at AS s_expires, k.id AS key_id, k.issued_by,"
    " k.revoked_at, k.expires_at AS k_expires FROM console_sessions s"
    " JOIN api_keys k ON k.id = s.key_id JOIN principals p ON p.id = s.principal_id"
    " WHERE s.token_hash = ?"
)


class SqliteSessions:
    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog

    def start(
        self, token_hash: str, principal_id: str, key_id: str, *, at: int, expires_at: int
    ) -> None:
        with self.catalog.write() as w:
            w.execute("DELETE FROM console_sessions WHERE expires_at <= ?", (at,))
            w.execute(
                "INSERT INTO console_sessions(token_hash, principal_id, key_id, created_at,"
                " last_seen_at, expires_at) VALUES (?,?,?,?,?,?)",
                (token_hash, principal_id, key_id, at, at, expires_at),
            )

    def find(self, token_hash: str) -> SessionState | None:
        row = self.catalog.reader().execute(_SQL, (token_hash,)).fetchone()
        if row is None:
            return None
        p = replace(row_to_principal(row), key_id=row["key_id"], key_issuer=row["issued_by"])
        return SessionState(
            principal=p,
            last_seen_at=row["last_seen_at"],
            expires_at=row["s_expires"],
            key_expires_at=row["k_expires"],
            key_revoked_at=row["revoked_at"],
            disabled=bool(row["disabled"]),
        )

    def touch(self, token_hash: str, at: int) -> None:
        with self.catalog.write() as w:
            w.execute(
                "UPDATE console_sessions SET last_seen_at = ? WHERE token_hash = ?",
                (at, token_hash),
            )

    def end(self, token_hash: str, principal_id: str) -> bool:
        with self.catalog.write() as w:
            row = w.execute(
                "SELECT token_hash, principal_id FROM console_sessions WHERE token_hash = ?",
                (token_hash,),
            ).fetchone()
            if row is None or not hmac.compare_digest(row["principal_id"], principal_id):
                return False
            w.execute("DELETE FROM console_sessions WHERE token_hash = ?", (token_hash,))
            return True
