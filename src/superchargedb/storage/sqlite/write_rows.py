"""SQL the write rules read and the rows beside the Units they write: documents, quota,
usage, word tables, object entries (``DocWriter``, ``QuotaLedger``, ``UsageWriter``,
``WordWriter``, ``ObjectRowWriter`` in ``protocols_writes.py``).

Each class runs on a connection it is handed: the caller's open write transaction (inside
``write()``, so a check and the write it guards are one transaction, D-18) or the thread's read
connection. The statements are the ones the ingest pipeline, the deletes and the meter ran
themselves before the seam, unchanged.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterable, Sequence

from .. import unit_rows
from ..protocols import UnitRecord
from ..protocols_writes import DocKey, IdempotencyKey, MediaUse, StoredUnit, UsageCount, Word
from . import unit_keyframes, unit_words
from .filter_sql import scope_sql

Conn = Callable[[], sqlite3.Connection]
# A StoredUnit's columns, of the units table as ``u``; ``stored_unit`` reads them back.
STORED_COLUMNS = "u.unit_id, u.scope, u.doc_id, u.acl_owner, u.acl_groups, u.content_hash, u.plane"


def unit_record(r: sqlite3.Row) -> UnitRecord:
    return unit_rows.unit_record(r, json.loads(r["acl_groups"]))  # groups: JSON text here


def stored_unit(r: sqlite3.Row) -> StoredUnit:
    return StoredUnit(
        r["unit_id"],
        r["scope"],
        r["doc_id"],
        r["acl_owner"],
        tuple(json.loads(r["acl_groups"])),
        r["content_hash"],
        r["plane"],
    )


class SqlDocs:
    def __init__(self, conn: Conn, applied: Callable[[], int | None] | None) -> None:
        self.conn = conn
        self.applied = applied

    def find(self, keys: Sequence[IdempotencyKey]) -> list[list[StoredUnit]]:
        where = "scope = ? AND doc_id = ? AND acl_owner = ? AND content_hash = ? ORDER BY chunk_idx"
        return self._each(where, keys)

    def units_of(self, docs: Sequence[DocKey]) -> list[list[StoredUnit]]:
        return self._each("scope = ? AND doc_id = ? AND acl_owner = ?", docs)

    def _each(self, where: str, keys: Sequence[Sequence[str]]) -> list[list[StoredUnit]]:
        """The stored Units that match ``where`` for each key's parameters, one list a key."""
        c = self.conn()
        sql = f"SELECT {STORED_COLUMNS} FROM units u WHERE {where}"
        return [[stored_unit(r) for r in c.execute(sql, key)] for key in keys]

    def in_scopes(
        self, scopes: Sequence[str], *, doc_id: str | None = None, unit_id: str | None = None
    ) -> list[StoredUnit]:
        s_sql, params = scope_sql("u.scope", scopes)
        first: list[object]
        if unit_id is not None:
            where, first = "u.unit_id = ?", [unit_id]
            applied = self.applied() if self.applied is not None else None
            if applied is not None:  # a Unit not applied yet is not there for its reader
                where += " AND u.seq <= ?"
                first.append(applied)
        else:
            where, first = "u.doc_id = ?", [doc_id]
        rows = self.conn().execute(
            f"SELECT {STORED_COLUMNS} FROM units u WHERE {where} AND {s_sql}", (*first, *params)
        )
        return [stored_unit(r) for r in rows]

    def reserve(self, docs: Iterable[DocKey], created_by: str, at_ms: int) -> None:
        self.conn().executemany(
            "INSERT OR IGNORE INTO docs(scope, doc_id, acl_owner, created_by, created_at)"
            " VALUES (?,?,?,?,?)",
            [(s, d, o, created_by, at_ms) for s, d, o in docs],
        )


class SqlQuota:
    def __init__(self, conn: Conn) -> None:
        self.conn = conn

    def docs_used(self, principal: str) -> int:
        row = (
            self.conn()
            .execute("SELECT COUNT(*) FROM docs WHERE created_by = ?", (principal,))
            .fetchone()
        )
        return int(row[0])

    def unknown_docs(self, docs: Sequence[DocKey]) -> set[DocKey]:
        c = self.conn()
        return {
            d
            for d in dict.fromkeys(docs)
            if c.execute(
                "SELECT 1 FROM docs WHERE scope = ? AND doc_id = ? AND acl_owner = ?", d
            ).fetchone()
            is None
        }

    def media_use(self, principal: str) -> MediaUse:
        c = self.conn()
        n, size = c.execute(
            "SELECT COUNT(*), COALESCE(SUM(size), 0) FROM objects WHERE acl_owner = ?",
            (principal,),
        ).fetchone()
        pages = c.execute(
            "SELECT COUNT(*) FROM (SELECT DISTINCT scope, doc_id, acl_owner, page FROM units"
            " WHERE created_by = ? AND object_key IS NOT NULL AND plane = 'doc_visual')",
            (principal,),
        ).fetchone()[0]
        media_ms = c.execute(
            "SELECT COALESCE(SUM(m), 0) FROM (SELECT MAX(t_end_ms) AS m FROM units"
            " WHERE created_by = ? AND object_key IS NOT NULL AND t_end_ms IS NOT NULL"
            " GROUP BY scope, doc_id, acl_owner)",
            (principal,),
        ).fetchone()[0]
        return MediaUse(int(n), int(size), int(pages), int(media_ms))

    def media_reserved(self, principal: str) -> tuple[int, int]:
        pages, ms = (
            self.conn()
            .execute(
                "SELECT COALESCE(SUM(json_extract(payload, '$.cost_pages')), 0),"
                " COALESCE(SUM(json_extract(payload, '$.cost_ms')), 0) FROM jobs"
                " WHERE principal = ? AND kind = 'derive' AND state IN ('queued', 'running')",
                (principal,),
            )
            .fetchone()
        )
        return int(pages), int(ms)


class SqlUsage:
    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def add(self, counts: Sequence[UsageCount]) -> None:
        self.conn.executemany(
            "INSERT INTO usage_daily(principal, day, route, requests, cost_micro_usd)"
            " VALUES (?,?,?,?,?) ON CONFLICT(principal, day, route) DO UPDATE SET"
            " requests = requests + excluded.requests,"
            " cost_micro_usd = cost_micro_usd + excluded.cost_micro_usd",
            [(c.principal, c.day, c.route, c.requests, c.cost_micro_usd) for c in counts],
        )


class SqlWords:
    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def put(self, unit_id: str, words: Sequence[Word]) -> None:
        row = self.conn.execute("SELECT id FROM units WHERE unit_id = ?", (unit_id,)).fetchone()
        table = [
            {
                "start": w.start,
                "end": w.end,
                "t_start_ms": w.t_start_ms,
                "t_end_ms": w.t_end_ms,
                "page": w.page,
                "box": w.box,
                "conf": w.conf,
            }
            for w in words
        ]
        unit_words.put(self.conn, int(row[0]), table)


class SqlKeyframes:
    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def put(self, unit_id: str, mime: str, data: bytes) -> None:
        row = self.conn.execute("SELECT id FROM units WHERE unit_id = ?", (unit_id,)).fetchone()
        unit_keyframes.put(self.conn, int(row[0]), mime, data)


class SqlObjectRows:
    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def remove(self, key: str, owner: str) -> None:
        self.conn.execute("DELETE FROM objects WHERE key = ? AND acl_owner = ?", (key, owner))
