"""A ``ReadFilter`` rendered as SQLite SQL on the catalog's ``units`` table.

Scope containment is a range test on the ``/`` boundary, never ``LIKE`` (D-2):
``scope = t OR (scope >= t||'/' AND scope < t||'0')`` ('0' is the byte after '/'), which an
index on ``scope`` serves. The ACL leg is the owner or an ``EXISTS`` over ``unit_groups``.
:meth:`ReadFilter.admits` is the reference; the contract tests compare the two.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ...readfilter import ReadFilter


def scope_sql(col: str, scopes: Sequence[str]) -> tuple[str, list[object]]:
    parts: list[str] = []
    params: list[object] = []
    for s in scopes:
        parts.append(f"({col} = ? OR ({col} >= ? AND {col} < ?))")
        params.extend([s, s + "/", s + "0"])
    return "(" + (" OR ".join(parts) or "0") + ")", params


def acl_sql(alias: str, owner: str, groups: Iterable[str]) -> tuple[str, list[object]]:
    groups = sorted(set(groups))
    if not groups:
        return f"{alias}.acl_owner = ?", [owner]
    marks = ",".join("?" * len(groups))
    return (
        f"({alias}.acl_owner = ? OR EXISTS (SELECT 1 FROM unit_groups g"
        f" WHERE g.unit = {alias}.id AND g.grp IN ({marks})))",
        [owner, *groups],
    )


def visible_sql(
    alias: str, scopes: Sequence[str], owner: str, groups: Iterable[str]
) -> tuple[str, list[object]]:
    s_sql, s_params = scope_sql(f"{alias}.scope", scopes)
    a_sql, a_params = acl_sql(alias, owner, groups)
    return f"{s_sql} AND {a_sql}", s_params + a_params


def where_sql(rf: ReadFilter, applied_seq: int | None = None) -> tuple[str, list[object]]:
    """The full WHERE clause on alias ``u``: visibility, planes, the query's filters and, when
    given, the applied outbox watermark (a Unit committed but not yet indexed is not read)."""
    vis, params = visible_sql("u", rf.scopes, rf.principal, rf.groups)
    parts = [vis, f"u.plane IN ({','.join('?' * len(rf.planes))})"]
    params += list(rf.planes)
    if applied_seq is not None:
        parts.append("u.seq <= ?")
        params.append(applied_seq)
    if rf.modalities:
        parts.append(f"u.modality IN ({','.join('?' * len(rf.modalities))})")
        params += list(rf.modalities)
    if rf.doc_ids:
        parts.append(f"u.doc_id IN ({','.join('?' * len(rf.doc_ids))})")
        params += list(rf.doc_ids)
    # t_bucket (hours) first: an index range the planner can use before the exact bound.
    if rf.time_lo_ms is not None:
        parts.append("u.t_bucket >= ? AND u.event_at >= ?")
        params += [rf.time_lo_ms // 3_600_000, rf.time_lo_ms]
    if rf.time_hi_ms is not None:
        parts.append("u.t_bucket <= ? AND u.event_at < ?")
        params += [rf.time_hi_ms // 3_600_000, rf.time_hi_ms]
    if rf.acl_owner is not None:
        parts.append("u.acl_owner = ?")
        params.append(rf.acl_owner)
    if rf.acl_groups:
        groups = sorted(rf.acl_groups)
        parts.append(
            f"EXISTS (SELECT 1 FROM unit_groups g2 WHERE g2.unit = u.id"
            f" AND g2.grp IN ({','.join('?' * len(groups))}))"
        )
        params += groups
    return " AND ".join(parts), params
