"""The embedded backend behind the storage Protocols: SQLite (WAL + FTS5) as the catalog,
USearch as the derived vector index, the derived sparse lexical index, blobs as files.

A thin layer over the catalog modules beside it (units, jobs, audit, objects, index_sync): it
renders a ``ReadFilter`` with ``filter_sql`` and turns rows into domain records, so that what
crosses the seam is plain data. The write transaction and the job queue are the write side's
(``writes.py``). The steps a broken variant of the contract tests replaces are methods of their
own (``_where`` here; ``_insert``, ``_claim``, ``_audit_append`` there).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ... import faults
from ...query_terms import query_terms
from ...readfilter import ReadFilter
from ..lock import DataDirLock
from ..protocols import AuditReport, Backend, ObjectStore, Scored, UnitRecord, Vector
from ..protocols_auth import AuthStore
from ..protocols_service import ServerBackend
from ..vectors import VectorStore
from . import audit as audit_mod
from . import units as units_sql
from .audit_trail import SqliteAuditTrail
from .bulk_load import SqliteBulkLoad
from .catalog import Catalog
from .counts import SqliteCounts
from .filter_sql import where_sql
from .index_sync import IndexSync
from .job_views import SqliteJobViews
from .jobs import JobQueue as SqlJobQueue
from .listing import SqliteListing, SqliteUsage, SqliteWords
from .object_rows import SqliteObjectCatalog
from .objects import ORPHAN_GRACE_S, FileBlobStore, FileObjects, referenced_blobs, sweep_orphans
from .search_store import ExactScan, SqliteSearchStore
from .sessions import SqliteSessions
from .sparse import SparseIndex
from .unit_keyframes import SqliteKeyframes
from .write_rows import unit_record
from .writes import SqliteWriteStore

log = logging.getLogger(__name__)


class SqliteBackend(SqliteWriteStore):
    """The storage Protocols over one data dir (``Backend`` in ``protocols.py``): the write
    side (``writes.py``) with the derived indexes and the readers over it."""

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
        exact_scan: ExactScan = ExactScan(20_000, 0.01),
        candidate_cache_bytes: int = 64 * 2**20,
        audit_anchor: Path | None = None,
    ) -> None:
        super().__init__(catalog, queue, audit_key, model_id, lambda: sync.applied_seq)
        self.sync = sync
        self.blobs = blobs
        self._lock = lock
        # The blobs' own Protocol view when they live elsewhere (an S3 bucket: ranged GETs).
        self._objects = objects
        self.audit_anchor = audit_anchor  # the signed head written at close (None: none)
        self.swept: dict[str, Any] | None = None  # what the start-up sweep reclaimed
        self._search = SqliteSearchStore(
            catalog,
            sync,
            sync.store,
            lexical_backend,
            exact_scan,
            candidate_cache_bytes,
            where=lambda rf, seq: self._where(rf, seq),
        )
        self._leg = self._search.lexical

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
    def units(self) -> SqliteUnits:
        return SqliteUnits(self.catalog, lambda: self.sync.applied_seq, self._where)

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
    def search(self) -> SqliteSearchStore:
        return self._search

    @property
    def outbox(self) -> SqliteOutbox:
        return SqliteOutbox(self.catalog, self.sync)

    @property
    def objects(self) -> ObjectStore:
        return self._objects or FileObjects(self.blobs)

    @property
    def kv(self) -> _KV:
        return _KV(self.catalog)

    @property
    def sessions(self) -> SqliteSessions:
        return SqliteSessions(self.catalog)

    @property
    def bulk(self) -> SqliteBulkLoad:
        return SqliteBulkLoad(self.catalog, self.sync)

    @property
    def counts(self) -> SqliteCounts:
        return SqliteCounts(self.catalog, lambda: self.sync.applied_seq)

    @property
    def job_views(self) -> SqliteJobViews:
        return SqliteJobViews(self.catalog)

    @property
    def audit_trail(self) -> SqliteAuditTrail:
        return SqliteAuditTrail(self.catalog, self.audit_key, self.audit_anchor)

    # -- the facade's reads (protocols_service.py) -------------------------------------------
    @property
    def listing(self) -> SqliteListing:
        return SqliteListing(self.catalog, lambda: self.sync.applied_seq, self._where)

    @property
    def usage(self) -> SqliteUsage:
        return SqliteUsage(self.catalog)

    @property
    def words(self) -> SqliteWords:
        return SqliteWords(self.catalog)

    @property
    def keyframes(self) -> SqliteKeyframes:
        return SqliteKeyframes(self.catalog)

    @property
    def object_rows(self) -> SqliteObjectCatalog:
        return SqliteObjectCatalog(self.catalog, self.blobs, self._where)

    @property
    def queue(self) -> SqlJobQueue:
        """The catalog's own job queue behind ``jobs`` (tests look inside it)."""
        return self._queue

    @property
    def ready(self) -> bool:
        return self.sync.ready

    def sizes(self) -> Mapping[str, float]:
        mb = 2**20
        path = self.catalog.path
        wal = path.with_name(path.name + "-wal")
        return {
            "vector_rows_mb": round(self.sync.store.rows_nbytes() / mb, 2),
            "catalog_db_mb": round(path.stat().st_size / mb, 2),
            "catalog_wal_mb": round(wal.stat().st_size / mb, 2) if wal.exists() else 0.0,
        }

    def doctor(self) -> str:
        from .doctor import doctor

        with self.catalog.write_lock():
            report = doctor(
                self.catalog,
                self.sync.store,
                self.sync.lexical,
                objects_root=self.blobs.root,
                blob_exists=self.blobs.exists,
                swept=self.swept,
            )
        return json.dumps(report)

    def sweep_orphans(self, before: float) -> dict[str, Any] | None:
        """At start-up, before any request or job thread: remove what a crash left in the
        blob store (files older than ``before``; a shared bucket's only past the grace)."""
        try:
            swept = sweep_orphans(self.catalog.reader(), self.blobs.root, before)
            # Blobs in a bucket (S3BlobStore): it may be shared, so only old orphans there.
            remote = getattr(self.blobs, "sweep_remote", None)
            if remote is not None:
                refs = referenced_blobs(self.catalog.reader())
                swept["bucket"] = remote(refs, time.time() - ORPHAN_GRACE_S)
        except Exception:  # reclaiming space must never keep the server from starting
            log.exception("object store sweep failed")
            swept = None
        self.swept = swept
        return swept

    def close(self) -> None:
        """Persist the derived indexes, sign the audit head, release the catalog and lock."""
        try:
            with self.catalog.write_lock():
                self.sync.checkpoint()
            faults.point("service.close.after_checkpoint")
            if self.audit_anchor is not None:
                audit_mod.write_anchor(self.catalog.reader(), self.audit_key, self.audit_anchor)
        finally:
            self.sync.close()
            self.catalog.close()
            if self._lock is not None:
                self._lock.release()

    # -- the steps a contract test's broken variant replaces ---------------------------------
    def _where(self, rf: ReadFilter, applied_seq: int | None) -> tuple[str, list[object]]:
        return where_sql(rf, applied_seq)

    # -- helpers -----------------------------------------------------------------------------
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


class SqliteOutbox:
    """``Outbox``: the catalog's outbox table, applied by ``IndexSync`` under the write lock
    (reentrant: a caller already holding ``ordered()`` replays in order)."""

    def __init__(self, catalog: Catalog, sync: IndexSync) -> None:
        self.catalog = catalog
        self.sync = sync

    def head(self) -> int:
        return self.sync.outbox_head()

    def applied(self) -> int:
        return self.sync.applied_seq

    def replay(self) -> int:
        with self.catalog.write_lock():
            self.sync.apply_pending()
        return self.sync.applied_seq


class SqliteUnits:
    """``UnitReader`` over the catalog: a Unit ``rf`` admits that the indexes hold."""

    def __init__(
        self,
        catalog: Catalog,
        applied: Callable[[], int],
        where: Callable[[ReadFilter, int | None], tuple[str, list[object]]] = where_sql,
    ) -> None:
        self.catalog = catalog
        self.applied = applied
        self.where = where

    def get(self, unit_id: str, rf: ReadFilter) -> UnitRecord | None:
        where, params = self.where(rf, self.applied())
        row = (
            self.catalog.reader()
            .execute(
                f"SELECT {units_sql.UNIT_COLUMNS} FROM units u WHERE u.unit_id = ? AND {where}",
                (unit_id, *params),
            )
            .fetchone()
        )
        return None if row is None else unit_record(row)

    def generations(self, scopes: Sequence[str]) -> Mapping[str, int]:
        return units_sql.read_generations(self.catalog.reader(), list(scopes))


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


if TYPE_CHECKING:  # mypy checks the embedded backend against the seam
    _backend: type[Backend] = SqliteBackend
    _auth: type[AuthStore] = SqliteBackend
    _server: type[ServerBackend] = SqliteBackend
