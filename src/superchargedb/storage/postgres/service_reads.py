"""The facade's reads on PostgreSQL: document and Unit listings, a principal's usage, the word
tables and the keyframes (``Listing``, ``UsageReader``, ``WordReader``, ``KeyframeReader`` in
``protocols_service.py``), with the embedded backend's semantics (``storage/sqlite/listing.py``).

A listing shows only Units whose index operations are applied (no pending ``outbox`` row for
the Unit): the form the embedded backend's applied watermark takes here (D-241), so a Unit
committed but not yet searchable is not listed either.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ... import acting
from ...readfilter import ReadFilter
from ..protocols import UnitRecord
from ..protocols_search import UnitKey
from ..protocols_service import (
    DocSummary,
    Keyframe,
    KeyframeReader,
    Listing,
    RouteUsage,
    UnitUsage,
    UsageReader,
    WordReader,
)
from ..protocols_writes import Word
from . import units as units_sql
from .filter_sql import where_sql
from .sql import Conn

APPLIED = "NOT EXISTS (SELECT 1 FROM outbox o WHERE o.unit = u.id AND NOT o.applied)"


def _clean(ids: Sequence[str]) -> list[str]:
    """Ids a row can hold: one with a NUL byte names nothing stored (D-207)."""
    return [i for i in dict.fromkeys(ids) if "\0" not in i]


class PgListing:
    def __init__(self, conn: Conn) -> None:
        self.conn = conn

    def docs(
        self, rf: ReadFilter, *, after: tuple[str, str] | None, limit: int
    ) -> list[DocSummary]:
        where, params = where_sql(rf)
        if after is not None:
            if "\0" in after[0] or "\0" in after[1]:
                return []
            where += ' AND (u.scope, u.doc_id COLLATE "C") > (%s COLLATE "C", %s COLLATE "C")'
            params += [after[0], after[1]]
        sql = (
            "SELECT u.scope, u.doc_id, count(*), array_agg(DISTINCT u.plane),"
            " array_agg(DISTINCT u.modality), min(u.created_at), max(u.created_at),"
            " min(nullif(u.source_uri, '') COLLATE \"C\")"
            f" FROM units u WHERE {where} AND {APPLIED}"
            ' GROUP BY u.scope, u.doc_id ORDER BY u.scope, u.doc_id COLLATE "C" LIMIT %s'
        )
        with self.conn() as c:
            rows = c.execute(sql.encode(), [*params, limit]).fetchall()
        return [
            DocSummary(
                scope=str(r[0]),
                doc_id=str(r[1]),
                units=int(r[2]),
                planes=tuple(sorted(r[3])),
                modalities=tuple(sorted(r[4])),
                source_uri=r[7],
                created_at=int(r[5]),
                updated_at=int(r[6]),
            )
            for r in rows
        ]

    def units(
        self, rf: ReadFilter, *, after: UnitKey | None, limit: int
    ) -> list[tuple[UnitKey, UnitRecord]]:
        where, params = where_sql(rf)
        if after is not None:
            where += " AND u.id > %s"
            params.append(int(after))
        sql = (
            f"SELECT u.id, {units_sql.COLUMNS} FROM units u WHERE {where} AND {APPLIED}"
            " ORDER BY u.id LIMIT %s"
        )
        with self.conn() as c:
            cur = c.execute(sql.encode(), [*params, limit])
            names = [d.name for d in cur.description or ()]
            rows = cur.fetchall()
        out: list[tuple[UnitKey, UnitRecord]] = []
        for r in rows:
            m: dict[str, Any] = dict(zip(names, r, strict=True))
            out.append((int(m["id"]), units_sql.record(m)))
        return out


class PgUsageReader:
    def __init__(self, conn: Conn) -> None:
        self.conn = conn

    def units_created(self, principal: str) -> UnitUsage:
        if "\0" in principal:
            return UnitUsage({}, 0)
        # A principal's usage counts its Units in every tenant, as its quota does (D-263).
        with acting.as_system(), self.conn() as c:
            rows = c.execute(
                "SELECT plane, count(*), coalesce(sum(char_length(text)), 0) FROM units"
                " WHERE created_by = %s GROUP BY plane",
                (principal,),
            ).fetchall()
        return UnitUsage({str(r[0]): int(r[1]) for r in rows}, sum(int(r[2]) for r in rows))

    def requests(self, principal: str, day_lo: int, day_hi: int) -> list[RouteUsage]:
        if "\0" in principal:
            return []
        with self.conn() as c:
            rows = c.execute(
                "SELECT route, sum(requests), sum(cost_micro_usd) FROM usage_daily"
                " WHERE principal = %s AND day BETWEEN %s AND %s GROUP BY route ORDER BY route",
                (principal, day_lo, day_hi),
            ).fetchall()
        return [RouteUsage(str(r[0]), int(r[1]), int(r[2] or 0)) for r in rows]


class PgWordReader:
    def __init__(self, conn: Conn) -> None:
        self.conn = conn

    def of_units(self, unit_ids: Sequence[str]) -> Mapping[str, list[Word]]:
        ids = _clean(unit_ids)
        if not ids:
            return {}
        with self.conn() as c:
            rows = c.execute(
                "SELECT u.unit_id, w.char_start, w.char_end, w.t_start_ms, w.t_end_ms, w.page,"
                " w.x0, w.y0, w.x1, w.y1, w.conf FROM unit_words w JOIN units u ON u.id = w.unit"
                " WHERE u.unit_id = ANY(%s::text[]) ORDER BY u.unit_id, w.idx",
                (ids,),
            ).fetchall()
        out: dict[str, list[Word]] = {}
        for r in rows:
            box = None if r[6] is None else (r[6], r[7], r[8], r[9])
            out.setdefault(str(r[0]), []).append(
                Word(
                    start=int(r[1]),
                    end=int(r[2]),
                    t_start_ms=r[3],
                    t_end_ms=r[4],
                    page=r[5],
                    box=box,
                    conf=r[10],
                )
            )
        return out


class PgKeyframeReader:
    def __init__(self, conn: Conn) -> None:
        self.conn = conn

    def present(self, unit_ids: Sequence[str]) -> set[str]:
        ids = _clean(unit_ids)
        if not ids:
            return set()
        with self.conn() as c:
            rows = c.execute(
                "SELECT u.unit_id FROM unit_keyframes k JOIN units u ON u.id = k.unit"
                " WHERE u.unit_id = ANY(%s::text[])",
                (ids,),
            ).fetchall()
        return {str(r[0]) for r in rows}

    def get(self, unit_id: str) -> Keyframe | None:
        if "\0" in unit_id:
            return None
        with self.conn() as c:
            row = c.execute(
                "SELECT k.mime, k.data FROM unit_keyframes k JOIN units u ON u.id = k.unit"
                " WHERE u.unit_id = %s",
                (unit_id,),
            ).fetchone()
        return Keyframe(str(row[0]), bytes(row[1])) if row else None


def _checked(conn: Conn) -> None:
    """mypy checks the classes against the seam."""
    _l: Listing = PgListing(conn)  # noqa: F841
    _u: UsageReader = PgUsageReader(conn)  # noqa: F841
    _w: WordReader = PgWordReader(conn)  # noqa: F841
    _k: KeyframeReader = PgKeyframeReader(conn)  # noqa: F841
