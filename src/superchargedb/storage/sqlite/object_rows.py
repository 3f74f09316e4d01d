"""The objects' catalog entries on SQLite (``ObjectCatalog`` and ``ObjectRowsWriter`` in
``protocols_service.py``): an object is the row (key, owner) of ``objects`` (D-47).

The statements are the ones ``objects_service.py`` ran itself before the seam. What a read of a
key resolves to is judged here, row by row in the order the facade always took them (the
caller's own first, then the newest): the row's own scope and ACL by the reference rule
(``readfilter.may_read``), else a Unit the filter admits that cites exactly its content (the
``ReadFilter`` rendered by ``where``, which a contract test's broken variant replaces).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable

from ...readfilter import ReadFilter, may_read
from ..ids import now_ms
from ..protocols_service import ObjectCatalog, ObjectRowsWriter, StoredObject
from ..protocols_writes import StoredUnit
from .catalog import Catalog
from .filter_sql import where_sql
from .objects import FileBlobStore
from .write_rows import STORED_COLUMNS, SqlObjectRows, stored_unit

Where = Callable[[ReadFilter, int | None], tuple[str, list[object]]]


def stored_object(r: sqlite3.Row) -> StoredObject:
    return StoredObject(
        object_key=r["key"],
        acl_owner=r["acl_owner"],
        sha256=r["sha256"],
        size=int(r["size"]),
        content_type=r["content_type"],
        scope=r["scope"],
        acl_groups=tuple(json.loads(r["acl_groups"])),
        created_by=r["created_by"],
        created_at=int(r["created_at"]),
    )


def _own(conn: sqlite3.Connection, key: str, owner: str) -> StoredObject | None:
    r = conn.execute(
        "SELECT * FROM objects WHERE key = ? AND acl_owner = ?", (key, owner)
    ).fetchone()
    return None if r is None else stored_object(r)


def _bytes_held(conn: sqlite3.Connection, owner: str, excluding: str) -> int:
    return int(
        conn.execute(
            "SELECT COALESCE(SUM(size), 0) FROM objects WHERE acl_owner = ? AND key != ?",
            (owner, excluding),
        ).fetchone()[0]
    )


class SqliteObjectRowsTx(SqlObjectRows):
    """The objects inside one open write transaction."""

    def own(self, object_key: str, owner: str) -> StoredObject | None:
        return _own(self.conn, object_key, owner)

    def bytes_held(self, owner: str, *, excluding: str) -> int:
        return _bytes_held(self.conn, owner, excluding)

    def pin(self, sha256: str) -> None:
        """Nothing to take: the collector runs under the catalog write lock this transaction
        holds until it commits."""

    def put(self, obj: StoredObject) -> StoredObject:
        self.conn.execute(
            "INSERT INTO objects(key, acl_owner, sha256, size, content_type, scope,"
            " acl_groups, created_by, created_at) VALUES (?,?,?,?,?,?,?,?,?)"
            " ON CONFLICT(key, acl_owner) DO UPDATE SET sha256 = excluded.sha256,"
            " size = excluded.size, content_type = excluded.content_type,"
            " created_at = excluded.created_at",
            (
                obj.object_key,
                obj.acl_owner,
                obj.sha256,
                obj.size,
                obj.content_type,
                obj.scope,
                json.dumps(list(obj.acl_groups)),
                obj.created_by,
                self._next_stamp(obj.object_key),
            ),
        )
        stored = _own(self.conn, obj.object_key, obj.acl_owner)
        assert stored is not None
        return stored

    def _next_stamp(self, key: str) -> int:
        """Now, but later than every write at ``key`` so far: "the newest object" a read
        resolves to is always the last one written, even within one millisecond."""
        last = self.conn.execute(
            "SELECT MAX(created_at) FROM objects WHERE key = ?", (key,)
        ).fetchone()
        return max(now_ms(), int(last[0] or 0) + 1)


class SqliteObjectCatalog:
    """The objects as the facade reads them, and the blob collector (``blobs.collect`` under
    the catalog's write lock, so it never interleaves with a PUT naming the same blob)."""

    def __init__(self, catalog: Catalog, blobs: FileBlobStore, where: Where = where_sql) -> None:
        self.catalog = catalog
        self.blobs = blobs
        self.where = where

    def own(self, object_key: str, owner: str) -> StoredObject | None:
        return _own(self.catalog.reader(), object_key, owner)

    def bytes_held(self, owner: str, *, excluding: str) -> int:
        return _bytes_held(self.catalog.reader(), owner, excluding)

    def resolve(self, object_key: str, rf: ReadFilter) -> StoredObject | None:
        rows = (
            self.catalog.reader()
            .execute(
                "SELECT * FROM objects WHERE key = ?"
                " ORDER BY acl_owner = ? DESC, created_at DESC, acl_owner",
                (object_key, rf.principal),
            )
            .fetchall()
        )
        return next((o for o in map(stored_object, rows) if self._may_read(o, rf)), None)

    def citing(self, obj: StoredObject, rf: ReadFilter) -> list[StoredUnit]:
        where, params = self.where(rf, None)
        rows = self.catalog.reader().execute(
            f"SELECT {STORED_COLUMNS} FROM units u WHERE u.object_key = ? AND u.object_sha = ?"
            f" AND {where} ORDER BY u.id",
            (obj.object_key, obj.sha256, *params),
        )
        return [stored_unit(r) for r in rows]

    def collect(self, sha256: str) -> bool:
        with self.catalog.locked() as conn:
            return self.blobs.collect(conn, sha256)

    # -- the steps a contract test's broken variant replaces ---------------------------------
    def _may_read(self, obj: StoredObject, rf: ReadFilter) -> bool:
        if may_read(rf.scopes, rf.principal, rf.groups, obj.scope, obj.acl_owner, obj.acl_groups):
            return True
        return self._cited(obj, rf)

    def _cited(self, obj: StoredObject, rf: ReadFilter) -> bool:
        where, params = self.where(rf, None)
        hit = (
            self.catalog.reader()
            .execute(
                f"SELECT 1 FROM units u WHERE u.object_key = ? AND u.object_sha = ? AND {where}"
                " LIMIT 1",
                (obj.object_key, obj.sha256, *params),
            )
            .fetchone()
        )
        return hit is not None


def _checked(tx: SqliteObjectRowsTx, cat: SqliteObjectCatalog) -> None:
    """mypy checks the classes against the seam."""
    _t: ObjectRowsWriter = tx  # noqa: F841
    _c: ObjectCatalog = cat  # noqa: F841
