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
from collections.abc import Mapping, Sequence
from typing import Any, cast

import psycopg

from ..protocols import JobRecord, JobSpec, JobState, Lease, LeaseLostError
from .sql import refuse_nul

NOW = "(extract(epoch FROM clock_timestamp()) * 1000)::bigint"
_OWNER = json.dumps({"host": socket.gethostname(), "pid": os.getpid()}, separators=(",", ":"))


def enqueue(cur: psycopg.Cursor[Any], spec: JobSpec, max_attempts: int) -> str:
    refuse_nul("a job", *vars(spec).values())
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


# A failed job's reserved document no longer counts, unless it has Units already (the embedded
# queue's rule); ``f`` is the CTE of the jobs that just failed.
_RELEASE = (
    " DELETE FROM docs d USING f WHERE d.scope = f.scope AND d.doc_id = f.doc_id"
    " AND d.acl_owner = f.acl_owner AND NOT EXISTS (SELECT 1 FROM units u"
    " WHERE u.scope = f.scope AND u.doc_id = f.doc_id AND u.acl_owner = f.acl_owner)"
)
# The payload's document id (a payload that is not JSON names none, and fails no statement).
_DOC_ID = "CASE WHEN pg_input_is_valid(payload, 'jsonb') THEN payload::jsonb ->> 'doc_id' END"
_RECORD = "id, kind, state, attempts, scope, acl_owner, acl_groups, result"


def record(r: Sequence[Any]) -> JobRecord:
    return JobRecord(
        str(r[0]),
        str(r[1]),
        cast(JobState, r[2]),
        int(r[3]),
        str(r[4]),
        str(r[5]),
        tuple(r[6]),
        None if r[7] is None else str(r[7]),
    )


def claim(conn: psycopg.Connection[Any], lease_ms: int) -> Lease | None:
    token = secrets.token_hex(16)
    with conn.transaction():
        conn.execute(
            "WITH f AS (UPDATE jobs SET state = 'failed', error = 'lease expired on the last"
            " attempt (' || attempts || ')', lease_token = NULL, lease_until = NULL,"
            f" lease_owner = NULL, updated_at = {NOW} WHERE state = 'running'"
            f" AND lease_until < {NOW} AND attempts >= max_attempts"
            f" RETURNING scope, acl_owner, {_DOC_ID} AS doc_id)" + _RELEASE
        )
        row = conn.execute(
            "WITH c AS (SELECT id FROM jobs WHERE state = 'queued'"
            f" OR (state = 'running' AND lease_until < {NOW})"
            " ORDER BY created_at, seq LIMIT 1 FOR UPDATE SKIP LOCKED)"
            " UPDATE jobs j SET state = 'running', attempts = j.attempts + 1, lease_token = %s,"
            f" lease_until = {NOW} + %s, lease_owner = %s, updated_at = {NOW}"
            " FROM c WHERE j.id = c.id RETURNING j.id, j.kind, j.attempts, j.payload,"
            " j.principal, j.scope, j.acl_owner, j.acl_groups, j.max_attempts",
            (token, lease_ms, _OWNER),
        ).fetchone()
    if row is None:
        return None
    return Lease(
        str(row[0]),
        str(row[1]),
        token,
        int(row[2]),
        str(row[3]),
        principal=str(row[4]),
        scope=str(row[5]),
        acl_owner=str(row[6]),
        acl_groups=tuple(row[7]),
        max_attempts=int(row[8]),
    )


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
        row = conn.execute(
            "UPDATE jobs SET state = CASE WHEN %s AND attempts < max_attempts THEN 'queued'"
            " ELSE 'failed' END, error = %s, lease_token = NULL, lease_until = NULL,"
            f" lease_owner = NULL, updated_at = {NOW}"
            " WHERE id = %s AND lease_token = %s AND state = 'running'"
            f" RETURNING state, scope, acl_owner, {_DOC_ID}",
            (retry, error[:2000], lease.job_id, lease.token),
        ).fetchone()
        if row is None:
            raise LeaseLostError(lease.job_id)
        if row[0] == "failed":
            conn.execute(
                "WITH f AS (SELECT %s::text AS scope, %s::text AS acl_owner, %s::text AS doc_id)"
                + _RELEASE,
                (row[1], row[2], row[3]),
            )
    return cast(JobState, row[0])


def get(conn: psycopg.Connection[Any], job_id: str) -> JobRecord | None:
    if "\0" in job_id:
        return None
    r = conn.execute(f"SELECT {_RECORD} FROM jobs WHERE id = %s", (job_id,)).fetchone()
    return None if r is None else record(r)


def find(cur: psycopg.Cursor[Any], dedupe_key: str) -> JobRecord | None:
    """The newest job queued under ``dedupe_key`` that has not failed."""
    if "\0" in dedupe_key:
        return None
    r = cur.execute(
        f"SELECT {_RECORD} FROM jobs WHERE dedupe_key = %s AND state != 'failed'"
        " ORDER BY created_at DESC, seq DESC LIMIT 1",
        (dedupe_key,),
    ).fetchone()
    return None if r is None else record(r)


def set_groups(cur: psycopg.Cursor[Any], job_id: str, groups: Sequence[str]) -> None:
    refuse_nul("a job's groups", job_id, list(groups))
    cur.execute("UPDATE jobs SET acl_groups = %s WHERE id = %s", (sorted(set(groups)), job_id))


def depth(conn: psycopg.Connection[Any]) -> Mapping[str, int]:
    out = {"queued": 0, "running": 0, "done": 0, "failed": 0}
    for state, n in conn.execute("SELECT state, count(*) FROM jobs GROUP BY state"):
        out[str(state)] = int(n)
    return out
