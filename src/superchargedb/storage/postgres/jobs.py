"""The job queue on PostgreSQL: ``FOR UPDATE SKIP LOCKED`` claims and fenced leases (D-204).

A claim takes the oldest runnable job (queued, or running with an expired lease) that no other
claimer holds at that instant, and gives it a fresh lease token and deadline in the same
statement. Every later step (heartbeat, completion, failure) matches on the token, so once a lease
expired and another worker claimed the job, the first worker's calls change nothing and raise
:class:`LeaseLostError`. Times are the database's clock, the one clock every worker shares.

A lease that expired on the job's last attempt fails the job instead of running it again (it may
be what kills its workers), as in the embedded queue (``storage/sqlite/jobs.py``).
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import uuid
from collections.abc import Mapping
from typing import Any, cast

import psycopg

from ..protocols import JobRecord, JobSpec, JobState, Lease, LeaseLostError

NOW = "(extract(epoch FROM clock_timestamp()) * 1000)::bigint"
_OWNER = json.dumps({"host": socket.gethostname(), "pid": os.getpid()}, separators=(",", ":"))


def enqueue(cur: psycopg.Cursor[Any], spec: JobSpec, max_attempts: int) -> str:
    job_id = "j_" + uuid.uuid4().hex
    cur.execute(
        "INSERT INTO jobs(id, kind, state, payload, principal, scope, acl_owner, acl_groups,"
        f" max_attempts, dedupe_key, created_at, updated_at) VALUES (%s, %s, 'queued', %s, %s,"
        f" %s, %s, %s, %s, %s, {NOW}, {NOW})",
        (
            job_id,
            spec.kind,
            spec.payload_json,
            spec.principal,
            spec.scope,
            spec.acl_owner,
            sorted(set(spec.acl_groups)),
            max_attempts,
            spec.dedupe_key,
        ),
    )
    return job_id


def claim(conn: psycopg.Connection[Any], lease_ms: int) -> Lease | None:
    token = secrets.token_hex(16)
    with conn.transaction():
        conn.execute(
            "UPDATE jobs SET state = 'failed', error = 'lease expired on the last attempt ('"
            f" || attempts || ')', lease_token = NULL, lease_until = NULL, lease_owner = NULL,"
            f" updated_at = {NOW} WHERE state = 'running' AND lease_until < {NOW}"
            " AND attempts >= max_attempts"
        )
        row = conn.execute(
            "WITH c AS (SELECT id FROM jobs WHERE state = 'queued'"
            f" OR (state = 'running' AND lease_until < {NOW})"
            " ORDER BY created_at, id LIMIT 1 FOR UPDATE SKIP LOCKED)"
            " UPDATE jobs j SET state = 'running', attempts = j.attempts + 1, lease_token = %s,"
            f" lease_until = {NOW} + %s, lease_owner = %s, updated_at = {NOW}"
            " FROM c WHERE j.id = c.id RETURNING j.id, j.kind, j.attempts, j.payload",
            (token, lease_ms, _OWNER),
        ).fetchone()
    if row is None:
        return None
    return Lease(str(row[0]), str(row[1]), token, int(row[2]), str(row[3]))


def heartbeat(conn: psycopg.Connection[Any], lease: Lease, progress: float, lease_ms: int) -> None:
    with conn.transaction():
        cur = conn.execute(
            f"UPDATE jobs SET lease_until = {NOW} + %s, progress = %s, updated_at = {NOW}"
            " WHERE id = %s AND lease_token = %s AND state = 'running'",
            (lease_ms, progress, lease.job_id, lease.token),
        )
        if cur.rowcount != 1:
            raise LeaseLostError(lease.job_id)


def complete(cur: psycopg.Cursor[Any], lease: Lease, result_json: str) -> None:
    """Inside the caller's write transaction, with the job's output."""
    cur.execute(
        "UPDATE jobs SET state = 'done', progress = 1.0, result = %s, error = NULL,"
        f" lease_until = NULL, lease_owner = NULL, updated_at = {NOW}"
        " WHERE id = %s AND lease_token = %s AND state = 'running' RETURNING id",
        (result_json, lease.job_id, lease.token),
    )
    if cur.fetchone() is None:  # a row read back (not rowcount): it syncs a pipelined write
        raise LeaseLostError(lease.job_id)


def fail(conn: psycopg.Connection[Any], lease: Lease, error: str, *, retry: bool) -> JobState:
    with conn.transaction():
        cur = conn.execute(
            "UPDATE jobs SET state = CASE WHEN %s AND attempts < max_attempts THEN 'queued'"
            " ELSE 'failed' END, error = %s, lease_token = NULL, lease_until = NULL,"
            f" lease_owner = NULL, updated_at = {NOW}"
            " WHERE id = %s AND lease_token = %s AND state = 'running' RETURNING state",
            (retry, error[:2000], lease.job_id, lease.token),
        )
        row = cur.fetchone()
        if row is None:
            raise LeaseLostError(lease.job_id)
    return cast(JobState, row[0])


def get(conn: psycopg.Connection[Any], job_id: str) -> JobRecord | None:
    r = conn.execute(
        "SELECT id, kind, state, attempts, scope, acl_owner FROM jobs WHERE id = %s", (job_id,)
    ).fetchone()
    if r is None:
        return None
    return JobRecord(str(r[0]), str(r[1]), cast(JobState, r[2]), int(r[3]), str(r[4]), str(r[5]))


def depth(conn: psycopg.Connection[Any]) -> Mapping[str, int]:
    out = {"queued": 0, "running": 0, "done": 0, "failed": 0}
    for state, n in conn.execute("SELECT state, count(*) FROM jobs GROUP BY state"):
        out[str(state)] = int(n)
    return out
