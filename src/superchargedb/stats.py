"""A tenant's own figures (``GET /v1/stats``), counted only within the caller's grants.

``/metrics`` shows the whole deployment and is the operator's (it needs a token); a tenant admin
gets the same kind of figures for what lies within its own scopes (a tenant root admin: the whole
tenant), never a count from another tenant. Counts only, never content: an admin sees every
principal within its scopes already, and a count names no Unit (D-186).
"""

from __future__ import annotations

from typing import Any

from .auth.admin import require_admin
from .storage.protocols_reads import CatalogCounts
from .types import PLANES, Principal

JOB_STATES = ("queued", "running", "done", "failed")


def tenant_stats(counts: CatalogCounts, actor: Principal) -> dict[str, Any]:
    """Units per plane, documents, jobs by state, outbox lag and object bytes within the
    actor's grants, read in one snapshot."""
    require_admin(actor)
    scopes = list(actor.scopes)
    c = counts.within(scopes)
    planes: dict[str, int] = {pl: 0 for pl in PLANES}
    planes.update(c.units_by_plane)
    jobs = dict.fromkeys(JOB_STATES, 0)
    jobs.update(c.jobs_by_state)
    return {
        "scopes": sorted(scopes),
        "units": {"total": sum(planes.values()), "by_plane": planes},
        "documents": c.documents,
        "jobs": jobs,
        "outbox_lag": c.outbox_lag,
        "objects": {"count": c.objects, "bytes": c.object_bytes},
    }
