"""The PostgreSQL backend opened from Settings (``SCDB_DATABASE_URL``): a server process's whole
``PgBackend``, or a ``superchargedb worker``'s, which is the same object (D-246).

``wiring.py`` calls these where the embedded backend's ``storage/sqlite/open.py`` would be
called. Unlike the embedded store, nothing here is owned by one process: no data-dir lock, no
start-up sweep of the blob store (another process may be uploading; ``doctor`` counts orphans),
no leases released by process death (a lease expires, and its fenced completion is refused).
"""

from __future__ import annotations

from pathlib import Path

from ...errors import UnavailableError
from ...settings import Settings
from ..sqlite.objects import FileBlobStore
from .backend import PgBackend


def open_backend(
    s: Settings,
    *,
    model_id: str,
    dim: int,
    audit_key: bytes,
    blobs: FileBlobStore,
    audit_anchor: Path | None = None,
    searches: bool = True,
) -> PgBackend:
    """Migrate (once, whoever comes first) and open a pool on ``s.database_url``; refuses a
    database whose Units were embedded with another model. A process that ``searches`` (an
    API process, not a worker) also reads from the standbys of ``SCDB_DATABASE_REPLICA_URLS``."""
    replicas = [u.strip() for u in s.database_replica_urls.split(",") if u.strip()]
    replicas = replicas if searches else []
    b = _open(s, dim, model_id, audit_key, blobs.root, audit_anchor, blobs=blobs, replicas=replicas)
    try:
        stale = b.stale_units()
    except BaseException:
        b.close()
        raise
    if stale:
        b.close()
        raise UnavailableError(
            f"{stale} Units in the database were embedded with another model than {model_id}:"
            " run `superchargedb reindex` with SCDB_DATABASE_URL set"
        )
    return b


def open_operator(
    s: Settings, *, audit_key: bytes, blobs_root: Path, audit_anchor: Path | None = None
) -> PgBackend:
    """The operator's handle (``keys``, ``audit`` commands): the database a server has
    migrated, opened with the vectors' dimension and model it records, so no model is loaded.
    Nothing is locked: a running server shares the database."""
    recorded = PgBackend.recorded_model(_url(s))
    if recorded is None:
        raise UnavailableError(
            "the database has no SuperChargeDB schema yet: start `superchargedb serve` on it"
            " once first"
        )
    dim, model_id = recorded
    return _open(s, dim, model_id, audit_key, blobs_root, audit_anchor, pool_size=2)


def _url(s: Settings) -> str:
    if not s.database_url:
        raise UnavailableError("SCDB_DATABASE_URL is not set")
    return s.database_url


def _open(
    s: Settings,
    dim: int,
    model_id: str,
    audit_key: bytes,
    objects_dir: Path,
    audit_anchor: Path | None,
    *,
    blobs: FileBlobStore | None = None,
    pool_size: int | None = None,
    replicas: list[str] | None = None,
) -> PgBackend:
    """``PgBackend.open`` with the job and pool settings every caller takes from ``s``."""
    return PgBackend.open(
        _url(s),
        dim=dim,
        model_id=model_id,
        audit_key=audit_key,
        objects_dir=objects_dir,
        lease_s=s.job_lease_s,
        max_attempts=s.job_max_attempts,
        pool_size=pool_size or s.database_pool_size,
        audit_anchor=audit_anchor,
        blobs=blobs,
        replica_urls=replicas or (),
        replica_max_lag_ms=s.replica_max_lag_ms,
    )
