"""The search path on PostgreSQL (``SearchStore`` / ``SearchView`` of ``protocols_search.py``).

Keys are the ``units`` table's bigint ids. The dense leg runs the filter in SQL on ``units``
itself (the exact or HNSW scan, ``vectors.py``), so its keys passed the exact filter in that
statement's snapshot and it is ``checked`` (D-240). The lexical leg comes from the process's
derived index once it is built (``lexical_tail.py``, D-267), caught up with the outbox first:
unchecked when the caller re-checks, else through the exact filter; before that, and where the
index cannot answer, BM25 from the transactional postings in SQL (``lexical.py``). The re-check
is exact (it is the hydration with the filter), and the hydration is one statement whatever the
number of keys.

A view holds no connection between calls (the Protocol has no close): each call takes one from
the pool and reads the newest committed snapshot. A Unit deleted between a leg and the
hydration is left out of the hydration, as the Protocol allows.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any

import psycopg

from ... import positions
from ...errors import UnavailableError
from ...readfilter import ReadFilter
from ...types import Locator
from ..protocols import Vector
from ..protocols_search import HitRow, Leg, UnitKey
from ..sqlite.units import unit_link
from . import lexical as lexical_sql
from . import vectors as vectors_sql
from .filter_sql import where_sql
from .lexical_tail import LexicalTail
from .replicas import Replicas

Conn = Callable[[], AbstractContextManager[psycopg.Connection[Any]]]

HIT_COLUMNS = (
    "id, unit_id, scope, doc_id, modality, plane, source_uri, mime, text, loc_kind, loc_start,"
    " loc_end, t_start_ms, t_end_ms, shot_idx, page, bbox_x0, bbox_y0, bbox_x1, bbox_y1,"
    " object_key"
)
_COLS = tuple(c.strip() for c in HIT_COLUMNS.split(","))
_LOC_KIND = _COLS.index("loc_kind")


def _hit(r: tuple[Any, ...]) -> HitRow:
    loc: Locator | None = None
    link: str | None = None
    if r[_LOC_KIND] is not None or r[-1]:  # Locators and object links are the rare rows
        named = dict(zip(_COLS, r, strict=True))
        loc = Locator.from_row(named) if r[_LOC_KIND] is not None else None
        link = unit_link(named)
    return HitRow(r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8], loc, link)


def fetch_hit_rows(
    conn: psycopg.Connection[Any], keys: Sequence[UnitKey], rf: ReadFilter | None = None
) -> dict[UnitKey, HitRow]:
    """Hit rows by key; with ``rf``, only the rows it admits (the exact re-check)."""
    if not keys:
        return {}
    sql = f"SELECT {', '.join('u.' + c for c in _COLS)} FROM units u WHERE u.id = ANY(%s)"
    params: list[object] = [[int(k) for k in keys]]
    if rf is not None:
        where, wparams = where_sql(rf)
        sql += f" AND {where}"
        params += wparams
    return {int(r[0]): _hit(r) for r in conn.execute(sql.encode(), params)}


class PgSearchStore:
    overlap_legs = True  # every call takes its own pooled connection

    def __init__(
        self,
        conn: Conn,
        exact_max: int,
        tail: LexicalTail | None = None,
        replicas: Replicas | None = None,
    ) -> None:
        self.conn = conn
        self.exact_max = exact_max
        self.tail = tail
        self.replicas = replicas

    def view(self, rf: ReadFilter) -> PgSearchView:
        return PgSearchView(self, rf)

    def cache_stats(self) -> tuple[int, int]:
        return 0, 0  # no readable-candidate cache: the filter is the statement's own WHERE


class PgSearchView:
    def __init__(self, s: PgSearchStore, rf: ReadFilter) -> None:
        self.s = s
        self.rf = rf

    def dense(self, vector: Vector, depth: int) -> Leg:
        """Each plane's nearest admitted Units (exact or HNSW, D-202), merged by cosine; on a
        hot standby when one is current enough (D-270), whose keys the caller then re-checks
        on the primary (``checked=False``) and does not cache (``fresh=False``)."""
        replicas = self.s.replicas
        picked = replicas.pick(positions.read_after()) if replicas is not None else None
        if picked is not None and replicas is not None:
            name, conn = picked
            try:
                keys, detail = self._dense_on(conn, vector, depth)
                return Leg(keys, f"{detail} on {name}", checked=False, fresh=False)
            except UnavailableError:
                replicas.failed(name)  # the primary answers this search and the next ones
        keys, detail = self._dense_on(self.s.conn, vector, depth)
        return Leg(keys, detail, checked=True)

    def _dense_on(self, on: Conn, vector: Vector, depth: int) -> tuple[list[UnitKey], str]:
        scored: list[tuple[float, int]] = []
        plans: list[str] = []
        with on() as conn:
            for plane in self.rf.planes:
                rows, plan = vectors_sql.search_rows(
                    conn, plane, vector, depth, self.rf, self.s.exact_max
                )
                if rows:
                    plans.append(plan)
                scored += [(sim, key) for key, _, sim in rows]
        scored.sort(key=lambda x: (-x[0], x[1]))
        detail = "+".join(self.rf.planes) + (f" ({','.join(sorted(set(plans)))})" if plans else "")
        return [k for _, k in scored[:depth]], detail

    def lexical(self, terms: Sequence[str], depth: int, *, defer_check: bool) -> Leg:
        """The process's derived index when it can answer (D-267): unchecked when the caller
        re-checks (``defer_check``), else through the exact filter; else BM25 in SQL."""
        tail = self.s.tail
        if tail is not None and terms:
            if tail.ready:
                tail.catch_up()
            else:
                tail.start()
            if tail.ready:
                with self.s.conn() as conn:
                    keys = tail.search(conn, terms, depth, self.rf, checked=not defer_check)
                if keys is not None:
                    return Leg(keys, "bm25 (derived)", checked=not defer_check)
        with self.s.conn() as conn:
            rows = lexical_sql.search_rows(conn, terms, depth, self.rf)
        return Leg([k for k, _, _ in rows], "bm25 (postings)", checked=True)

    def recheck(
        self, fused: Sequence[tuple[UnitKey, float]], need: int
    ) -> tuple[list[tuple[UnitKey, float]], Mapping[UnitKey, HitRow]]:
        kept: list[tuple[UnitKey, float]] = []
        rows: dict[UnitKey, HitRow] = {}
        i = 0
        with self.s.conn() as conn:
            while len(kept) < need and i < len(fused):
                chunk = fused[i : i + need]
                i += need
                got = fetch_hit_rows(conn, [k for k, _ in chunk], self.rf)
                rows.update(got)
                kept += [kv for kv in chunk if kv[0] in got]
        return kept + list(fused[i:]), rows

    def texts(self, keys: Sequence[UnitKey]) -> Mapping[UnitKey, str]:
        if not keys:
            return {}
        with self.s.conn() as conn:
            rows = conn.execute(
                "SELECT id, text FROM units WHERE id = ANY(%s)", ([int(k) for k in keys],)
            )
            return {int(k): str(t) for k, t in rows}

    def hits(self, keys: Sequence[UnitKey]) -> Mapping[UnitKey, HitRow]:
        with self.s.conn() as conn:
            return fetch_hit_rows(conn, keys)
