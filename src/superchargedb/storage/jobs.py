"""A persistent job queue in the catalog: leases, retries, exactly-once completion.

A worker claims a job by writing a fresh lease token and deadline; a worker that dies simply
stops renewing, and once the lease expires another worker claims the job again. Completion runs
in the same transaction as the job's output and only succeeds while the caller still holds the
lease, so a job's Units are written exactly once however many workers touched it.
"""

from __future__ import annotations

import json
import secrets
import sqlite3
import time
import uuid
from dataclasses import dataclass
from typing import Any

from .. import faults
from .catalog import Catalog


class LeaseLost(Exception):
    """Another worker took the job over (our lease expired)."""


@dataclass(frozen=True)
class Job:
    id: str
    kind: str
    payload: dict[str, Any]
    principal: str
    scope: str
    acl_owner: str
    acl_groups: list[str]
    attempts: int
    max_attempts: int
    token: str


def _now() -> int:
    return int(time.time() * 1000)


class JobQueue:
    def __init__(self, catalog: Catalog, lease_s: float = 300.0, max_attempts: int = 3) -> None:
        self.catalog = catalog
        self.lease_ms = int(lease_s * 1000)
        self.max_attempts = max_attempts

    def enqueue(
        self,
        conn: sqlite3.Connection,
        kind: str,
        payload: dict[str, Any],
        *,
        principal: str,
        scope: str,
        acl_owner: str,
        acl_groups: list[str],
        dedupe_key: str,
    ) -> str:
        """Add a job inside the caller's write transaction."""
        job_id = "j_" + uuid.uuid4().hex
        now = _now()
        conn.execute(
            "INSERT INTO jobs(id, kind, state, payload, principal, scope, acl_owner, acl_groups,"
            " max_attempts, dedupe_key, created_at, updated_at)"
            " VALUES (?,?,'queued',?,?,?,?,?,?,?,?,?)",
            (
                job_id,
                kind,
                json.dumps(payload),
                principal,
                scope,
                acl_owner,
                json.dumps(acl_groups),
                self.max_attempts,
                dedupe_key,
                now,
                now,
            ),
        )
        faults.point("jobs.enqueue.after_insert")
        return job_id

    def find(self, conn: sqlite3.Connection, dedupe_key: str) -> sqlite3.Row | None:
        """The newest job for this request that has not failed."""
        return conn.execute(
            "SELECT * FROM jobs WHERE dedupe_key = ? AND state != 'failed'"
            " ORDER BY created_at DESC LIMIT 1",
            (dedupe_key,),
        ).fetchone()

    def claim(self) -> Job | None:
        """Lease the oldest runnable job (queued, or running with an expired lease)."""
        now = _now()
        token = secrets.token_hex(8)
        with self.catalog.write() as conn:
            row = conn.execute(
                "SELECT id FROM jobs WHERE state = 'queued'"
                " OR (state = 'running' AND lease_until < ?) ORDER BY created_at LIMIT 1",
                (now,),
            ).fetchone()
            if row is None:
                return None
            r = conn.execute(
                "UPDATE jobs SET state = 'running', attempts = attempts + 1, lease_token = ?,"
                " lease_until = ?, updated_at = ? WHERE id = ? RETURNING *",
                (token, now + self.lease_ms, now, row[0]),
            ).fetchone()
            faults.point("jobs.claim.after_update")
        faults.point("jobs.after_claim")
        return Job(
            id=r["id"],
            kind=r["kind"],
            payload=json.loads(r["payload"]),
            principal=r["principal"],
            scope=r["scope"],
            acl_owner=r["acl_owner"],
            acl_groups=json.loads(r["acl_groups"]),
            attempts=r["attempts"],
            max_attempts=r["max_attempts"],
            token=token,
        )

    def heartbeat(self, job: Job, progress: float) -> None:
        with self.catalog.write() as conn:
            cur = conn.execute(
                "UPDATE jobs SET lease_until = ?, progress = ?, updated_at = ?"
                " WHERE id = ? AND lease_token = ? AND state = 'running'",
                (_now() + self.lease_ms, progress, _now(), job.id, job.token),
            )
            faults.point("jobs.heartbeat.after_update")
            if cur.rowcount != 1:
                raise LeaseLost(job.id)

    def complete(self, conn: sqlite3.Connection, job: Job, result: dict[str, Any]) -> None:
        """Mark done inside the caller's transaction (with the job's output); raises LeaseLost."""
        cur = conn.execute(
            "UPDATE jobs SET state = 'done', progress = 1.0, result = ?, error = NULL,"
            " lease_until = NULL, updated_at = ? WHERE id = ? AND lease_token = ?"
            " AND state = 'running'",
            (json.dumps(result), _now(), job.id, job.token),
        )
        faults.point("jobs.complete.after_update")
        if cur.rowcount != 1:
            raise LeaseLost(job.id)

    def fail(self, job: Job, error: str, *, retry: bool) -> str:
        """Record a failure; requeue while tries remain. Returns the new state."""
        with self.catalog.write() as conn:
            final = not retry or job.attempts >= job.max_attempts
            state = "failed" if final else "queued"
            cur = conn.execute(
                "UPDATE jobs SET state = ?, error = ?, lease_token = NULL, lease_until = NULL,"
                " updated_at = ? WHERE id = ? AND lease_token = ?",
                (state, error[:2000], _now(), job.id, job.token),
            )
            faults.point("jobs.fail.final" if final else "jobs.fail.requeue")
            if cur.rowcount != 1:
                raise LeaseLost(job.id)
            if final:
                self._release_quota(conn, job)
        faults.point("jobs.fail.after_commit")
        return state

    @staticmethod
    def _release_quota(conn: sqlite3.Connection, job: Job) -> None:
        """A failed job's reserved document no longer counts, unless it has Units already."""
        doc = job.payload.get("doc_id")
        left = conn.execute(
            "SELECT 1 FROM units WHERE scope = ? AND doc_id = ? AND acl_owner = ? LIMIT 1",
            (job.scope, doc, job.acl_owner),
        ).fetchone()
        if left is None:
            conn.execute(
                "DELETE FROM docs WHERE scope = ? AND doc_id = ? AND acl_owner = ?",
                (job.scope, doc, job.acl_owner),
            )
            faults.point("jobs.release_quota.after_delete")

    def depth(self) -> dict[str, int]:
        rows = self.catalog.reader().execute("SELECT state, COUNT(*) FROM jobs GROUP BY state")
        out = {"queued": 0, "running": 0, "done": 0, "failed": 0}
        out.update({r[0]: int(r[1]) for r in rows})
        return out
