"""The objects' catalog entries on PostgreSQL (``ObjectCatalog`` and ``ObjectRowsWriter`` in
``protocols_service.py``), with the embedded backend's semantics (``sqlite/object_rows.py``):
an object is the row (key, owner) of ``objects`` (D-47).

Blob collection and the writes that name a blob are ordered by a transaction-scoped advisory
lock per blob (D-245), not by a store-wide write lock as on SQLite: a writer ``pin``s the blob
before it de-duplicates onto it or stores Units citing it, and the collector takes the same
lock, counts the references committed by then and only removes a blob none holds. Any number
of API processes and workers share the database, so this is the only order there is.
"""

from __future__ import annotations

from ... import acting
from ...readfilter import ReadFilter, may_read
from ..ids import now_ms
from ..protocols_service import ObjectCatalog, ObjectRowsWriter, StoredObject
from ..protocols_writes import StoredUnit
from ..sqlite.objects import FileBlobStore
from . import rls
from .filter_sql import where_sql
from .sql import Conn, OnCursor, OnPool, Row, Sql, refuse_nul
from .write_rows import STORED, PgObjectRows, stored_unit

# Advisory lock classes (the second key is the value's hash): a blob's pins, an object key's
# writes (whose stamps must increase).
BLOB_LOCK = 0x5CDB0B10
KEY_LOCK = 0x5CDB0B11
_COLUMNS = "key, acl_owner, sha256, size, content_type, scope, acl_groups, created_by, created_at"


def stored_object(r: Row) -> StoredObject:
    return StoredObject(
        object_key=str(r[0]),
        acl_owner=str(r[1]),
        sha256=str(r[2]),
        size=int(r[3]),
        content_type=str(r[4]),
        scope=str(r[5]),
        acl_groups=tuple(r[6]),
        created_by=str(r[7]),
        created_at=int(r[8]),
    )


def pin_sql(sha256: str) -> tuple[str, list[object]]:
    return "SELECT pg_advisory_xact_lock(%s, hashtext(%s))", [BLOB_LOCK, sha256]


def _own(sql: Sql, key: str, owner: str) -> StoredObject | None:
    if "\0" in key or "\0" in owner:
        return None
    rows = sql.rows(
        f"SELECT {_COLUMNS} FROM objects WHERE key = %s AND acl_owner = %s", [key, owner]
    )
    return stored_object(rows[0]) if rows else None


def _bytes_held(sql: Sql, owner: str, excluding: str) -> int:
    if "\0" in owner:
        return 0
    return int(
        rls.unbounded_rows(  # the owner's quota counts its objects in every tenant
            sql,
            "SELECT coalesce(sum(size), 0) FROM objects WHERE acl_owner = %s AND key <> %s",
            [owner, excluding.replace("\0", "")],
        )[0][0]
    )


def blob_refs(sql: Sql, sha256: str) -> int:
    """The rows that keep a blob (``sqlite/objects.blob_refs``'s sources): objects naming it,
    Units derived from it, and jobs not finished that were queued with it."""
    return int(
        sql.rows(
            "SELECT (SELECT count(*) FROM objects WHERE sha256 = %s)"
            " + (SELECT count(*) FROM units WHERE object_sha = %s)"
            " + (SELECT count(*) FROM jobs WHERE state IN ('queued', 'running')"
            "    AND pg_input_is_valid(payload, 'jsonb') AND payload::jsonb ->> 'sha256' = %s)",
            [sha256, sha256, sha256],
        )[0][0]
    )


class PgObjectRowsTx(PgObjectRows):
    """The objects inside one open write transaction (its reads see its own writes)."""

    def own(self, object_key: str, owner: str) -> StoredObject | None:
        return _own(self.sql, object_key, owner)

    def bytes_held(self, owner: str, *, excluding: str) -> int:
        return _bytes_held(self.sql, owner, excluding)

    def pin(self, sha256: str) -> None:
        q, params = pin_sql(sha256)
        self.sql.rows(q, params)

    def put(self, obj: StoredObject) -> StoredObject:
        refuse_nul(
            "an object", obj.object_key, obj.acl_owner, obj.scope, obj.created_by, obj.acl_groups
        )
        self.pin(obj.sha256)
        # The stamp: later than every write at the key so far (the newest object a read
        # resolves to is the last one written), taken under a lock on the key's rows.
        key = obj.object_key
        self.sql.rows("SELECT pg_advisory_xact_lock(%s, hashtext(%s))", [KEY_LOCK, key])
        # Every row at the key orders the stamp, another tenant's too (a time, nothing else).
        last = rls.unbounded_rows(
            self.sql, "SELECT max(created_at) FROM objects WHERE key = %s", [key]
        )
        stamp = max(now_ms(), int(last[0][0] or 0) + 1)
        rows = self.sql.rows(
            f"INSERT INTO objects({_COLUMNS}) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)"
            " ON CONFLICT (key, acl_owner) DO UPDATE SET sha256 = excluded.sha256,"
            " size = excluded.size, content_type = excluded.content_type,"
            f" created_at = excluded.created_at RETURNING {_COLUMNS}",
            [
                obj.object_key,
                obj.acl_owner,
                obj.sha256,
                obj.size,
                obj.content_type,
                obj.scope,
                list(obj.acl_groups),
                obj.created_by,
                stamp,
            ],
        )
        return stored_object(rows[0])


class PgObjectCatalog:
    """The objects as the facade reads them, and the blob collector."""

    def __init__(self, conn: Conn, blobs: FileBlobStore) -> None:
        self.conn, self.sql, self.blobs = conn, OnPool(conn), blobs

    def own(self, object_key: str, owner: str) -> StoredObject | None:
        return _own(self.sql, object_key, owner)

    def bytes_held(self, owner: str, *, excluding: str) -> int:
        return _bytes_held(self.sql, owner, excluding)

    def resolve(self, object_key: str, rf: ReadFilter) -> StoredObject | None:
        if "\0" in object_key:
            return None
        rows = self.sql.rows(
            f"SELECT {_COLUMNS} FROM objects WHERE key = %s"
            ' ORDER BY acl_owner = %s DESC, created_at DESC, acl_owner COLLATE "C"',
            [object_key, rf.principal.replace("\0", "")],
        )
        return next((o for o in map(stored_object, rows) if self._may_read(o, rf)), None)

    def citing(self, obj: StoredObject, rf: ReadFilter) -> list[StoredUnit]:
        where, params = where_sql(rf)
        rows = self.sql.rows(
            f"SELECT {STORED} FROM units u WHERE u.object_key = %s AND u.object_sha = %s"
            f" AND {where} ORDER BY u.id",
            [obj.object_key, obj.sha256, *params],
        )
        return [stored_unit(r) for r in rows]

    def collect(self, sha256: str) -> bool:
        # A blob is kept while any tenant's row names it: the references are counted unconfined.
        with acting.as_system(), self.conn() as c, c.transaction():
            q, params = pin_sql(sha256)
            c.execute(q.encode(), params)
            if blob_refs(OnCursor(c.cursor()), sha256):
                return False
            return self.blobs.remove(sha256)

    def _may_read(self, obj: StoredObject, rf: ReadFilter) -> bool:
        if may_read(rf.scopes, rf.principal, rf.groups, obj.scope, obj.acl_owner, obj.acl_groups):
            return True
        where, params = where_sql(rf)
        hit = self.sql.rows(
            f"SELECT 1 FROM units u WHERE u.object_key = %s AND u.object_sha = %s AND {where}"
            " LIMIT 1",
            [obj.object_key, obj.sha256, *params],
        )
        return bool(hit)


def _checked(tx: PgObjectRowsTx, cat: PgObjectCatalog) -> None:
    """mypy checks the classes against the seam."""
    _t: ObjectRowsWriter = tx  # noqa: F841
    _c: ObjectCatalog = cat  # noqa: F841
