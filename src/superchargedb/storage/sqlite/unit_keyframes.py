"""A video shot's keyframe (``unit_keyframes``, migration m010; D-236): put, get, which exist.

One JPEG per shot Unit, taken from the shot's middle frame at derivation, keyed by the Unit's
rowid and deleted with it (a trigger). Every function takes an open connection; a reader has
already checked that the caller may read the Unit.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..protocols_service import Keyframe

if TYPE_CHECKING:
    from .catalog import Catalog


def put(conn: sqlite3.Connection, unit: int, mime: str, data: bytes) -> None:
    conn.execute(
        "INSERT OR REPLACE INTO unit_keyframes(unit, mime, data) VALUES (?, ?, ?)",
        (unit, mime, data),
    )


def get(conn: sqlite3.Connection, unit: int) -> tuple[str, bytes] | None:
    """(media type, bytes) of the Unit's keyframe, or None."""
    row = conn.execute("SELECT mime, data FROM unit_keyframes WHERE unit = ?", (unit,)).fetchone()
    return (str(row[0]), bytes(row[1])) if row else None


def present(conn: sqlite3.Connection, units: Sequence[int]) -> set[int]:
    """Those of ``units`` (rowids) that have a keyframe."""
    out: set[int] = set()
    for i in range(0, len(units), 500):
        part = list(units[i : i + 500])
        marks = ",".join("?" * len(part))
        q = f"SELECT unit FROM unit_keyframes WHERE unit IN ({marks})"
        out.update(int(r[0]) for r in conn.execute(q, part))
    return out


class SqliteKeyframes:
    """``KeyframeReader`` (protocols_service.py): keyframes by the Unit's id."""

    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog

    def present(self, unit_ids: Sequence[str]) -> set[str]:
        out: set[str] = set()
        conn = self.catalog.reader()
        for i in range(0, len(unit_ids), 500):
            part = list(unit_ids[i : i + 500])
            marks = ",".join("?" * len(part))
            q = (
                "SELECT u.unit_id FROM unit_keyframes k JOIN units u ON u.id = k.unit"
                f" WHERE u.unit_id IN ({marks})"
            )
            out.update(str(r[0]) for r in conn.execute(q, part))
        return out

    def get(self, unit_id: str) -> Keyframe | None:
        row = (
            self.catalog.reader()
            .execute(
                "SELECT k.mime, k.data FROM unit_keyframes k JOIN units u ON u.id = k.unit"
                " WHERE u.unit_id = ?",
                (unit_id,),
            )
            .fetchone()
        )
        return Keyframe(str(row[0]), bytes(row[1])) if row else None
