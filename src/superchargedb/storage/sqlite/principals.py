"""Principals and API keys in the catalog (``PrincipalReader``/``PrincipalWriter``, D-180).

Perms, scopes and groups are JSON arrays in their columns; a key is only its SHA-256 hex digest
(``key_hash``, unique) and its first characters (D-93). One object wraps one connection: the
thread's reader, or the open write transaction's connection (whose reads see its own changes).
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import replace

from ...errors import ConflictError
from ...readfilter import within_any
from ...types import Principal
from ..protocols_auth import Credential, KeyRecord, PrincipalState
from .filter_sql import scope_sql, visible_sql


def row_to_principal(row: sqlite3.Row) -> Principal:
    return Principal(
        id=row["id"],
        name=row["name"],
        perms=frozenset(json.loads(row["perms"])),
        tier=row["tier"],
        scopes=tuple(json.loads(row["scopes"])),
        active_scope=row["active_scope"],
        groups=frozenset(json.loads(row["groups"])),
        doc_quota=row["doc_quota"],
    )


def _key(row: sqlite3.Row) -> KeyRecord:
    return KeyRecord(
        key_id=row["id"],
        principal_id=row["principal_id"],
        principal_name=row["name"],
        prefix=row["prefix"],
        created_at=row["created_at"],
        expires_at=row["expires_at"],
        revoked_at=row["revoked_at"],
        last_used_at=row["last_used_at"],
        issued_by=row["issued_by"],
    )


_AUTH_SQL = (
    "SELECT p.*, k.id AS key_id, k.issued_by, k.key_hash, k.expires_at, k.revoked_at"
    " FROM api_keys k"
    " JOIN principals p ON p.id = k.principal_id WHERE k.key_hash = ?"
)
_KEYS_SQL = "SELECT k.*, p.name FROM api_keys k JOIN principals p ON p.id = k.principal_id"


class SqlitePrincipals:
    """The catalog's principals and keys over one connection (use one per call site)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    # -- reads -------------------------------------------------------------------------------
    def by_key_hash(self, key_hash: str) -> Credential | None:
        row = self.conn.execute(_AUTH_SQL, (key_hash,)).fetchone()
        if row is None:
            return None
        p = replace(row_to_principal(row), key_id=row["key_id"], key_issuer=row["issued_by"])
        return Credential(
            principal=p,
            key_hash=row["key_hash"],
            expires_at=row["expires_at"],
            revoked_at=row["revoked_at"],
            disabled=bool(row["disabled"]),
        )

    def named(self, name: str) -> PrincipalState | None:
        row = self.conn.execute("SELECT * FROM principals WHERE name = ?", (name,)).fetchone()
        return None if row is None else PrincipalState(row_to_principal(row), bool(row["disabled"]))

    def every(self) -> list[PrincipalState]:
        return [
            PrincipalState(row_to_principal(r), bool(r["disabled"]))
            for r in self.conn.execute("SELECT * FROM principals ORDER BY name")
        ]

    def keys_of(self, principal_id: str) -> list[KeyRecord]:
        return [
            _key(r)
            for r in self.conn.execute(
                f"{_KEYS_SQL} WHERE k.principal_id = ? ORDER BY k.created_at", (principal_id,)
            )
        ]

    def key(self, key_id: str) -> KeyRecord | None:
        row = self.conn.execute(f"{_KEYS_SQL} WHERE k.id = ?", (key_id,)).fetchone()
        return None if row is None else _key(row)

    def enabled_admins(self, excluding: str) -> list[Principal]:
        rows = self.conn.execute(
            "SELECT * FROM principals WHERE id != ? AND disabled = 0", (excluding,)
        ).fetchall()
        return [p for p in map(row_to_principal, rows) if p.has("admin")]

    def reads_beyond(self, target: Principal, actor: Principal | None) -> bool:
        """The target's own Units, and those shared into its groups, tested against the very
        predicate every read uses (D-181).

        The group leg looks only at groups the actor lacks when that is exact (the target's
        scopes lie within the actor's: a Unit in a group both share is then readable by both);
        the owner leg uses the owner index. Both stop at the first Unit found.
        """
        t_scope, t_params = scope_sql("u.scope", target.scopes)
        if actor is not None:
            a_sql, a_params = visible_sql("u", actor.scopes, actor.name, actor.groups)
            unreadable, u_params = f"NOT ({a_sql})", a_params
        else:
            unreadable, u_params = "1", []
        owned = self.conn.execute(
            f"SELECT 1 FROM units u WHERE u.acl_owner = ? AND {t_scope} AND {unreadable} LIMIT 1",
            [target.name, *t_params, *u_params],
        ).fetchone()
        if owned is not None:
            return True
        groups = sorted(target.groups)
        if actor is not None and all(within_any(s, actor.scopes) for s in target.scopes):
            groups = sorted(target.groups - actor.groups)
        if not groups:
            return False
        marks = ",".join("?" * len(groups))
        shared = self.conn.execute(
            f"SELECT 1 FROM unit_groups g JOIN units u ON u.id = g.unit WHERE g.grp IN ({marks})"
            f" AND {t_scope} AND {unreadable} LIMIT 1",
            [*groups, *t_params, *u_params],
        ).fetchone()
        return shared is not None

    # -- writes (on the write transaction's connection) ---------------------------------------
    def insert(self, principal: Principal, created_at: int) -> None:
        p = principal
        try:
            self.conn.execute(
                "INSERT INTO principals(id, name, perms, tier, scopes, active_scope, groups,"
                " doc_quota, created_at) VALUES (?,?,?,?,?,?,?,?,?)",
                (
                    p.id,
                    p.name,
                    json.dumps(sorted(p.perms)),
                    p.tier,
                    json.dumps(list(p.scopes)),
                    p.active_scope,
                    json.dumps(sorted(p.groups)),
                    p.doc_quota,
                    created_at,
                ),
            )
        except sqlite3.IntegrityError:
            raise ConflictError(f"principal {p.name!r} already exists") from None

    def update(self, principal: Principal, disabled: bool) -> None:
        p = principal
        self.conn.execute(
            "UPDATE principals SET perms = ?, tier = ?, scopes = ?, active_scope = ?, groups = ?,"
            " doc_quota = ?, disabled = ? WHERE id = ?",
            (
                json.dumps(sorted(p.perms)),
                p.tier,
                json.dumps(list(p.scopes)),
                p.active_scope,
                json.dumps(sorted(p.groups)),
                p.doc_quota,
                int(disabled),
                p.id,
            ),
        )

    def add_key(
        self,
        key_id: str,
        principal_id: str,
        key_hash: str,
        prefix: str,
        *,
        created_at: int,
        expires_at: int | None,
        issued_by: str | None,
    ) -> None:
        self.conn.execute(
            "INSERT INTO api_keys(id, principal_id, key_hash, prefix, created_at, expires_at,"
            " issued_by) VALUES (?,?,?,?,?,?,?)",
            (key_id, principal_id, key_hash, prefix, created_at, expires_at, issued_by),
        )

    def revoke_key(self, key_id: str, at: int) -> None:
        self.conn.execute(
            "UPDATE api_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL", (at, key_id)
        )

    def set_key_expiry(self, key_id: str, expires_at: int) -> None:
        self.conn.execute("UPDATE api_keys SET expires_at = ? WHERE id = ?", (expires_at, key_id))
