"""Row-level security on the tenant tables: defence in depth under the read filter (D-263).

Every query above already carries the scope and ACL predicate (``filter_sql.py``); this makes
the database refuse what a wrong predicate would let through. A connection handed out while a
request acts for some tenants (``acting.py``) switches to ``scdb_tenant``, a role that owns no
table, cannot log in and lacks BYPASSRLS, and records the tenants in the ``scdb.tenants``
setting; the tables' policies admit only rows whose scope's first segment is one of them. The
switch is made when the pool hands the connection out and undone when it comes back (the pool's
``reset``), so every statement and transaction on it runs for those tenants and nothing leaks to
the next borrower.

The policies are no sandbox against SQL injection (the session user may ``SET ROLE NONE``);
they catch a filter that forgets a tenant, which is the bug this codebase can have.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from typing import Any

import psycopg

from ... import acting
from .sql import OnCursor, Row, Sql

ROLE = "scdb_tenant"
GUC = "scdb.tenants"
# Tables whose rows carry a scope; the Units' side tables follow their Unit.
TENANT_TABLES = ("units", "docs", "objects", "jobs")
UNIT_TABLES = ("unit_words", "unit_keyframes")

_TENANT_OK = (
    f"split_part(scope, '/', 1) = ANY(string_to_array(current_setting('{GUC}', true), ','))"
)

# Connections handed out in a tenant's role: the only ones the pool must put back.
_acting: weakref.WeakSet[psycopg.Connection[Any]] = weakref.WeakSet()


def enter(conn: psycopg.Connection[Any], tenants: Sequence[str]) -> None:
    """Act for ``tenants`` on this (autocommit) connection until ``reset``; one round trip."""
    conn.execute(
        "SELECT set_config('role', %s, false), set_config(%s, %s, false)",
        (ROLE, GUC, ",".join(tenants)),
    )
    _acting.add(conn)


def reset(conn: psycopg.Connection[Any]) -> None:
    """The pool's ``reset``: back to the session's own role before the next borrower."""
    if conn in _acting:
        conn.execute("SELECT set_config('role', 'none', false), set_config(%s, '', false)", (GUC,))
        _acting.discard(conn)


def unbounded_rows(sql: Sql, q: str, params: Sequence[object] = ()) -> list[Row]:
    """A principal-wide aggregate (its quota, its usage) that must count its rows in every
    tenant, also those of a scope it no longer holds: run as the session's own role."""
    if acting.acting_tenants() is None:
        return sql.rows(q, params)
    if isinstance(sql, OnCursor):
        # Inside the caller's transaction (its connection entered the role when it was
        # borrowed, as the request acts): leave the role for this statement only.
        sql.cur.execute("SELECT set_config('role', 'none', true)")
        try:
            return sql.rows(q, params)
        finally:
            sql.cur.execute("SELECT set_config('role', %s, true)", (ROLE,))
    with acting.as_system():
        return sql.rows(q, params)


def _policies() -> str:
    out = []
    for t in TENANT_TABLES:
        out.append(
            f"ALTER TABLE {t} ENABLE ROW LEVEL SECURITY;\n"
            f"CREATE POLICY tenant ON {t} TO {ROLE} USING ({_TENANT_OK}) WITH CHECK ({_TENANT_OK});"
        )
    for t in UNIT_TABLES:
        own = f"EXISTS (SELECT 1 FROM units u WHERE u.id = {t}.unit)"  # the Unit's own policy
        out.append(
            f"ALTER TABLE {t} ENABLE ROW LEVEL SECURITY;\n"
            f"CREATE POLICY tenant ON {t} TO {ROLE} USING ({own}) WITH CHECK ({own});"
        )
    # A blob cited by a Unit the tenant may see is readable through that Unit (a Unit may cite
    # an object stored under another scope, e.g. a shared upload): read only, never written.
    out.append(
        f"CREATE POLICY cited ON objects FOR SELECT TO {ROLE} USING (EXISTS (SELECT 1 FROM units u"
        " WHERE u.object_key = objects.key AND u.object_sha = objects.sha256));\n"
        "CREATE INDEX units_object ON units (object_key, object_sha) WHERE object_key IS NOT NULL;"
    )
    return "\n".join(out)


def migration_sql() -> str:
    """Migration 6: the role, its grants and the policies."""
    return f"""
{_role_sql()}
REVOKE INSERT, UPDATE, DELETE ON meta, schema_version FROM {ROLE};
{_policies()}
"""


def _role_sql() -> str:
    return f"""
DO $$
BEGIN
  CREATE ROLE {ROLE} NOLOGIN NOBYPASSRLS;
EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL;  -- a cluster's other database
END $$;
DO $$
BEGIN
  IF NOT (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) THEN
    EXECUTE format('GRANT {ROLE} TO %I', current_user);
  END IF;
  -- The group leg's array overlap may run before the policy's check only when it is known to
  -- leak nothing; without it the GIN index on acl_groups is never used under the policy.
  IF (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) THEN
    ALTER FUNCTION arrayoverlap(anyarray, anyarray) LEAKPROOF;
  END IF;
END $$;
GRANT USAGE ON SCHEMA public TO {ROLE};
GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO {ROLE};
GRANT USAGE, SELECT, UPDATE ON ALL SEQUENCES IN SCHEMA public TO {ROLE};
ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO {ROLE};
ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT USAGE, SELECT, UPDATE ON SEQUENCES TO {ROLE};
"""


def restored_sql() -> str:
    """What a restore (``pg_restore --no-privileges``) does not carry: the tenant role's grants,
    the read-only tables' revokes and the array overlap's LEAKPROOF mark, which are the
    database's and the server's, not the dump's. Run before the restore (the policies name the
    role) and after it (the grants name the tables)."""
    return f"""
{_role_sql()}
DO $$
BEGIN
  IF to_regclass('meta') IS NOT NULL THEN
    REVOKE INSERT, UPDATE, DELETE ON meta, schema_version FROM {ROLE};
  END IF;
  IF to_regclass('tenant_clusters') IS NOT NULL THEN
    REVOKE INSERT, UPDATE, DELETE ON tenant_clusters FROM {ROLE};
  END IF;
END $$;
"""


def degraded_plans(conn: psycopg.Connection[Any]) -> bool:
    """True when the group leg cannot use its index under the policies (the array overlap was
    not marked leakproof: the first migration ran as a role that is not a superuser)."""
    row = conn.execute(
        "SELECT proleakproof FROM pg_proc WHERE proname = 'arrayoverlap'"
        " AND pg_get_function_arguments(oid) = 'anyarray, anyarray'"
    ).fetchone()
    return not (row and row[0])
