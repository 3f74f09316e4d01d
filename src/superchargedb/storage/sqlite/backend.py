"""The embedded backend behind the storage Protocols: SQLite (WAL + FTS5) as the catalog,
USearch as the derived vector index, the derived sparse lexical index, blobs as files.

A thin layer over the catalog modules beside it (units, jobs, audit, objects, index_sync): it
renders a ``ReadFilter`` with ``filter_sql`` and turns rows into domain records, so that what
crosses the seam is plain data. The steps a broken variant of the contract tests replaces are
methods of their own (``_where``, ``_insert``, ``_claim``, ``_audit_append``).
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from ...query_terms import query_terms
from ...readfilter import ReadFilter
from ...types import Locator, Principal
from ..lock import DataDirLock
from ..protocols import (
    AuditReport,
    Backend,
    BlobInfo,
    JobRecord,
    JobSpec,
    JobState,
    Lease,
    LeaseLostError,
    ObjectStore,
    Scored,
    UnitRecord,
    Vector,
)
from ..vectors import VectorStore
from . import audit as audit_mod
from . import units as units_sql
from .catalog import Catalog
from .filter_sql import where_sql
from .index_sync import IndexSync
from .jobs import Job, LeaseLost
from .jobs import JobQueue as SqlJobQueue
from .lexical_leg import LexicalLeg
from .objects import FileBlobStore
from .sparse import SparseIndex


def _record(r: sqlite3.Row) -> UnitRecord:
    return UnitRecord(
        unit_id=r["unit_id"],
        scope=r["scope"],
        doc_id=r["doc_id"],
        plane=r["plane"],
        modality=r["modality"],
        text=r["text"],
        acl_owner=r["acl_owner"],
        acl_groups=tuple(json.loads(r["acl_groups"])),
        content_hash=r["content_hash"],
        source_uri=r["source_uri"] or None,
        mime=r["mime"],
        locator=Locator.from_row(r),
        chunk_index=r["chunk_idx"],
        chunk_count=r["n_chunks"],
        created_at=r["created_at"],
        event_at=r["event_at"],
        object_key=r["object_key"],
        object_sha=r["object_sha"],
    )


def _lease(job: Job) -> Lease:
    return Lease(job.id, job.kind, job.token, job.attempts, json.dumps(job.payload))


@dataclass
class _Tx:
    """The Protocols' ``WriteTx`` over one open SQLite write transaction."""

    backend: SqliteBackend
    conn: sqlite3.Connection

    @property
    def units(self) -> _Tx:
        return self

    @property
    def jobs(self) -> _TxJobs:
        return _TxJobs(self.backend, self.conn)

    @property
    def audit(self) -> _TxAudit:
        return _TxAudit(self.backend, self.conn)

    @property
    def kv(self) -> _Tx:
        return self

    # UnitWriter
    def insert(self, unit: UnitRecord, vector: Vector) -> None:
        self.backend._insert(self.conn, unit, vector)

    def delete(self, unit_ids: Sequence[str]) -> list[UnitRecord]:
        rows = [self.backend._row(self.conn, u) for u in unit_ids]
        keep = [r for r in rows if r is not None]
        units_sql.delete_rows(self.conn, [int(r["id"]) for r in keep])
        return [_record(r) for r in keep]

    def set_groups(self, unit_ids: Sequence[str], groups: Sequence[str]) -> None:
        rows = [self.backend._row(self.conn, u) for u in unit_ids]
        units_sql.update_acl(
            self.conn, [int(r["id"]) for r in rows if r is not None], sorted(set(groups))
        )

    def bump_generations(self, scopes: Iterable[str]) -> None:
        units_sql.bump_generations(self.conn, scopes)

    # KVWriter
    def set(self, key: str, value: str) -> None:
        Catalog.kv_set(self.conn, key, value)


@dataclass
class _TxJobs:
    backend: SqliteBackend
    conn: sqlite3.Connection

    def enqueue(self, spec: JobSpec) -> str:
        return self.backend._queue.enqueue(
            self.conn,
            spec.kind,
            json.loads(spec.payload_json),
            principal=spec.principal,
            scope=spec.scope,
            acl_owner=spec.acl_owner,
            acl_groups=list(spec.acl_groups),
            dedupe_key=spec.dedupe_key,
        )

    def complete(self, lease: Lease, result_json: str) -> None:
        try:
            self.backend._queue.complete(
                self.conn, self.backend._job(lease), json.loads(result_json)
            )
        except LeaseLost as exc:
            raise LeaseLostError(lease.job_id) from exc


@dataclass
class _TxAudit:
    backend: SqliteBackend
    conn: sqlite3.Connection

    def append(self, actor: Principal | str, action: str, record: Mapping[str, object]) -> str:
        return self.backend._audit_append(self.conn, actor, action, dict(record))


class SqliteBackend:
    """The storage Protocols over one data dir (``Backend`` in ``protocols.py``)."""

    def __init__(
        self,
        catalog: Catalog,
        sync: IndexSync,
        blobs: FileBlobStore,
        queue: SqlJobQueue,
        audit_key: bytes,
        model_id: str,
        *,
        lexical_backend: str = "sparse",
        lock: DataDirLock | None = None,
        objects: ObjectStore | None = None,
    ) -> None:
        self.catalog = catalog
        self.sync = sync
        self.blobs = blobs
        self._queue = queue
        self.audit_key = audit_key
        self.model_id = model_id
        self._lock = lock
        # The blobs' own Protocol view when they live elsewhere (an S3 bucket: ranged GETs).
        self._objects = objects
        self._leg = LexicalLeg(lexical_backend, sync.lexical, lambda: sync.ready)
        self._leases: dict[str, Job] = {}
        self._leases_lock = threading.Lock()

    @classmethod
    def open(
        cls,
        data: Path,
        *,
        dim: int,
        model_id: str,
        audit_key: bytes,
        lexical_backend: str = "sparse",
        lease_s: float = 300.0,
        max_attempts: int = 3,
        blobs: FileBlobStore | None = None,
        objects: ObjectStore | None = None,
    ) -> SqliteBackend:
        """Lock ``data`` and open (or create) its catalog and indexes, replaying the outbox."""
        data.mkdir(parents=True, exist_ok=True)
        (data / "index").mkdir(exist_ok=True)
        (data / "objects").mkdir(exist_ok=True)
        lock = DataDirLock(data)
        lock.acquire()
        try:
            catalog = Catalog(data / "catalog.db", "NORMAL")
            store = VectorStore(data / "index", dim, model_id)
            lexical = SparseIndex(data / "lexical") if lexical_backend == "sparse" else None
            sync = IndexSync(catalog, store, 1000, lexical)
            sync.startup()
        except BaseException:
            lock.release()
            raise
        queue = SqlJobQueue(catalog, lease_s, max_attempts, owner_kind="server")
        blobs = blobs or FileBlobStore(data / "objects")
        return cls(
            catalog,
            sync,
            blobs,
            queue,
            audit_key,
            model_id,
            lexical_backend=lexical_backend,
            lock=lock,
            objects=objects,
        )

    # -- the Protocols' attributes (one object serves several small Protocols) ---------------
    @property
    def units(self) -> _Units:
        return _Units(self)

    @property
    def vectors(self) -> _Vectors:
        return _Vectors(self)

    @property
    def lexical(self) -> _Lexical:
        return _Lexical(self)

    @property
    def audit(self) -> _Audit:
        return _Audit(self)

    @property
    def jobs(self) -> _Jobs:
        return _Jobs(self)

    @property
    def outbox(self) -> _Outbox:
        return _Outbox(self)

    @property
    def objects(self) -> ObjectStore:
        return self._objects or _Objects(self.blobs)

    @property
    def kv(self) -> _KV:
        return _KV(self.catalog)

    @contextmanager
    def write(self) -> Iterator[_Tx]:
        with self.catalog.write_lock(), self.catalog.write() as conn:
            yield _Tx(self, conn)

    def close(self) -> None:
        try:
            with self.catalog.write_lock():
                self.sync.checkpoint()
        finally:
            self.sync.close()
            self.catalog.close()
            if self._lock is not None:
                self._lock.release()

    # -- the steps a contract test's broken variant replaces ---------------------------------
    def _where(self, rf: ReadFilter, applied_seq: int | None) -> tuple[str, list[object]]:
        return where_sql(rf, applied_seq)

    def _insert(self, conn: sqlite3.Connection, unit: UnitRecord, vector: Vector) -> int:
        loc = unit.locator
        event_at = unit.event_at if unit.event_at is not None else unit.created_at
        row: dict[str, Any] = {
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
            **(loc.to_columns() if loc else {}),
            "created_at": unit.created_at,
            "event_at": event_at,
            "t_bucket": event_at // 3_600_000,
            "created_by": unit.acl_owner,
            "model_id": self.model_id,
            "object_key": unit.object_key,
            "object_sha": unit.object_sha,
        }
        return units_sql.insert_unit(conn, row, vector)

    def _claim(self) -> Job | None:
        return self._queue.claim()

    def _audit_append(
        self, conn: sqlite3.Connection, actor: Principal | str, action: str, record: dict[str, Any]
    ) -> str:
        return audit_mod.append(conn, self.audit_key, actor, action, record)

    # -- helpers -----------------------------------------------------------------------------
    def _row(self, conn: sqlite3.Connection, unit_id: str) -> sqlite3.Row | None:
        return cast(
            "sqlite3.Row | None",
            conn.execute(
                f"SELECT {units_sql.UNIT_COLUMNS} FROM units WHERE unit_id = ?", (unit_id,)
            ).fetchone(),
        )

    def _job(self, lease: Lease) -> Job:
        with self._leases_lock:
            job = self._leases.get(lease.token)
        if job is None:
            raise LeaseLostError(lease.job_id)
        return job

    def _unit_ids(self, keys: Sequence[int]) -> dict[int, str]:
        rows = units_sql.fetch_rows(self.catalog.reader(), list(keys))
        return {k: str(r["unit_id"]) for k, r in rows.items()}


class _Vectors:
    def __init__(self, b: SqliteBackend) -> None:
        self.b = b

    def search(self, plane: str, vector: Vector, k: int, rf: ReadFilter) -> list[Scored]:
        from .candidates import readable_ids

        b = self.b
        if plane not in rf.planes:
            return []
        where, params = b._where(rf, b.sync.applied_seq)
        ids = readable_ids(b.catalog.reader(), where, params, plane)
        if ids.size == 0 or b.sync.store.count(plane) == 0:
            return []
        hits, _ = b.sync.store.search_planned(plane, np.asarray(vector), k, ids)
        names = b._unit_ids([key for key, _ in hits])
        return [Scored(names[key], float(sim)) for key, sim in hits if key in names]

    def count(self, plane: str) -> int:
        return self.b.sync.store.count(plane)


class _Lexical:
    def __init__(self, b: SqliteBackend) -> None:
        self.b = b

    def search(self, query: str, k: int, rf: ReadFilter) -> list[Scored]:
        b = self.b
        where, params = b._where(rf, b.sync.applied_seq)
        ids, _ = b._leg.search(b.catalog.reader(), rf, query_terms(query), where, params, k)
        names = b._unit_ids(ids)
        # The leg ranks by BM25 without returning the values: the score is the rank's order.
        return [Scored(names[i], float(len(ids) - n)) for n, i in enumerate(ids) if i in names]


class _Outbox:
    def __init__(self, b: SqliteBackend) -> None:
        self.b = b

    def head(self) -> int:
        return self.b.sync.outbox_head()

    def applied(self) -> int:
        return self.b.sync.applied_seq

    def replay(self) -> int:
        with self.b.catalog.write_lock():
            self.b.sync.apply_pending()
        return self.b.sync.applied_seq


class _Objects:
    def __init__(self, blobs: FileBlobStore) -> None:
        self.blobs = blobs

    def put(self, chunks: Iterable[bytes], max_bytes: int) -> BlobInfo:
        sha, size = self.blobs.put(chunks, max_bytes)  # 413 past max_bytes, nothing kept
        return BlobInfo(sha, size)

    def read(self, sha256: str, start: int = 0, end: int | None = None) -> bytes:
        with open(self.blobs.path(sha256), "rb") as f:
            f.seek(start)
            return f.read(-1 if end is None else max(0, end - start))

    def info(self, sha256: str) -> BlobInfo | None:
        if not self.blobs.exists(sha256):
            return None
        return BlobInfo(sha256, self.blobs.path(sha256).stat().st_size)


class _Units:
    def __init__(self, b: SqliteBackend) -> None:
        self.b = b

    def get(self, unit_id: str, rf: ReadFilter) -> UnitRecord | None:
        b = self.b
        where, params = b._where(rf, b.sync.applied_seq)
        row = (
            b.catalog.reader()
            .execute(
                f"SELECT {units_sql.UNIT_COLUMNS} FROM units u WHERE u.unit_id = ? AND {where}",
                (unit_id, *params),
            )
            .fetchone()
        )
        return None if row is None else _record(row)

    def generations(self, scopes: Sequence[str]) -> Mapping[str, int]:
        return units_sql.read_generations(self.b.catalog.reader(), list(scopes))


class _KV:
    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog

    def get(self, key: str) -> str | None:
        return self.catalog.kv_get(key)


class _Audit:
    def __init__(self, b: SqliteBackend) -> None:
        self.b = b

    def verify(self) -> AuditReport:
        got = audit_mod.verify(self.b.catalog.reader(), self.b.audit_key)
        bad = got.get("first_bad_seq")
        return AuditReport(bool(got["ok"]), int(got.get("records", 0)), bad)


class _Jobs:
    def __init__(self, b: SqliteBackend) -> None:
        self.b = b

    def claim(self) -> Lease | None:
        job = self.b._claim()
        if job is None:
            return None
        with self.b._leases_lock:
            self.b._leases[job.token] = job
        return _lease(job)

    def heartbeat(self, lease: Lease, progress: float) -> None:
        try:
            self.b._queue.heartbeat(self.b._job(lease), progress)
        except LeaseLost as exc:
            raise LeaseLostError(lease.job_id) from exc

    def fail(self, lease: Lease, error: str, *, retry: bool) -> JobState:
        try:
            return cast(JobState, self.b._queue.fail(self.b._job(lease), error, retry=retry))
        except LeaseLost as exc:
            raise LeaseLostError(lease.job_id) from exc

    def get(self, job_id: str) -> JobRecord | None:
        r = (
            self.b.catalog.reader()
            .execute(
                "SELECT id, kind, state, attempts, scope, acl_owner FROM jobs WHERE id = ?",
                (job_id,),
            )
            .fetchone()
        )
        if r is None:
            return None
        return JobRecord(r[0], r[1], r[2], int(r[3]), r[4], r[5])

    def depth(self) -> Mapping[str, int]:
        return self.b._queue.depth()


if TYPE_CHECKING:  # mypy checks the embedded backend against the seam
    _backend: type[Backend] = SqliteBackend
