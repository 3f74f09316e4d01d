"""The dense leg on pgvector: filtered KNN, exact when the filter is selective, HNSW when broad.

Each plane has a partial HNSW index over ``halfvec(dim)`` cosine (``WHERE plane = '<plane>'``).
A filtered HNSW scan without iterative scan loses most hits under a selective filter (recall@10
0.04 at a 1 % filter, measured); with ``hnsw.iterative_scan = relaxed_order`` it keeps scanning
until ``k`` rows pass the filter. So the rule (D-202):

* one statement reads at most ``exact_max + 1`` admitted rows of the plane (a bounded scan of
  the btree/GIN filter indexes), each with its distance, in a ``MATERIALIZED`` CTE the HNSW
  index cannot serve, and returns their top ``k`` and their count; at most ``exact_max``: that
  is the **exact** answer (recall 1.0);
* more: **HNSW** with iterative scan (``relaxed_order``, then re-sorted), ``ef_search``
  ``max(100, 4k)``, sorts off so the planner cannot trade the walk for a scan (D-269); if it
  returns fewer than ``k`` rows, once more with four times the scan budget, then exact.

Scores are cosine similarities (``1 - distance``), best first, ties to the older Unit, as the
embedded store returns them.
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
import psycopg
from pgvector import HalfVector

from ...readfilter import ReadFilter
from ..protocols import Scored, Vector
from ..vectors import PLANES
from .filter_sql import count_admitted, where_sql

Plan = Literal["exact", "hnsw"]
# An exact scan here costs ~5-10 us a row (wide heap rows, one distance each): p50 1.0 / 28 /
# 133 ms at 300 / 3,000 / 29,700 admitted 384-d rows, where the iterative HNSW scan took 1.4 /
# 8.2 / 4.1 ms (bench/results/pg_legs.md, both plans forced, a loaded 2-core machine). But the
# walk slows as the filter narrows (it visits ~k / selectivity tuples): a 1 % filter over 100k
# Units (~1,000 admitted, depth 100) took 117 ms by HNSW and 14 ms exact (D-269). So exact up to
# 2,000 rows (~20 ms at worst, recall 1.0); the bounded count that decides takes a few ms.
EXACT_MAX = 2_000
MAX_SCAN_TUPLES = 20_000  # pgvector's default budget of an iterative scan
# The scan's candidate list: 4k (the embedded store's unfiltered over-fetch), at least 100. On
# 4,000 random 48-d vectors recall@10 was 0.94 / 0.98 / 0.99 / 1.0 at ef 40 / 64 / 100 / 200
# unfiltered, 0.95 / 0.95 / 0.97 / 1.0 under a 20 % filter (30 queries).
EF_MIN = 100


def _query(vector: Vector) -> HalfVector | None:
    q = np.asarray(vector, dtype=np.float32).reshape(-1)
    norm = float(np.linalg.norm(q))
    if norm == 0.0 or not np.isfinite(norm):
        return None
    return HalfVector(q / norm)


def exact_sql(plane: str, rf: ReadFilter) -> tuple[str, list[object]]:
    where, params = where_sql(rf, plane)
    return (
        "WITH c AS MATERIALIZED (SELECT u.id, u.unit_id, u.embedding <=> %s AS d FROM units u"
        f" WHERE {where}) SELECT id, unit_id, d FROM c ORDER BY d, id LIMIT %s",
        params,
    )


def bounded_sql(plane: str, rf: ReadFilter) -> tuple[str, list[object]]:
    """The exact scan over at most ``cap + 1`` admitted rows (bound), with their count."""
    where, params = where_sql(rf, plane)
    return (
        "WITH c AS MATERIALIZED (SELECT u.id, u.unit_id, u.embedding <=> %s AS d FROM units u"
        f" WHERE {where} LIMIT %s) SELECT id, unit_id, d, (SELECT count(*) FROM c) FROM c"
        " ORDER BY d, id LIMIT %s",
        params,
    )


def hnsw_sql(plane: str, rf: ReadFilter) -> tuple[str, list[object]]:
    where, params = where_sql(rf, plane)
    return (
        "WITH c AS MATERIALIZED (SELECT u.id, u.unit_id, u.embedding <=> %s AS d FROM units u"
        f" WHERE {where} ORDER BY u.embedding <=> %s LIMIT %s) SELECT id, unit_id, d FROM c"
        " ORDER BY d, id",
        params,
    )


def _exact(conn: psycopg.Connection[Any], plane: str, q: HalfVector, k: int, rf: ReadFilter) -> Any:
    sql, params = exact_sql(plane, rf)
    return conn.execute(sql.encode(), [q, *params, k]).fetchall()


def _exact_bounded(
    conn: psycopg.Connection[Any], plane: str, q: HalfVector, k: int, rf: ReadFilter, cap: int
) -> tuple[Any, int]:
    """The exact top ``k`` and how many rows the filter admits, counting no further than
    ``cap + 1``, in one statement: the bounded count that chooses the plan reads the rows the
    exact scan needs, so a selective filter costs one pass instead of two (a 1 % filter over
    100k Units: the count alone was 7-10 ms of 24)."""
    sql, params = bounded_sql(plane, rf)
    rows = conn.execute(sql.encode(), [q, *params, cap + 1, k]).fetchall()
    return [r[:3] for r in rows], (int(rows[0][3]) if rows else 0)


def _hnsw(
    conn: psycopg.Connection[Any], plane: str, q: HalfVector, k: int, rf: ReadFilter, budget: int
) -> Any:
    sql, params = hnsw_sql(plane, rf)
    with conn.transaction():
        _hnsw_settings(conn, k, budget)
        return conn.execute(sql.encode(), [q, *params, q, k]).fetchall()


def _hnsw_settings(conn: psycopg.Connection[Any], k: int, budget: int = MAX_SCAN_TUPLES) -> None:
    """The HNSW statement's transaction settings. ``enable_sort`` off: the caller counted more
    admitted rows than an exact scan should read, and the graph walk is the one plan without a
    sort, so the planner takes it even when it misjudges the filter (row-level security's tenant
    predicate beside an owner-or-group filter: it expected a few hundred rows and scanned and
    sorted 100k, 314 ms; D-269)."""
    conn.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
    conn.execute(f"SET LOCAL hnsw.ef_search = {min(1000, max(EF_MIN, 4 * k))}".encode())
    conn.execute(f"SET LOCAL hnsw.max_scan_tuples = {int(budget)}".encode())
    conn.execute("SET LOCAL enable_sort = off")


def plan_for(
    conn: psycopg.Connection[Any], plane: str, rf: ReadFilter, exact_max: int = EXACT_MAX
) -> Plan:
    return "exact" if count_admitted(conn, rf, exact_max, plane) <= exact_max else "hnsw"


def search_rows(
    conn: psycopg.Connection[Any],
    plane: str,
    vector: Vector,
    k: int,
    rf: ReadFilter,
    exact_max: int = EXACT_MAX,
) -> tuple[list[tuple[int, str, float]], Plan]:
    """The ``k`` nearest admitted Units of ``plane`` as ``(key, unit_id, cosine)``, best first,
    and the plan that found them."""
    if k <= 0 or plane not in rf.planes or plane not in PLANES:
        return [], "exact"
    q = _query(vector)
    if q is None:
        return [], "exact"
    rows, n = _exact_bounded(conn, plane, q, k, rf, exact_max)
    plan: Plan = "exact"
    if n > exact_max:
        plan = "hnsw"
        rows = _hnsw(conn, plane, q, k, rf, MAX_SCAN_TUPLES)
        if len(rows) < k:
            rows = _hnsw(conn, plane, q, k, rf, 4 * MAX_SCAN_TUPLES)
        if len(rows) < k:
            plan, rows = "exact", _exact(conn, plane, q, k, rf)
    return [(int(r[0]), str(r[1]), 1.0 - float(r[2])) for r in rows], plan


def search(
    conn: psycopg.Connection[Any],
    plane: str,
    vector: Vector,
    k: int,
    rf: ReadFilter,
    exact_max: int = EXACT_MAX,
) -> tuple[list[Scored], Plan]:
    rows, plan = search_rows(conn, plane, vector, k, rf, exact_max)
    return [Scored(uid, sim) for _, uid, sim in rows], plan


def explain(
    conn: psycopg.Connection[Any],
    plane: str,
    vector: Vector,
    k: int,
    rf: ReadFilter,
    exact_max: int = EXACT_MAX,
) -> tuple[Plan, str]:
    """The plan :func:`search` takes for this filter, and PostgreSQL's EXPLAIN of its query."""
    q = _query(vector)
    assert q is not None, "a zero vector searches nothing"
    plan = plan_for(conn, plane, rf, exact_max)
    if plan == "exact":
        sql, params = bounded_sql(plane, rf)  # the statement search_rows runs first
        args: list[object] = [q, *params, exact_max + 1, k]
    else:
        sql, params = hnsw_sql(plane, rf)
        args = [q, *params, q, k]
    with conn.transaction():
        if plan == "hnsw":
            _hnsw_settings(conn, k)
        rows = conn.execute(b"EXPLAIN " + sql.encode(), args).fetchall()
    return plan, "\n".join(str(r[0]) for r in rows)


def count(conn: psycopg.Connection[Any], plane: str) -> int:
    row = conn.execute("SELECT count(*) FROM units WHERE plane = %s", (plane,)).fetchone()
    return int(row[0]) if row else 0
