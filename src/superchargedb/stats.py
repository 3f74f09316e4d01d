"""A tenant's own figures (``GET /v1/stats``), counted only within the caller's grants.

``/metrics`` shows the whole deployment and is the operator's (it needs a token); a tenant admin
gets the same kind of figures for what lies within its own scopes (a tenant root admin: the whole
tenant), never a count from another tenant. Counts only, never content: an admin sees every
principal within its scopes already, and a count names no Unit.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from .auth.admin import require_admin
from .storage.sqlite.filter_sql import scope_sql
from .types import PLANES, Principal

JOB_STATES = ("queued", "running", "done", "failed")


def tenant_stats(conn: sqlite3.Connection, actor: Principal, applied_seq: int) -> dict[str, Any]:
    """Units per plane, documents, jobs by state, outbox lag and object bytes within the
    actor's grants, read in one snapshot."""
    require_admin(actor)
    scopes = list(actor.scopes)

    def where(col: str = "scope") -> tuple[str, list[object]]:
        return scope_sql(col, scopes)

    conn.execute("BEGIN")  # one read snapshot: the figures agree with each other
    try:
        w, p = where()
        planes: dict[str, int] = {pl: 0 for pl in PLANES}
        for plane, n in conn.execute(
            f"SELECT plane, COUNT(*) FROM units WHERE {w} GROUP BY plane", p
        ):
            planes[str(plane)] = int(n)
        docs = conn.execute(f"SELECT COUNT(*) FROM docs WHERE {w}", p).fetchone()[0]
        jobs = dict.fromkeys(JOB_STATES, 0)
        for state, n in conn.execute(
            f"SELECT state, COUNT(*) FROM jobs WHERE {w} GROUP BY state", p
        ):
            jobs[str(state)] = int(n)
        # This tenant's committed Units whose vectors the index has not applied yet.
        lag = conn.execute(
            f"SELECT COUNT(*) FROM units WHERE {w} AND seq > ?", [*p, applied_seq]
        ).fetchone()[0]
        obj = conn.execute(
            f"SELECT COUNT(*), COALESCE(SUM(size), 0) FROM objects WHERE {w}", p
        ).fetchone()
    finally:
        conn.execute("COMMIT")
    return {
        "scopes": sorted(scopes),
        "units": {"total": sum(planes.values()), "by_plane": planes},
        "documents": int(docs),
        "jobs": jobs,
        "outbox_lag": int(lag),
        "objects": {"count": int(obj[0]), "bytes": int(obj[1])},
    }
