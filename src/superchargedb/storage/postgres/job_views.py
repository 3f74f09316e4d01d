"""``JobListing`` on PostgreSQL: ``GET /v1/jobs/{id}`` and ``GET /v1/jobs`` under a ReadFilter.

The embedded rule (``storage/sqlite/job_views.py``, D-185): a job is visible within the reader's
grants when the reader submitted it, owns it or shares one of its groups. ``get`` decides on the
row (``readfilter.may_read`` plus the submitter), ``page`` in SQL (the scope range of D-2, the
GIN-served group overlap); the contract checks compare both with the reference rule. Pages are
keyset-ordered by ``(created_at, job_id)`` in byte order (``COLLATE "C"``), as SQLite compares.
"""

from __future__ import annotations

import json
from typing import cast

from ...readfilter import ReadFilter, may_read, within_any
from ..protocols import JobState
from ..protocols_reads import JobListing, JobView
from .filter_sql import scope_sql
from .sql import Conn, Row

_COLS = (
    "j.id, j.kind, j.state, j.progress, j.attempts, j.max_attempts, j.error, j.result, j.scope,"
    " j.payload, j.created_at, j.updated_at, j.principal, j.acl_owner, j.acl_groups"
)


def _json(text: str | None) -> dict[str, object]:
    try:
        got = json.loads(text) if text else {}
    except ValueError:
        return {}
    return got if isinstance(got, dict) else {}


def _view(r: Row) -> JobView:
    result, payload = _json(r[7]), _json(r[9])
    units = result.get("unit_ids")
    doc = payload.get("doc_id")
    return JobView(
        job_id=str(r[0]),
        kind=str(r[1]),
        state=cast(JobState, r[2]),
        progress=float(r[3]),
        attempts=int(r[4]),
        max_attempts=int(r[5]),
        error=r[6],
        unit_ids=tuple(str(u) for u in units) if isinstance(units, list) else (),
        scope=str(r[8]),
        doc_id=None if doc is None else str(doc),
        created_at=int(r[10]),
        updated_at=int(r[11]),
    )


class PgJobViews:
    def __init__(self, conn: Conn) -> None:
        self.conn = conn

    def get(self, job_id: str, rf: ReadFilter) -> JobView | None:
        if "\0" in job_id:
            return None
        with self.conn() as conn:
            r = conn.execute(
                f"SELECT {_COLS} FROM jobs j WHERE j.id = %s".encode(), (job_id,)
            ).fetchone()
        if r is None or not self._visible(r, rf):
            return None
        return _view(r)

    def page(
        self,
        rf: ReadFilter,
        *,
        state: JobState | None,
        after: tuple[int, str] | None,
        limit: int,
    ) -> list[JobView]:
        who, params = self._where(rf)
        sql = f"SELECT {_COLS} FROM jobs j WHERE {who}"
        if state is not None:
            sql += " AND j.state = %s"
            params.append(state)
        if after is not None:
            sql += ' AND (j.created_at > %s OR (j.created_at = %s AND j.id COLLATE "C" > %s))'
            params += [after[0], after[0], after[1].split("\0")[0]]  # byte order: the same bound
        sql += ' ORDER BY j.created_at, j.id COLLATE "C" LIMIT %s'
        params.append(max(0, limit))
        with self.conn() as conn:
            rows = conn.execute(sql.encode(), params).fetchall()
        return [_view(r) for r in rows]

    @staticmethod
    def _visible(r: Row, rf: ReadFilter) -> bool:
        scope, submitter, owner, groups = str(r[8]), str(r[12]), str(r[13]), tuple(r[14])
        if may_read(rf.scopes, rf.principal, rf.groups, scope, owner, groups):
            return True
        return submitter == rf.principal and within_any(scope, rf.scopes)

    @staticmethod
    def _where(rf: ReadFilter) -> tuple[str, list[object]]:
        """The same rule in SQL on alias ``j``; a value holding NUL matches nothing (D-207)."""
        s_sql, params = scope_sql("j.scope", rf.scopes)
        if "\0" in rf.principal:
            who = "FALSE"
        else:
            who = "j.principal = %s OR j.acl_owner = %s"
            params += [rf.principal, rf.principal]
        groups = sorted(g for g in rf.groups if "\0" not in g)
        if groups:
            who += " OR j.acl_groups && %s::text[]"
            params.append(groups)
        return f"{s_sql} AND ({who})", params


_check: type[JobListing] = PgJobViews  # mypy checks the class against the seam
