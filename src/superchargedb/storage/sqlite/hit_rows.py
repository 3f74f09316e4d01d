"""Hydration in SQL: keys -> :class:`HitRow` (one catalog query whatever the number of hits).

Everything a hit needs comes from one ``SELECT ... WHERE id IN (SELECT value FROM json_each(?))``:
one SQL text whatever the number of keys, so SQLite's statement cache keeps it prepared.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

import orjson

from ...types import Locator
from ..protocols_search import HitRow, UnitKey
from .units import unit_link

HIT_COLUMNS = (
    "id, unit_id, scope, doc_id, modality, plane, source_uri, mime, text, loc_kind, loc_start,"
    " loc_end, t_start_ms, t_end_ms, shot_idx, page, bbox_x0, bbox_y0, bbox_x1, bbox_y1,"
    " object_key"
)
# What most hits need: the full columns less the ten Locator fields, which only a row with a
# ``loc_kind`` reads (each column read costs ~0.2 us a row in sqlite3; 21 columns were half of
# the hydration query). Same order as HIT_COLUMNS up to ``loc_kind``; ``object_key`` last in both.
BRIEF_COLUMNS = (
    "id, unit_id, scope, doc_id, modality, plane, source_uri, mime, text, loc_kind, object_key"
)
_HYDRATE = f"SELECT {HIT_COLUMNS} FROM units WHERE id IN (SELECT value FROM json_each(?))"
_HYDRATE_CHECKED = (
    f"SELECT {', '.join('u.' + c.strip() for c in BRIEF_COLUMNS.split(','))} FROM units u"
    " NOT INDEXED WHERE u.id IN (SELECT value FROM json_each(?))"
)
_COLS = tuple(c.strip() for c in HIT_COLUMNS.split(","))
_BRIEF = tuple(c.strip() for c in BRIEF_COLUMNS.split(","))
_LOC_KIND = 9


def _row(r: tuple[object, ...]) -> HitRow:
    # Locators and object links are rare: only their rows get a by-name view.
    if r[_LOC_KIND] is None and not r[-1]:
        return HitRow(*r[1:9], None, None)  # type: ignore[arg-type,call-arg]
    named = dict(zip(_COLS, r, strict=True))
    return HitRow(*r[1:9], Locator.from_row(named), unit_link(named))  # type: ignore[arg-type,call-arg]


def _brief(r: tuple[object, ...]) -> HitRow:
    if r[-1] is None:
        # Neither a Locator nor an object: the brief columns after the key are the hit row as
        # it is (loc_kind and object_key both empty read as no Locator and no link). One C-level
        # tuple copy a row, where building each field cost 4 % of a 1 %-filter search.
        return tuple.__new__(HitRow, r[1:])
    link = unit_link(dict(zip(_BRIEF, r, strict=True)))
    return HitRow(*r[1:9], None, link)  # type: ignore[arg-type,call-arg]


def fetch_hit_rows(
    conn: sqlite3.Connection,
    keys: Sequence[UnitKey],
    where: str | None = None,
    params: Sequence[object] = (),
) -> dict[UnitKey, HitRow]:
    """Hit rows by key. With ``where`` (a predicate on alias ``u``), only the rows that satisfy
    it: the exact visibility re-check and the hydration in one query, over the brief columns;
    the rare rows with a Locator or an object link then get their full columns."""
    if not keys:
        return {}
    cur = conn.cursor()
    cur.row_factory = None  # plain tuples (a sqlite3.Row per hit was a third of hydration)
    arg = orjson.dumps([int(k) for k in keys])
    if where is None:
        return {r[0]: _row(r) for r in cur.execute(_HYDRATE, (arg,))}
    # NOT INDEXED: rowid lookups only (see lexical_leg.recheck; a scope index range is a scan).
    brief = {r[0]: r for r in cur.execute(f"{_HYDRATE_CHECKED} AND {where}", (arg, *params))}
    out = {k: _brief(r) for k, r in brief.items() if r[_LOC_KIND] is None}
    rare = [k for k in brief if k not in out]
    if rare:
        # One deleted in between is left out, as if it had gone before the check.
        full = fetch_hit_rows(conn, rare)
        out.update((k, full[k]) for k in rare if k in full)
    return out
