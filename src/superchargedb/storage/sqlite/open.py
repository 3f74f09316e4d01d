"""The embedded backend opened from Settings: a server's whole ``SqliteBackend`` over its data
dir, or a ``superchargedb worker``'s write side over the catalog alone.

``wiring.py`` calls one of these where another backend kind would be opened instead (D-231): what
it builds above storage takes its parts from what they return, through the Protocols.
"""

from __future__ import annotations

from pathlib import Path

from ...errors import UnavailableError
from ...settings import Settings
from ..lock import DataDirLock
from ..vectors import VectorStore
from .backend import SqliteBackend
from .catalog import Catalog
from .index_sync import IndexSync
from .jobs import JobQueue
from .objects import FileBlobStore
from .reindex import stale_count
from .search_store import ExactScan
from .sparse import SparseIndex
from .writes import SqliteWriteStore


def open_server(
    s: Settings,
    lock: DataDirLock,
    *,
    model_id: str,
    dim: int,
    audit_key: bytes,
    audit_anchor: Path,
    blobs: FileBlobStore,
    locked_at: float,
) -> SqliteBackend:
    """The server's backend over the data dir ``lock`` holds (released when it closes): the
    catalog, the derived indexes with the outbox replayed, the job queue with the leases of
    dead processes released, and what a crash left in the blob store swept (files older than
    ``locked_at``, ``backend.swept``). Refuses a catalog embedded with another model."""
    data = Path(s.data_dir)
    catalog = Catalog(
        data / "catalog.db",
        s.sqlite_synchronous,
        writer_cache_mb=s.sqlite_cache_mb,
        reader_cache_mb=s.sqlite_reader_cache_mb,
        reader_mmap_mb=s.sqlite_reader_mmap_mb,
    )
    try:
        if stale_count(catalog, model_id):
            raise UnavailableError(
                f"Units in {data} were embedded with another model than "
                f"{model_id}: run `superchargedb reindex --data {data}`"
            )
        store = VectorStore(data / "index", dim, model_id)
        lexical = SparseIndex(data / "lexical") if s.lexical_backend == "sparse" else None
        sync = IndexSync(catalog, store, s.checkpoint_every, lexical)
        sync.startup()
    except BaseException:
        catalog.close()
        raise
    queue = JobQueue(catalog, s.job_lease_s, s.job_max_attempts, owner_kind="server")
    backend = SqliteBackend(
        catalog,
        sync,
        blobs,
        queue,
        audit_key,
        model_id,
        lexical_backend=s.lexical_backend,
        lock=lock,
        exact_scan=ExactScan(s.exact_scan_max, s.exact_scan_fraction),
        candidate_cache_bytes=s.candidate_cache_max_bytes,
        audit_anchor=audit_anchor,
    )
    # Before any request or worker thread: what a crash left behind can have no live owner.
    backend.sweep_orphans(locked_at)
    queue.release_dead_leases(own_data_dir=True)
    return backend


def open_worker(s: Settings, *, model_id: str, audit_key: bytes) -> SqliteWriteStore:
    """A worker's write side: it does not own the data dir (its server holds the indexes)."""
    data = Path(s.data_dir)
    if not (data / "catalog.db").exists():
        raise SystemExit(f"no catalog in {data}: start the server once first")
    catalog = Catalog(data / "catalog.db", s.sqlite_synchronous)
    jobs = JobQueue(catalog, s.job_lease_s, s.job_max_attempts)
    # Leases of workers (or servers) that provably died on this machine resume at once.
    jobs.release_dead_leases(own_data_dir=False)
    return SqliteWriteStore(catalog, jobs, audit_key, model_id)
