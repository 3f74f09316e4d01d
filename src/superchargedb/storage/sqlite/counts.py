"""``CatalogCounts`` on the catalog: a tenant's figures (``GET /v1/stats``) in one snapshot."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ..protocols_reads import CatalogCounts, TenantCounts
from .catalog import Catalog
from .filter_sql import scope_sql


class SqliteCounts:
    """Counts over ``units``, ``docs``, ``jobs`` and ``objects`` within some scopes.

    ``applied`` is the outbox watermark the vector index has applied (``IndexSync``): a Unit
    committed after it is lag.
    """

    def __init__(self, catalog: Catalog, applied: Callable[[], int]) -> None:
        self.catalog = catalog
        self.applied = applied

    def within(self, scopes: Sequence[str]) -> TenantCounts:
        applied_seq = self.applied()
        conn = self.catalog.reader()
        w, p = self._scope(list(scopes))
        conn.execute("BEGIN")  # one read snapshot: the figures agree with each other
        try:
            planes = {
                str(plane): int(n)
                for plane, n in conn.execute(
                    f"SELECT plane, COUNT(*) FROM units WHERE {w} GROUP BY plane", p
                )
            }
            docs = conn.execute(f"SELECT COUNT(*) FROM docs WHERE {w}", p).fetchone()[0]
            jobs = {
                str(state): int(n)
                for state, n in conn.execute(
                    f"SELECT state, COUNT(*) FROM jobs WHERE {w} GROUP BY state", p
                )
            }
            lag = conn.execute(
                f"SELECT COUNT(*) FROM units WHERE {w} AND seq > ?", [*p, applied_seq]
            ).fetchone()[0]
            obj = conn.execute(
                f"SELECT COUNT(*), COALESCE(SUM(size), 0) FROM objects WHERE {w}", p
            ).fetchone()
        finally:
            conn.execute("COMMIT")
        return TenantCounts(
            units_by_plane=planes,
            documents=int(docs),
            jobs_by_state=jobs,
            outbox_lag=int(lag),
            objects=int(obj[0]),
            object_bytes=int(obj[1]),
        )

    def _scope(self, scopes: list[str]) -> tuple[str, list[object]]:
        """Scope containment on the ``/`` boundary (a contract test's broken variant replaces
        it)."""
        return scope_sql("scope", scopes)

    def units_total(self) -> int:
        return int(self.catalog.reader().execute("SELECT COUNT(*) FROM units").fetchone()[0])


_check: type[CatalogCounts] = SqliteCounts  # mypy checks the class against the seam
