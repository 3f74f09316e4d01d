"""``JobListing`` on the catalog: ``GET /v1/jobs/{id}`` and ``GET /v1/jobs`` under a ReadFilter.

A job is visible to whoever could read the Units it derives: its scope within the reader's
grants, and submitted by the reader, owned by it or shared with one of its groups. ``get``
decides that on the row (``readfilter.may_read`` plus the submitter), ``page`` in SQL; the
contract checks compare both with the reference rule (D-185).
"""

from __future__ import annotations

import json
import sqlite3
from typing import cast

from ...readfilter import ReadFilter, may_read, within_any
from ..protocols import JobState
from ..protocols_reads import JobListing, JobView
from .catalog import Catalog
from .filter_sql import scope_sql


def _view(row: sqlite3.Row) -> JobView:
    result = json.loads(row["result"]) if row["result"] else {}
    return JobView(
        job_id=row["id"],
        kind=row["kind"],
        state=cast(JobState, row["state"]),
        progress=row["progress"],
        attempts=row["attempts"],
        max_attempts=row["max_attempts"],
        error=row["error"],
        unit_ids=tuple(result.get("unit_ids", [])),
        scope=row["scope"],
        doc_id=json.loads(row["payload"]).get("doc_id"),
        created_at=row["created_at"],
        updated_at=row["updated_at"],
    )


class SqliteJobViews:
    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog

    def get(self, job_id: str, rf: ReadFilter) -> JobView | None:
        row = self.catalog.reader().execute("SELECT * FROM jobs WHERE id = ?", (job_id,)).fetchone()
        if row is None or not self._visible(row, rf):
            return None
        return _view(row)

    def page(
        self,
        rf: ReadFilter,
        *,
        state: JobState | None,
        after: tuple[int, str] | None,
        limit: int,
    ) -> list[JobView]:
        who, params = self._where(rf)
        sql = f"SELECT * FROM jobs j WHERE {who}"
        if state is not None:
            sql += " AND j.state = ?"
            params.append(state)
        if after is not None:
            sql += " AND (j.created_at, j.id) > (?, ?)"
            params += list(after)
        sql += " ORDER BY j.created_at, j.id LIMIT ?"
        rows = self.catalog.reader().execute(sql, (*params, limit)).fetchall()
        return [_view(r) for r in rows]

    # -- the visibility rule, in its two forms (a contract test's broken variant replaces one)
    def _visible(self, row: sqlite3.Row, rf: ReadFilter) -> bool:
        groups = json.loads(row["acl_groups"])
        if may_read(rf.scopes, rf.principal, rf.groups, row["scope"], row["acl_owner"], groups):
            return True
        return row["principal"] == rf.principal and within_any(row["scope"], rf.scopes)

    def _where(self, rf: ReadFilter) -> tuple[str, list[object]]:
        """The same rule in SQL on alias ``j``: within the grants, and submitted by the
        reader, owned by it or shared with one of its groups."""
        s_sql, params = scope_sql("j.scope", rf.scopes)
        groups = sorted(rf.groups)
        who = "j.principal = ? OR j.acl_owner = ?"
        if groups:
            who += (
                " OR EXISTS (SELECT 1 FROM json_each(j.acl_groups) g"
                f" WHERE g.value IN ({','.join('?' * len(groups))}))"
            )
        params += [rf.principal, rf.principal, *groups]
        return f"{s_sql} AND ({who})", params


_check: type[JobListing] = SqliteJobViews  # mypy checks the class against the seam
