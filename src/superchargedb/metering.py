"""Per-principal request metering and stored-object usage for ``GET /v1/usage``.

Counting a request must not cost a SQLite write, so counts accumulate in memory and are flushed
to ``usage_daily`` in one transaction every few seconds and at shutdown. Object usage is read from
the catalog rows themselves (``object_usage``).
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections import defaultdict
from typing import Any

from .storage.sqlite.catalog import Catalog


class Meter:
    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog
        self._lock = threading.Lock()
        self._counts: dict[tuple[str, int, str], list[int]] = defaultdict(lambda: [0, 0])

    def record(self, principal: str, route: str, cost_usd: float = 0.0) -> None:
        day = int(time.time() // 86400)
        with self._lock:
            c = self._counts[(principal, day, route)]
            c[0] += 1
            c[1] += int(round(cost_usd * 1e6))

    def pending(self, principal: str, day_lo: int, day_hi: int) -> list[tuple[str, int, int]]:
        with self._lock:
            return [
                (route, c[0], c[1])
                for (p, day, route), c in self._counts.items()
                if p == principal and day_lo <= day <= day_hi
            ]

    def flush(self) -> None:
        with self._lock:
            items = list(self._counts.items())
            self._counts.clear()
        if not items:
            return
        with self.catalog.write() as conn:
            conn.executemany(
                "INSERT INTO usage_daily(principal, day, route, requests, cost_micro_usd)"
                " VALUES (?,?,?,?,?) ON CONFLICT(principal, day, route) DO UPDATE SET"
                " requests = requests + excluded.requests,"
                " cost_micro_usd = cost_micro_usd + excluded.cost_micro_usd",
                [(p, d, r, c[0], c[1]) for (p, d, r), c in items],
            )


def object_usage(conn: sqlite3.Connection, principal: str) -> dict[str, Any]:
    """What a principal holds: its objects' bytes (each object its full size, even when the
    blob is shared with identical content elsewhere, so the figure says nothing about other
    principals' content), document pages and media minutes derived from objects."""
    n, size = conn.execute(
        "SELECT COUNT(*), COALESCE(SUM(size), 0) FROM objects WHERE acl_owner = ?", (principal,)
    ).fetchone()
    pages = conn.execute(
        "SELECT COUNT(*) FROM (SELECT DISTINCT scope, doc_id, acl_owner, page FROM units"
        " WHERE created_by = ? AND object_key IS NOT NULL AND plane = 'doc_visual')",
        (principal,),
    ).fetchone()[0]
    media_ms = conn.execute(
        "SELECT COALESCE(SUM(m), 0) FROM (SELECT MAX(t_end_ms) AS m FROM units"
        " WHERE created_by = ? AND object_key IS NOT NULL AND t_end_ms IS NOT NULL"
        " GROUP BY scope, doc_id, acl_owner)",
        (principal,),
    ).fetchone()[0]
    return {
        "objects": int(n),
        "object_bytes": int(size),
        "media_pages": int(pages),
        "media_minutes": round(int(media_ms) / 60_000, 2),
    }


def media_reserved(conn: sqlite3.Connection, principal: str) -> tuple[int, int]:
    """Document pages and media milliseconds the principal's queued and running derivation
    jobs have reserved (measured at ingest; released when the job ends)."""
    pages, ms = conn.execute(
        "SELECT COALESCE(SUM(json_extract(payload, '$.cost_pages')), 0),"
        " COALESCE(SUM(json_extract(payload, '$.cost_ms')), 0) FROM jobs"
        " WHERE principal = ? AND kind = 'derive' AND state IN ('queued', 'running')",
        (principal,),
    ).fetchone()
    return int(pages), int(ms)
