"""A derived Unit's word table (``unit_words``, migration m009; D-172): put, get, get many.

A word is a dict: ``start``/``end`` (its char span in the Unit's text), ``t_start_ms``/``t_end_ms``
for speech, ``page`` and ``box`` ([x0, y0, x1, y1]) for page words, ``conf``. Rows are keyed by the
Unit's rowid and deleted with it (a trigger). Every function takes an open connection; the caller
owns the transaction and has already checked that the caller may read the Unit.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

COLUMNS = "unit, idx, char_start, char_end, t_start_ms, t_end_ms, page, x0, y0, x1, y1, conf"


def put(conn: sqlite3.Connection, unit: int, words: Sequence[dict[str, Any]]) -> None:
    """Replace the Unit's words."""
    conn.execute("DELETE FROM unit_words WHERE unit = ?", (unit,))
    rows = []
    for i, w in enumerate(words):
        box = w.get("box") or (None, None, None, None)
        rows.append(
            (
                unit,
                i,
                int(w["start"]),
                int(w["end"]),
                w.get("t_start_ms"),
                w.get("t_end_ms"),
                w.get("page"),
                *box,
                w.get("conf"),
            )
        )
    conn.executemany(f"INSERT INTO unit_words({COLUMNS}) VALUES ({','.join('?' * 12)})", rows)


def put_for(conn: sqlite3.Connection, unit_id: str, words: Sequence[dict[str, Any]]) -> None:
    """Replace the words of the Unit with this public id (written in the caller's transaction)."""
    row = conn.execute("SELECT id FROM units WHERE unit_id = ?", (unit_id,)).fetchone()
    if row is not None:
        put(conn, int(row[0]), words)


def _word(r: Any) -> dict[str, Any]:
    w: dict[str, Any] = {"start": r["char_start"], "end": r["char_end"]}
    if r["t_start_ms"] is not None:
        w["t_start_ms"], w["t_end_ms"] = r["t_start_ms"], r["t_end_ms"]
    if r["x0"] is not None:
        w["page"], w["box"] = r["page"], [r["x0"], r["y0"], r["x1"], r["y1"]]
    if r["conf"] is not None:
        w["conf"] = r["conf"]
    return w


def get(conn: sqlite3.Connection, unit: int) -> list[dict[str, Any]]:
    """The Unit's words in order ([] when it has none)."""
    return get_many(conn, [unit]).get(unit, [])


def get_many(conn: sqlite3.Connection, units: Sequence[int]) -> dict[int, list[dict[str, Any]]]:
    out: dict[int, list[dict[str, Any]]] = {}
    for i in range(0, len(units), 500):
        part = list(units[i : i + 500])
        marks = ",".join("?" * len(part))
        cur = conn.execute(
            f"SELECT {COLUMNS} FROM unit_words WHERE unit IN ({marks}) ORDER BY unit, idx", part
        )
        cur.row_factory = sqlite3.Row
        for r in cur:
            out.setdefault(int(r["unit"]), []).append(_word(r))
    return out


def for_unit_id(conn: sqlite3.Connection, unit_id: str) -> list[dict[str, Any]]:
    """The words of the Unit with this public id (the caller has checked it may read it)."""
    row = conn.execute("SELECT id FROM units WHERE unit_id = ?", (unit_id,)).fetchone()
    return get(conn, int(row[0])) if row is not None else []


def for_unit_ids(
    conn: sqlite3.Connection, unit_ids: Sequence[str]
) -> dict[str, list[dict[str, Any]]]:
    """Words by public id, for Units the caller has already been shown (search hits)."""
    if not unit_ids:
        return {}
    marks = ",".join("?" * len(unit_ids))
    ids = {
        int(r[0]): str(r[1])
        for r in conn.execute(
            f"SELECT id, unit_id FROM units WHERE unit_id IN ({marks})", list(unit_ids)
        )
    }
    return {ids[k]: v for k, v in get_many(conn, list(ids)).items()}
