"""The write side of the embedded backend: the one write transaction and the job queue.

``SqliteWriteStore`` is ``WriteStore`` (``protocols_writes.py``) over the catalog alone, which
is all a ``superchargedb worker`` process has (the indexes are its server's);
``SqliteBackend`` adds the derived indexes and the readers on top. A write is the catalog's one
serialized ``BEGIN IMMEDIATE`` transaction under the writer lock (D-45); ``ordered()`` is that
lock, so a caller keeps it across the commit and the index apply that follows.

The steps a broken variant of the contract tests replaces are methods of their own
(``_insert``, ``_claim``, ``_audit_append``).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, cast

from ... import faults
from ...types import Principal
from ..protocols import JobRecord, JobSpec, JobState, Lease, LeaseLostError, UnitRecord, Vector
from ..protocols_writes import StoreTx, WriteStore
from . import audit as audit_mod
from . import units as units_sql
from .bulk import insert_units
from .catalog import Catalog
from .jobs import Job, LeaseLost
from .jobs import JobQueue as SqlJobQueue
from .object_rows import SqliteObjectRowsTx
from .principals import SqlitePrincipals
from .write_rows import (
    SqlDocs,
    SqlKeyframes,
    SqlQuota,
    SqlUsage,
    SqlWords,
    unit_record,
)


def _lease(job: Job) -> Lease:
    return Lease(
        job.id,
        job.kind,
        job.token,
        job.attempts,
        json.dumps(job.payload),
        principal=job.principal,
        scope=job.scope,
        acl_owner=job.acl_owner,
        acl_groups=tuple(job.acl_groups),
        max_attempts=job.max_attempts,
    )


def _job(lease: Lease) -> Job:
    """The queue's own job back from a lease: the token fences every call made with it."""
    return Job(
        lease.job_id,
        lease.kind,
        json.loads(lease.payload_json),
        lease.principal,
        lease.scope,
        lease.acl_owner,
        list(lease.acl_groups),
        lease.attempt,
        lease.max_attempts,
        lease.token,
    )


def _job_record(r: sqlite3.Row) -> JobRecord:
    return JobRecord(
        r["id"],
        r["kind"],
        r["state"],
        int(r["attempts"]),
        r["scope"],
        r["acl_owner"],
        tuple(json.loads(r["acl_groups"])),
        r["result"],
    )


@dataclass
class _Tx:
    """The Protocols' ``StoreTx`` over one open SQLite write transaction."""

    store: SqliteWriteStore
    conn: sqlite3.Connection

    @property
    def units(self) -> _Tx:
        return self

    @property
    def jobs(self) -> _TxJobs:
        return _TxJobs(self.store, self.conn)

    @property
    def audit(self) -> _TxAudit:
        return _TxAudit(self.store, self.conn)

    @property
    def kv(self) -> _Tx:
        return self

    @property
    def principals(self) -> SqlitePrincipals:  # AuthTx (protocols_auth.py)
        return SqlitePrincipals(self.conn)

    @property
    def docs(self) -> SqlDocs:
        return SqlDocs(lambda: self.conn, self.store.applied)

    @property
    def quota(self) -> SqlQuota:
        return SqlQuota(lambda: self.conn)

    @property
    def usage(self) -> SqlUsage:
        return SqlUsage(self.conn)

    @property
    def words(self) -> SqlWords:
        return SqlWords(self.conn)

    @property
    def keyframes(self) -> SqlKeyframes:
        return SqlKeyframes(self.conn)

    @property
    def object_rows(self) -> SqliteObjectRowsTx:  # ObjectRowsWriter (protocols_service.py)
        return SqliteObjectRowsTx(self.conn)

    # UnitWriter
    def insert(self, unit: UnitRecord, vector: Vector) -> None:
        self.store._insert(self.conn, unit, vector)

    def insert_many(self, units: Sequence[UnitRecord], vectors: Vector) -> None:
        for unit, vector in zip(units, vectors, strict=True):
            self.store._insert(self.conn, unit, vector)
            faults.point("ingest.write.after_unit")

    def import_batch(self, units: Sequence[UnitRecord], vectors: Vector, actor: str) -> int:
        rows = [self.store._columns(u) for u in units]
        for r in rows:  # the bulk rows' own form: the Locator as one mapping
            r["locator"] = {c: r.pop(c) for c in list(r) if c in _LOCATOR_COLUMNS} or None
        ids, positions = insert_units(self.conn, rows, vectors)
        stored = [rows[i] for i in positions]
        docs = {(r["scope"], r["doc_id"], r["acl_owner"]) for r in stored}
        now = units[0].created_at if units else 0
        SqlDocs(lambda: self.conn, None).reserve(sorted(docs), actor, now)
        if ids:
            scopes = sorted({r["scope"] for r in stored})
            units_sql.bump_generations(self.conn, scopes)
            self.store._audit_append(
                self.conn,
                actor,
                "import",
                {
                    "units": len(ids),
                    "rowids": [ids[0], ids[-1]],
                    "unchanged": len(rows) - len(ids),
                    "scopes": scopes,
                    "merkle_root": audit_mod.merkle_root([r["content_hash"] for r in stored]),
                },
            )
        return len(ids)

    def delete(self, unit_ids: Sequence[str]) -> list[UnitRecord]:
        keep = self.store._rows(self.conn, unit_ids)
        units_sql.delete_rows(self.conn, [int(r["id"]) for r in keep])
        return [unit_record(r) for r in keep]

    def set_groups(self, unit_ids: Sequence[str], groups: Sequence[str]) -> None:
        rows = self.store._rows(self.conn, unit_ids)
        units_sql.update_acl(self.conn, [int(r["id"]) for r in rows], sorted(set(groups)))

    def bump_generations(self, scopes: Iterable[str]) -> None:
        units_sql.bump_generations(self.conn, scopes)

    # KVWriter
    def set(self, key: str, value: str) -> None:
        Catalog.kv_set(self.conn, key, value)


_LOCATOR_COLUMNS = frozenset(
    ("loc_kind", "loc_start", "loc_end", "t_start_ms", "t_end_ms", "shot_idx", "page")
    + ("bbox_x0", "bbox_y0", "bbox_x1", "bbox_y1")
)


@dataclass
class _TxJobs:
    store: SqliteWriteStore
    conn: sqlite3.Connection

    def enqueue(self, spec: JobSpec) -> str:
        return self.store._queue.enqueue(
            self.conn,
            spec.kind,
            json.loads(spec.payload_json),
            principal=spec.principal,
            scope=spec.scope,
            acl_owner=spec.acl_owner,
            acl_groups=list(spec.acl_groups),
            dedupe_key=spec.dedupe_key,
        )

    def find(self, dedupe_key: str) -> JobRecord | None:
        r = self.store._queue.find(self.conn, dedupe_key)
        return None if r is None else _job_record(r)

    def set_groups(self, job_id: str, groups: Sequence[str]) -> None:
        self.conn.execute(
            "UPDATE jobs SET acl_groups = ? WHERE id = ?", (json.dumps(list(groups)), job_id)
        )

    def complete(self, lease: Lease, result_json: str) -> None:
        try:
            self.store._queue.complete(self.conn, _job(lease), json.loads(result_json))
        except LeaseLost as exc:
            raise LeaseLostError(lease.job_id) from exc


@dataclass
class _TxAudit:
    store: SqliteWriteStore
    conn: sqlite3.Connection

    def append(self, actor: Principal | str, action: str, record: Mapping[str, object]) -> str:
        return self.store._audit_append(self.conn, actor, action, dict(record))


class SqliteWriteStore:
    """``WriteStore`` over one catalog: the write transaction, the job queue, the readers the
    write rules need. ``applied`` is the newest outbox operation the process's indexes hold
    (None where there are none: a worker), which a delete by Unit id is bounded by."""

    def __init__(
        self,
        catalog: Catalog,
        queue: SqlJobQueue,
        audit_key: bytes,
        model_id: str,
        applied: Callable[[], int | None] = lambda: None,
    ) -> None:
        self.catalog = catalog
        self._queue = queue
        self.audit_key = audit_key
        self.model_id = model_id
        self.applied = applied

    @contextmanager
    def write(self) -> Iterator[_Tx]:
        with self.catalog.write_lock(), self.catalog.write() as conn:
            yield _Tx(self, conn)

    @contextmanager
    def ordered(self) -> Iterator[None]:
        with self.catalog.write_lock():
            yield

    @property
    def docs(self) -> SqlDocs:
        return SqlDocs(self.catalog.reader, self.applied)

    @property
    def quota(self) -> SqlQuota:
        return SqlQuota(self.catalog.reader)

    @property
    def principals(self) -> SqlitePrincipals:
        return SqlitePrincipals(self.catalog.reader())

    @property
    def jobs(self) -> _Jobs:
        return _Jobs(self)

    def close(self) -> None:
        self.catalog.close()

    # -- the steps a contract test's broken variant replaces ---------------------------------
    def _columns(self, unit: UnitRecord) -> dict[str, Any]:
        loc = unit.locator
        event_at = unit.event_at if unit.event_at is not None else unit.created_at
        return {
            "unit_id": unit.unit_id,
            "scope": unit.scope,
            "doc_id": unit.doc_id,
            "modality": unit.modality,
            "plane": unit.plane,
            "source_uri": unit.source_uri or "",
            "mime": unit.mime,
            "text": unit.text,
            "acl_owner": unit.acl_owner,
            "acl_groups": sorted(set(unit.acl_groups)),
            "content_hash": unit.content_hash,
            "chunk_idx": unit.chunk_index,
            "n_chunks": unit.chunk_count,
            "context": unit.context,
            **(loc.to_columns() if loc else {}),
            "created_at": unit.created_at,
            "event_at": event_at,
            "t_bucket": event_at // 3_600_000,
            "created_by": unit.created_by or unit.acl_owner,
            "model_id": self.model_id,
            "object_key": unit.object_key,
            "object_sha": unit.object_sha,
        }

    def _insert(self, conn: sqlite3.Connection, unit: UnitRecord, vector: Vector) -> int:
        return units_sql.insert_unit(conn, self._columns(unit), vector)

    def _claim(self) -> Job | None:
        return self._queue.claim()

    def _audit_append(
        self, conn: sqlite3.Connection, actor: Principal | str, action: str, record: dict[str, Any]
    ) -> str:
        return audit_mod.append(conn, self.audit_key, actor, action, record)

    def _rows(self, conn: sqlite3.Connection, unit_ids: Sequence[str]) -> list[sqlite3.Row]:
        """The stored rows of ``unit_ids`` in their order (unknown ids left out), 500 a query."""
        found: dict[str, sqlite3.Row] = {}
        ids = list(dict.fromkeys(unit_ids))
        for i in range(0, len(ids), 500):
            part = ids[i : i + 500]
            marks = ",".join("?" * len(part))
            for r in conn.execute(
                f"SELECT {units_sql.UNIT_COLUMNS} FROM units WHERE unit_id IN ({marks})", part
            ):
                found[r["unit_id"]] = r
        return [found[u] for u in ids if u in found]


class _Jobs:
    def __init__(self, s: SqliteWriteStore) -> None:
        self.s = s

    @property
    def lease_s(self) -> float:
        return self.s._queue.lease_ms / 1000

    def claim(self) -> Lease | None:
        job = self.s._claim()
        return None if job is None else _lease(job)

    def heartbeat(self, lease: Lease, progress: float) -> None:
        try:
            self.s._queue.heartbeat(_job(lease), progress)
        except LeaseLost as exc:
            raise LeaseLostError(lease.job_id) from exc

    def fail(self, lease: Lease, error: str, *, retry: bool) -> JobState:
        try:
            return cast(JobState, self.s._queue.fail(_job(lease), error, retry=retry))
        except LeaseLost as exc:
            raise LeaseLostError(lease.job_id) from exc

    def get(self, job_id: str) -> JobRecord | None:
        r = (
            self.s.catalog.reader()
            .execute(
                "SELECT id, kind, state, attempts, scope, acl_owner, acl_groups, result"
                " FROM jobs WHERE id = ?",
                (job_id,),
            )
            .fetchone()
        )
        return None if r is None else _job_record(r)

    def depth(self) -> Mapping[str, int]:
        return self.s._queue.depth()


def _tx(t: _Tx) -> StoreTx:  # mypy checks the transaction against the seam
    return t


def _store(s: SqliteWriteStore) -> WriteStore:
    return s
