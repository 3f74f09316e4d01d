"""A ``ReadFilter`` rendered as PostgreSQL SQL on the ``units`` table (alias ``u``).

The same semantics as the embedded backend's ``storage/sqlite/filter_sql.py`` and
:meth:`ReadFilter.admits` (the reference; the contract tests compare them):

* scope containment on the ``/`` boundary, never ``LIKE`` (D-2): ``scope = t OR (scope >= t||'/'
  AND scope < t||'0')`` in byte order (``COLLATE "C"``: '0' is the byte after '/'), which the btree
  on ``scope`` serves;
* the ACL leg: the reader owns the Unit, or shares one of its groups (``acl_groups && groups``,
  served by the GIN index); a reader without groups reads only what it owns;
* planes, modalities, doc ids, the event-time window and the request's ACL filter.

PostgreSQL text cannot hold a NUL byte, and no stored value does (D-207): a filter value holding
one (the ``NO_MODALITY`` marker, or hostile input) matches nothing, so it is dropped before it is
bound.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import psycopg

from ...readfilter import ReadFilter
from ..vectors import PLANES

C = 'COLLATE "C"'


def _clean(values: Iterable[str]) -> list[str]:
    return sorted({v for v in values if "\0" not in v})


def scope_sql(col: str, scopes: Sequence[str]) -> tuple[str, list[object]]:
    parts: list[str] = []
    params: list[object] = []
    for s in _clean(scopes):
        parts.append(f"({col} = %s {C} OR ({col} >= %s {C} AND {col} < %s {C}))")
        params.extend([s, s + "/", s + "0"])
    return "(" + (" OR ".join(parts) or "FALSE") + ")", params


def acl_sql(alias: str, owner: str, groups: Iterable[str]) -> tuple[str, list[object]]:
    gs = _clean(groups)
    params: list[object] = []
    if "\0" in owner:
        owner_sql = "FALSE"
    else:
        owner_sql = f"{alias}.acl_owner = %s"
        params.append(owner)
    if not gs:
        return owner_sql, params
    return f"({owner_sql} OR {alias}.acl_groups && %s::text[])", [*params, gs]


def where_sql(rf: ReadFilter, plane: str | None = None) -> tuple[str, list[object]]:
    """The full WHERE clause on alias ``u``. ``plane`` (one of the filter's planes, already
    checked by the caller) is inlined as a literal so that the plane's partial HNSW index
    matches; otherwise the filter's planes are a bound array."""
    s_sql, params = scope_sql("u.scope", rf.scopes)
    a_sql, a_params = acl_sql("u", rf.principal, rf.groups)
    parts = [s_sql, a_sql]
    params += a_params
    if plane is not None:
        if plane not in PLANES:  # inlined: only the known plane names, never caller text
            raise ValueError(f"unknown plane {plane!r}")
        parts.append(f"u.plane = '{plane}'")
    else:
        parts.append("u.plane = ANY(%s::text[])")
        params.append(_clean(rf.planes))
    if rf.modalities:
        parts.append("u.modality = ANY(%s::text[])")
        params.append(_clean(rf.modalities))
    if rf.doc_ids:
        parts.append("u.doc_id = ANY(%s::text[])")
        params.append(_clean(rf.doc_ids))
    if rf.time_lo_ms is not None:
        parts.append("u.event_at >= %s")
        params.append(rf.time_lo_ms)
    if rf.time_hi_ms is not None:
        parts.append("u.event_at < %s")
        params.append(rf.time_hi_ms)
    if rf.acl_owner is not None:
        if "\0" in rf.acl_owner:
            parts.append("FALSE")
        else:
            parts.append("u.acl_owner = %s")
            params.append(rf.acl_owner)
    if rf.acl_groups:
        parts.append("u.acl_groups && %s::text[]")
        params.append(_clean(rf.acl_groups))
    return " AND ".join(parts), params


def count_admitted(
    conn: psycopg.Connection[Any], rf: ReadFilter, cap: int, plane: str | None = None
) -> int:
    """How many Units ``rf`` admits (in ``plane``), counting no further than ``cap + 1``: a
    bounded scan of the filter's indexes that tells a selective filter from a broad one."""
    where, params = where_sql(rf, plane)
    row = conn.execute(
        f"SELECT count(*) FROM (SELECT 1 FROM units u WHERE {where} LIMIT %s) c".encode(),
        [*params, cap + 1],
    ).fetchone()
    return int(row[0]) if row else 0
