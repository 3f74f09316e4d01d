"""``CatalogCounts`` on PostgreSQL: a tenant's figures (``GET /v1/stats``) in one snapshot.

The statements run in one ``REPEATABLE READ`` transaction, so the figures agree with each other.
A Unit is outbox lag while one of its index operations is committed but not applied (a pending
``outbox`` row for its key), the form the embedded backend's applied watermark takes here.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..protocols_reads import CatalogCounts, TenantCounts
from .filter_sql import scope_sql
from .sql import Conn


class PgCounts:
    def __init__(self, conn: Conn) -> None:
        self.conn = conn

    def within(self, scopes: Sequence[str]) -> TenantCounts:
        w, p = scope_sql("scope", scopes)
        with self.conn() as conn, conn.transaction():
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
            planes = {
                str(plane): int(n)
                for plane, n in conn.execute(
                    f"SELECT plane, count(*) FROM units WHERE {w} GROUP BY plane".encode(), p
                )
            }
            jobs = {
                str(state): int(n)
                for state, n in conn.execute(
                    f"SELECT state, count(*) FROM jobs WHERE {w} GROUP BY state".encode(), p
                )
            }
            row = conn.execute(
                f"SELECT (SELECT count(*) FROM docs WHERE {w}),"
                f" (SELECT count(*) FROM units u WHERE {w} AND EXISTS (SELECT 1 FROM outbox o"
                "  WHERE o.unit = u.id AND NOT o.applied)),"
                f" (SELECT count(*) FROM objects WHERE {w}),"
                f" (SELECT coalesce(sum(size), 0) FROM objects WHERE {w})".encode(),
                [*p, *p, *p, *p],
            ).fetchone()
        assert row is not None
        return TenantCounts(
            units_by_plane=planes,
            documents=int(row[0]),
            jobs_by_state=jobs,
            outbox_lag=int(row[1]),
            objects=int(row[2]),
            object_bytes=int(row[3]),
        )

    def units_total(self) -> int:
        with self.conn() as conn:
            row = conn.execute("SELECT count(*) FROM units").fetchone()
        return int(row[0]) if row else 0


_check: type[CatalogCounts] = PgCounts  # mypy checks the class against the seam
