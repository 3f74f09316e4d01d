"""A persistent job queue in the catalog: leases, retries, exactly-once completion.

A worker claims a job by writing a fresh lease token and deadline; a worker that dies simply
stops renewing, and once the lease expires another worker claims the job again. Completion runs
in the same transaction as the job's output and only succeeds while the caller still holds the
lease, so a job's Units are written exactly once however many workers touched it.

Each lease also names its owner (``LeaseOwner``: an instance id, the kind of process, and the
pid with its start time and the kernel's boot id), so a restart need not wait out the lease of a
process that is provably dead: the server that takes the data-dir lock knows every earlier
server instance is gone, and an external worker is dead when, under the same kernel boot and pid
namespace, its pid no longer runs the process that started at the recorded time. Anything that
cannot be proven dead keeps its lease until it expires. Releasing a live lease by mistake would
still be safe: its holder's completion needs the token and fails with ``LeaseLost``.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import socket
import sqlite3
import time
import uuid
from dataclasses import asdict, dataclass
from typing import Any

from ... import faults
from .catalog import Catalog

log = logging.getLogger(__name__)


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


def _read(path: str) -> str:
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return ""  # not Linux, or no /proc: nothing can be proven from here


def proc_start(pid: int) -> str:
    """The process's start time (clock ticks since boot, /proc/<pid>/stat field 22); '' if
    there is no such process (or no /proc)."""
    stat = _read(f"/proc/{pid}/stat")
    fields = stat.rsplit(")", 1)[-1].split() if stat else []
    return fields[19] if len(fields) > 19 else ""


def _pid_ns() -> str:
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return ""


@dataclass(frozen=True)
class LeaseOwner:
    """Who holds a lease. ``kind`` is "server" for the data-dir owner's in-process workers and
    "worker" for an external ``superchargedb worker`` (or anything else without the lock)."""

    id: str
    kind: str
    host: str
    boot: str
    pidns: str
    pid: int
    start: str

    @classmethod
    def current(cls, kind: str) -> LeaseOwner:
        pid = os.getpid()
        return cls(
            id=uuid.uuid4().hex,
            kind=kind,
            host=socket.gethostname(),
            boot=_read("/proc/sys/kernel/random/boot_id"),
            pidns=_pid_ns(),
            pid=pid,
            start=proc_start(pid),
        )

    def to_json(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str | None) -> LeaseOwner | None:
        try:
            d = json.loads(text or "")
            return cls(**{k: d[k] for k in cls.__dataclass_fields__})
        except (ValueError, TypeError, KeyError):
            return None

    def is_dead(self, me: LeaseOwner, *, own_data_dir: bool) -> bool:
        """Provably gone (never a guess: unknown means alive until the lease expires)."""
        if self.id == me.id:
            return False
        if own_data_dir and self.kind == "server":
            return True  # a server holds the data-dir lock for its whole life, and we hold it now
        if not (self.boot and me.boot):
            return False
        if self.boot != me.boot:
            return True  # WAL needs one kernel: every live writer shares our boot id
        if not (self.pidns and self.pidns == me.pidns and self.start):
            return False  # another container's pids mean nothing here
        return proc_start(self.pid) != self.start  # gone, or the pid now runs another process


class JobQueue:
    def __init__(
        self,
        catalog: Catalog,
        lease_s: float = 300.0,
        max_attempts: int = 3,
        owner_kind: str = "worker",
    ) -> None:
        self.catalog = catalog
        self.lease_ms = int(lease_s * 1000)
        self.max_attempts = max_attempts
        self.owner = LeaseOwner.current(owner_kind)
        self._owner_json = self.owner.to_json()

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
            # An expired lease on the last attempt: the job may be what kills its workers, so it
            # fails (quota released) instead of running beyond max_attempts.
            for r in conn.execute(
                "SELECT * FROM jobs WHERE state = 'running' AND lease_until < ?"
                " AND attempts >= max_attempts",
                (now,),
            ).fetchall():
                conn.execute(
                    "UPDATE jobs SET state = 'failed', error = ?, lease_token = NULL,"
                    " lease_until = NULL, lease_owner = NULL, updated_at = ? WHERE id = ?",
                    (f"lease expired on the last attempt ({r['attempts']})", now, r["id"]),
                )
                self._release_quota(conn, _job(r, str(r["lease_token"])))
            row = conn.execute(
                "SELECT id FROM jobs WHERE state = 'queued'"
                " OR (state = 'running' AND lease_until < ?) ORDER BY created_at LIMIT 1",
                (now,),
            ).fetchone()
            if row is None:
                return None
            r = conn.execute(
                "UPDATE jobs SET state = 'running', attempts = attempts + 1, lease_token = ?,"
                " lease_until = ?, lease_owner = ?, updated_at = ? WHERE id = ? RETURNING *",
                (token, now + self.lease_ms, self._owner_json, now, row[0]),
            ).fetchone()
            faults.point("jobs.claim.after_update")
        faults.point("jobs.after_claim")
        return _job(r, token)

    def release_dead_leases(self, *, own_data_dir: bool) -> dict[str, list[str]]:
        """At startup: requeue jobs whose lease holder is provably dead (see ``LeaseOwner``).

        The dead holder used up an attempt; a job whose holder died on its last attempt fails
        (it may be what killed it), which ends a crash loop instead of repeating it.
        """
        out: dict[str, list[str]] = {"requeued": [], "failed": []}
        with self.catalog.write() as conn:
            rows = conn.execute(
                "SELECT * FROM jobs WHERE state = 'running' AND lease_owner IS NOT NULL"
            ).fetchall()
            for r in rows:
                owner = LeaseOwner.from_json(r["lease_owner"])
                if owner is None or not owner.is_dead(self.owner, own_data_dir=own_data_dir):
                    continue
                final = r["attempts"] >= r["max_attempts"]
                conn.execute(
                    "UPDATE jobs SET state = ?, error = ?, lease_token = NULL, lease_until = NULL,"
                    " lease_owner = NULL, updated_at = ? WHERE id = ? AND lease_token = ?",
                    (
                        "failed" if final else "queued",
                        f"the worker holding it died (attempt {r['attempts']})"
                        if final
                        else r["error"],
                        _now(),
                        r["id"],
                        r["lease_token"],
                    ),
                )
                if final:
                    self._release_quota(conn, _job(r, str(r["lease_token"])))
                out["failed" if final else "requeued"].append(str(r["id"]))
        if out["requeued"] or out["failed"]:
            log.info(
                "jobs: released %d lease(s) of dead holders, failed %d on their last attempt",
                len(out["requeued"]),
                len(out["failed"]),
            )
        return out

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
            " lease_until = NULL, lease_owner = NULL, updated_at = ? WHERE id = ?"
            " AND lease_token = ?"
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
                " lease_owner = NULL, updated_at = ? WHERE id = ? AND lease_token = ?",
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


def _job(r: sqlite3.Row, token: str) -> Job:
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
