"""The facade's reads on the catalog: document and Unit listings, a principal's usage and the
word tables (``Listing``, ``UsageReader``, ``WordReader`` in ``protocols_service.py``).

The statements are the ones ``documents.py`` and ``service.py`` ran themselves before the seam;
the listings' filter is the ``ReadFilter`` rendered by ``where`` (``filter_sql.where_sql``,
which a contract test's broken variant of the backend replaces), bounded by the applied outbox
watermark, so a Unit the indexes do not hold yet is not listed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ...readfilter import ReadFilter
from ..protocols import UnitRecord
from ..protocols_search import UnitKey
from ..protocols_service import DocSummary, Listing, RouteUsage, UnitUsage, UsageReader, WordReader
from ..protocols_writes import Word
from . import unit_words
from . import units as units_sql
from .catalog import Catalog
from .filter_sql import where_sql
from .write_rows import unit_record

Where = Callable[[ReadFilter, int | None], tuple[str, list[object]]]


class SqliteListing:
    def __init__(self, catalog: Catalog, applied: Callable[[], int], where: Where = where_sql):
        self.catalog = catalog
        self.applied = applied
        self.where = where

    def docs(
        self, rf: ReadFilter, *, after: tuple[str, str] | None, limit: int
    ) -> list[DocSummary]:
        where, params = self.where(rf, self.applied())
        if after is not None:
            where += " AND (u.scope, u.doc_id) > (?, ?)"
            params += [after[0], after[1]]
        rows = (
            self.catalog.reader()
            .execute(
                "SELECT u.scope, u.doc_id, COUNT(*) AS units,"
                " GROUP_CONCAT(DISTINCT u.plane) AS planes,"
                " GROUP_CONCAT(DISTINCT u.modality) AS modalities, MIN(u.created_at) AS created_at,"
                " MAX(u.created_at) AS updated_at, MIN(u.source_uri) AS source_uri"
                f" FROM units u WHERE {where}"
                " GROUP BY u.scope, u.doc_id ORDER BY u.scope, u.doc_id LIMIT ?",
                (*params, limit),
            )
            .fetchall()
        )
        return [
            DocSummary(
                scope=r["scope"],
                doc_id=r["doc_id"],
                units=int(r["units"]),
                planes=tuple(sorted(r["planes"].split(","))),
                modalities=tuple(sorted(r["modalities"].split(","))),
                source_uri=r["source_uri"],
                created_at=int(r["created_at"]),
                updated_at=int(r["updated_at"]),
            )
            for r in rows
        ]

    def units(
        self, rf: ReadFilter, *, after: UnitKey | None, limit: int
    ) -> list[tuple[UnitKey, UnitRecord]]:
        where, params = self.where(rf, self.applied())
        if after is not None:
            where += " AND u.id > ?"
            params.append(after)
        rows = (
            self.catalog.reader()
            .execute(
                f"SELECT {units_sql.UNIT_COLUMNS} FROM units u WHERE {where} ORDER BY u.id LIMIT ?",
                (*params, limit),
            )
            .fetchall()
        )
        return [(int(r["id"]), unit_record(r)) for r in rows]


class SqliteUsage:
    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog

    def units_created(self, principal: str) -> UnitUsage:
        per_plane: dict[str, int] = {}
        chars = 0
        for r in self.catalog.reader().execute(
            "SELECT plane, COUNT(*), SUM(LENGTH(text)) FROM units WHERE created_by = ?"
            " GROUP BY plane",
            (principal,),
        ):
            per_plane[str(r[0])] = int(r[1])
            chars += r[2] or 0
        return UnitUsage(per_plane, int(chars))

    def requests(self, principal: str, day_lo: int, day_hi: int) -> list[RouteUsage]:
        return [
            RouteUsage(str(r[0]), int(r[1]), int(r[2] or 0))
            for r in self.catalog.reader().execute(
                "SELECT route, SUM(requests), SUM(cost_micro_usd) FROM usage_daily"
                " WHERE principal = ? AND day BETWEEN ? AND ? GROUP BY route",
                (principal, day_lo, day_hi),
            )
        ]


def _word(w: dict[str, Any]) -> Word:
    box = w.get("box")
    return Word(
        start=int(w["start"]),
        end=int(w["end"]),
        t_start_ms=w.get("t_start_ms"),
        t_end_ms=w.get("t_end_ms"),
        page=w.get("page"),
        box=(box[0], box[1], box[2], box[3]) if box is not None else None,
        conf=w.get("conf"),
    )


class SqliteWords:
    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog

    def of_units(self, unit_ids: Sequence[str]) -> Mapping[str, list[Word]]:
        got = unit_words.for_unit_ids(self.catalog.reader(), list(unit_ids))
        return {u: [_word(w) for w in ws] for u, ws in got.items()}


def _checked(listing: SqliteListing, usage: SqliteUsage, words: SqliteWords) -> None:
    """mypy checks the classes against the seam."""
    _l: Listing = listing  # noqa: F841
    _u: UsageReader = usage  # noqa: F841
    _w: WordReader = words  # noqa: F841
