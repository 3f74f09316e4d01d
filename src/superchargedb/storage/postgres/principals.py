"""Principals and API keys on PostgreSQL (``PrincipalReader``/``PrincipalWriter``, D-180).

The embedded backend's semantics (``storage/sqlite/principals.py``) on the system of record:
perms and groups are sorted ``text[]``, scopes a ``text[]`` in the principal's order; a key is
only its SHA-256 hex digest (``key_hash``, unique, matched exactly) and its first characters
(D-93). One object wraps one :class:`~.sql.Sql`: the open write's cursor (its reads see the
write's own changes) or pooled autocommit statements.

A principal's insert runs in a savepoint, so a taken name is a 409 that leaves the rest of the
write usable, as a failed statement does in SQLite; the write that lets it escape rolls back
whole.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import psycopg

from ...errors import ConflictError
from ...readfilter import within_any
from ...types import Principal
from ..protocols_auth import Credential, KeyRecord, PrincipalState
from .filter_sql import acl_sql, scope_sql
from .sql import OnCursor, Row, Sql, refuse_nul

PRINCIPAL = "p.id, p.name, p.perms, p.tier, p.scopes, p.active_scope, p.groups, p.doc_quota"
_N = PRINCIPAL.count(",") + 1
_KEY = (
    "k.id, k.principal_id, p.name, k.prefix, k.created_at, k.expires_at, k.revoked_at,"
    " k.last_used_at, k.issued_by"
)
_KEYS_SQL = f"SELECT {_KEY} FROM api_keys k JOIN principals p ON p.id = k.principal_id"


def principal_of(r: Row) -> Principal:
    """A principal from the first columns of ``PRINCIPAL``."""
    return Principal(
        id=str(r[0]),
        name=str(r[1]),
        perms=frozenset(r[2]),
        tier=str(r[3]),
        scopes=tuple(r[4]),
        active_scope=str(r[5]),
        groups=frozenset(r[6]),
        doc_quota=None if r[7] is None else int(r[7]),
    )


def _key(r: Row) -> KeyRecord:
    return KeyRecord(
        key_id=str(r[0]),
        principal_id=str(r[1]),
        principal_name=str(r[2]),
        prefix=str(r[3]),
        created_at=int(r[4]),
        expires_at=r[5],
        revoked_at=r[6],
        last_used_at=r[7],
        issued_by=r[8],
    )


def _nul(*values: str) -> bool:
    """A value PostgreSQL text cannot hold names nothing stored (D-207)."""
    return any("\0" in v for v in values)


class PgPrincipals:
    def __init__(self, sql: Sql) -> None:
        self.sql = sql

    # -- reads -------------------------------------------------------------------------------
    def by_key_hash(self, key_hash: str) -> Credential | None:
        if _nul(key_hash):
            return None
        rows = self.sql.rows(
            f"SELECT {PRINCIPAL}, p.disabled, k.id, k.issued_by, k.key_hash, k.expires_at,"
            " k.revoked_at FROM api_keys k JOIN principals p ON p.id = k.principal_id"
            " WHERE k.key_hash = %s",
            [key_hash],
        )
        if not rows:
            return None
        r = rows[0]
        p = replace(principal_of(r), key_id=r[_N + 1], key_issuer=r[_N + 2])
        return Credential(
            principal=p,
            key_hash=str(r[_N + 3]),
            expires_at=r[_N + 4],
            revoked_at=r[_N + 5],
            disabled=bool(r[_N]),
        )

    def named(self, name: str) -> PrincipalState | None:
        if _nul(name):
            return None
        rows = self.sql.rows(
            f"SELECT {PRINCIPAL}, p.disabled FROM principals p WHERE p.name = %s", [name]
        )
        return None if not rows else PrincipalState(principal_of(rows[0]), bool(rows[0][_N]))

    def every(self) -> list[PrincipalState]:
        rows = self.sql.rows(
            f'SELECT {PRINCIPAL}, p.disabled FROM principals p ORDER BY p.name COLLATE "C"'
        )
        return [PrincipalState(principal_of(r), bool(r[_N])) for r in rows]

    def keys_of(self, principal_id: str) -> list[KeyRecord]:
        if _nul(principal_id):
            return []
        rows = self.sql.rows(
            f"{_KEYS_SQL} WHERE k.principal_id = %s ORDER BY k.created_at, k.id", [principal_id]
        )
        return [_key(r) for r in rows]

    def key(self, key_id: str) -> KeyRecord | None:
        if _nul(key_id):
            return None
        rows = self.sql.rows(f"{_KEYS_SQL} WHERE k.id = %s", [key_id])
        return None if not rows else _key(rows[0])

    def enabled_admins(self, excluding: str) -> list[Principal]:
        rows = self.sql.rows(
            f"SELECT {PRINCIPAL} FROM principals p WHERE p.id IS DISTINCT FROM %s::text"
            " AND NOT p.disabled AND 'admin' = ANY(p.perms) ORDER BY p.name COLLATE \"C\"",
            [None if _nul(excluding) else excluding],
        )
        return [principal_of(r) for r in rows]

    def reads_beyond(self, target: Principal, actor: Principal | None) -> bool:
        """A Unit the target owns or that is shared into its groups, within its scopes, that the
        actor's visibility (the very predicate every read uses) does not admit (D-181).

        The group leg looks only at groups the actor lacks when that is exact (the target's
        scopes lie within the actor's: a Unit in a group both share is then readable by both).
        Both legs stop at the first Unit found (``EXISTS``)."""
        t_scope, t_params = scope_sql("u.scope", target.scopes)
        if actor is not None:
            a_scope, a_params = scope_sql("u.scope", actor.scopes)
            a_acl, acl_params = acl_sql("u", actor.name, actor.groups)
            unreadable = f"NOT ({a_scope} AND {a_acl})"
            u_params = [*a_params, *acl_params]
        else:
            unreadable, u_params = "TRUE", []
        groups = sorted(target.groups)
        if actor is not None and all(within_any(s, actor.scopes) for s in target.scopes):
            groups = sorted(target.groups - actor.groups)
        legs: list[str] = []
        params: list[object] = []
        if not _nul(target.name):
            legs.append(
                f"EXISTS (SELECT 1 FROM units u WHERE u.acl_owner = %s AND {t_scope}"
                f" AND {unreadable})"
            )
            params += [target.name, *t_params, *u_params]
        clean = [g for g in groups if not _nul(g)]
        if clean:
            legs.append(
                f"EXISTS (SELECT 1 FROM units u WHERE u.acl_groups && %s::text[] AND {t_scope}"
                f" AND {unreadable})"
            )
            params += [clean, *t_params, *u_params]
        if not legs:
            return False
        return bool(self.sql.rows("SELECT " + " OR ".join(legs), params)[0][0])


class PgPrincipalWriter(PgPrincipals):
    """``PrincipalWriter``: the reads and the changes on the open write's cursor."""

    def __init__(self, cur: psycopg.Cursor[Any]) -> None:
        super().__init__(OnCursor(cur))
        self.cur = cur

    def insert(self, principal: Principal, created_at: int) -> None:
        p = principal
        refuse_nul("a principal", *vars(p).values())
        stmt = (
            "INSERT INTO principals(id, name, perms, tier, scopes, active_scope, groups,"
            " doc_quota, created_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)"
        )
        params = [
            p.id,
            p.name,
            sorted(p.perms),
            p.tier,
            list(p.scopes),
            p.active_scope,
            sorted(p.groups),
            p.doc_quota,
            created_at,
        ]
        try:
            # A savepoint: a taken name fails this statement, not the rest of the write.
            with self.cur.connection.transaction():
                self.cur.execute(stmt.encode(), params)
        except psycopg.errors.UniqueViolation:
            raise ConflictError(f"principal {p.name!r} already exists") from None

    def update(self, principal: Principal, disabled: bool) -> None:
        p = principal
        refuse_nul("a principal", *vars(p).values())
        self.sql.do(
            "UPDATE principals SET perms = %s, tier = %s, scopes = %s, active_scope = %s,"
            " groups = %s, doc_quota = %s, disabled = %s WHERE id = %s",
            [
                sorted(p.perms),
                p.tier,
                list(p.scopes),
                p.active_scope,
                sorted(p.groups),
                p.doc_quota,
                disabled,
                p.id,
            ],
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
        refuse_nul("an API key", key_id, principal_id, key_hash, prefix, issued_by)
        self.sql.do(
            "INSERT INTO api_keys(id, principal_id, key_hash, prefix, created_at, expires_at,"
            " issued_by) VALUES (%s, %s, %s, %s, %s, %s, %s)",
            [key_id, principal_id, key_hash, prefix, created_at, expires_at, issued_by],
        )

    def revoke_key(self, key_id: str, at: int) -> None:
        if _nul(key_id):
            return  # no key has that id
        self.sql.do(
            "UPDATE api_keys SET revoked_at = %s WHERE id = %s AND revoked_at IS NULL",
            [at, key_id],
        )

    def set_key_expiry(self, key_id: str, expires_at: int) -> None:
        if _nul(key_id):
            return
        self.sql.do("UPDATE api_keys SET expires_at = %s WHERE id = %s", [expires_at, key_id])
