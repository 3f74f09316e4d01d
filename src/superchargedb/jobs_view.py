"""Derivation jobs on the facade: ``GET /v1/jobs/{id}`` and ``GET /v1/jobs``.

A job is visible to whoever could read the Units it derives (within the grants, and submitted by
the caller, owned by it or shared with one of its groups); everyone else gets a 404.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from .auth.scopes import within_any
from .documents import decode_cursor, encode_cursor, page_size
from .errors import ForbiddenError, NotFoundError, ValidationError
from .storage.sqlite.filter_sql import scope_sql
from .types import Principal

if TYPE_CHECKING:
    from .storage.sqlite.catalog import Catalog


class JobsMixin:
    catalog: Catalog

    def get_job(self, principal: Principal, job_id: str) -> dict[str, Any]:
        """A derivation job's progress and output; 404 unless the caller could read its Units."""
        if not principal.has("read"):
            raise ForbiddenError("the read permission is required")
        row = self.catalog.reader().execute("SELECT * FROM jobs WHERE id = ?", (job_id,)).fetchone()
        if row is None or not within_any(row["scope"], principal.scopes):
            raise NotFoundError("job not found")
        groups = set(json.loads(row["acl_groups"]))
        mine = row["principal"] == principal.name or row["acl_owner"] == principal.name
        if not (mine or groups & principal.groups):
            raise NotFoundError("job not found")
        return job_dict(row)

    def list_jobs(
        self,
        principal: Principal,
        state: str | None = None,
        cursor: str | None = None,
        limit: int | None = None,
    ) -> dict[str, Any]:
        """``GET /v1/jobs``: the jobs ``get_job`` would show the caller, oldest first, by keyset."""
        if not principal.has("read"):
            raise ForbiddenError("the read permission is required")
        if state is not None and state not in JOB_STATES:
            raise ValidationError(f"state must be one of {list(JOB_STATES)}", field="state")
        n = page_size(limit)
        # The same rule as get_job, in SQL: within the grants, and submitted by the caller,
        # owned by it or shared with one of its groups.
        s_sql, params = scope_sql("j.scope", principal.scopes)
        groups = sorted(principal.groups)
        who = "j.principal = ? OR j.acl_owner = ?"
        if groups:
            who += (
                " OR EXISTS (SELECT 1 FROM json_each(j.acl_groups) g"
                f" WHERE g.value IN ({','.join('?' * len(groups))}))"
            )
        sql = f"SELECT * FROM jobs j WHERE {s_sql} AND ({who})"
        params += [principal.name, principal.name, *groups]
        if state is not None:
            sql += " AND j.state = ?"
            params.append(state)
        after = decode_cursor(cursor)
        if after is not None:
            ok = isinstance(after, list) and len(after) == 2
            if not ok or not isinstance(after[0], int) or not isinstance(after[1], str):
                raise ValidationError("invalid cursor", field="cursor")
            if not 0 <= after[0] < 2**63:
                raise ValidationError("invalid cursor", field="cursor")
            sql += " AND (j.created_at, j.id) > (?, ?)"
            params += after
        sql += " ORDER BY j.created_at, j.id LIMIT ?"
        rows = self.catalog.reader().execute(sql, (*params, n + 1)).fetchall()
        jobs = [job_dict(r) for r in rows[:n]]
        last = rows[n - 1] if len(rows) > n else None
        nxt = encode_cursor([last["created_at"], last["id"]]) if last is not None else None
        return {"jobs": jobs, "next_cursor": nxt}


JOB_STATES = ("queued", "running", "done", "failed")


def job_dict(row: Any) -> dict[str, Any]:
    result = json.loads(row["result"]) if row["result"] else {}
    return {
        "job_id": row["id"],
        "kind": row["kind"],
        "state": row["state"],
        "progress": row["progress"],
        "attempts": row["attempts"],
        "max_attempts": row["max_attempts"],
        "error": row["error"],
        "unit_ids": result.get("unit_ids", []),
        "scope": row["scope"],
        "doc_id": json.loads(row["payload"]).get("doc_id"),
        "created_at": row["created_at"],
        "updated_at": row["updated_at"],
    }
