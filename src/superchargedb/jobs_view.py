"""Derivation jobs on the facade: ``GET /v1/jobs/{id}`` and ``GET /v1/jobs``.

A job is visible to whoever could read the Units it derives (within the grants, and submitted by
the caller, owned by it or shared with one of its groups); everyone else gets a 404.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from .documents import decode_cursor, encode_cursor, page_size
from .errors import ForbiddenError, NotFoundError, ValidationError
from .readfilter import ReadFilter
from .storage.protocols import JobState
from .types import Principal

if TYPE_CHECKING:
    from .storage.protocols_reads import JobListing, JobView


def _filter(principal: Principal) -> ReadFilter:
    """Jobs are read over the caller's grants (not one request's scope), on no plane."""
    return ReadFilter.of(principal, principal.scopes, ())


class JobsMixin:
    job_views: JobListing

    def get_job(self, principal: Principal, job_id: str) -> dict[str, Any]:
        """A derivation job's progress and output; 404 unless the caller could read its Units."""
        if not principal.has("read"):
            raise ForbiddenError("the read permission is required")
        job = self.job_views.get(job_id, _filter(principal))
        if job is None:
            raise NotFoundError("job not found")
        return job_dict(job)

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
        after = decode_cursor(cursor)
        if after is not None:
            ok = isinstance(after, list) and len(after) == 2
            if not ok or not isinstance(after[0], int) or not isinstance(after[1], str):
                raise ValidationError("invalid cursor", field="cursor")
            if not 0 <= after[0] < 2**63:
                raise ValidationError("invalid cursor", field="cursor")
        rows = self.job_views.page(
            _filter(principal),
            state=cast("JobState | None", state),
            after=None if after is None else (after[0], after[1]),
            limit=n + 1,
        )
        jobs = [job_dict(r) for r in rows[:n]]
        last = rows[n - 1] if len(rows) > n else None
        nxt = encode_cursor([last.created_at, last.job_id]) if last is not None else None
        return {"jobs": jobs, "next_cursor": nxt}


JOB_STATES = ("queued", "running", "done", "failed")


def job_dict(job: JobView) -> dict[str, Any]:
    return {
        "job_id": job.job_id,
        "kind": job.kind,
        "state": job.state,
        "progress": job.progress,
        "attempts": job.attempts,
        "max_attempts": job.max_attempts,
        "error": job.error,
        "unit_ids": list(job.unit_ids),
        "scope": job.scope,
        "doc_id": job.doc_id,
        "created_at": job.created_at,
        "updated_at": job.updated_at,
    }
