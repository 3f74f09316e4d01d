"""The PostgreSQL backend opened from Settings (``SCDB_DATABASE_URL``): a server process's whole
``PgBackend``, or a ``superchargedb worker``'s, which is the same object (D-246).

``wiring.py`` calls these where the embedded backend's ``storage/sqlite/open.py`` would be
called. Unlike the embedded store, nothing here is owned by one process: no data-dir lock, no
start-up sweep of the blob store (another process may be uploading; ``doctor`` counts orphans),
no leases released by process death (a lease expires, and its fenced completion is refused).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ...errors import UnavailableError, ValidationError
from ...settings import Settings
from ..sqlite.objects import FileBlobStore
from .backend import PgBackend
from .cluster_blobs import RoutedBlobs
from .placement import Placement
from .router import ClusterRouter


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
    b = _open(
        s,
        _url(s),
        dim,
        model_id,
        audit_key,
        blobs.root,
        audit_anchor,
        blobs=blobs,
        replicas=replicas,
    )
    _check_model(b, model_id)
    return b


def _check_model(b: PgBackend, model_id: str) -> None:
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


def clusters_of(s: Settings) -> dict[str, str]:
    """``SCDB_CLUSTER_URLS`` as {name: url}, in the order given (the placement's tie order)."""
    out: dict[str, str] = {}
    for item in [i.strip() for i in s.cluster_urls.split(",") if i.strip()]:
        name, _, url = item.partition("=")
        if name in out:
            raise ValidationError(f"cluster {name!r} is named twice in SCDB_CLUSTER_URLS")
        if name == "directory":  # the directory database's own name in reports and backups
            raise ValidationError("a cluster may not be named 'directory'")
        out[name] = url
    return out


def open_router(
    s: Settings,
    *,
    model_id: str,
    dim: int,
    audit_key: bytes,
    objects_root: Path,
    blobs_for: Callable[[str], FileBlobStore],
    audit_anchor: Path | None = None,
) -> tuple[ClusterRouter, RoutedBlobs]:
    """The directory (``SCDB_DATABASE_URL``) and every cluster of ``SCDB_CLUSTER_URLS``, each
    migrated and checked like a single database, each cluster with its own blob store
    (``blobs_for(name)``) and audit anchor; and the blob store that follows the request."""
    if s.database_replica_urls.strip():
        raise ValidationError(
            "SCDB_DATABASE_REPLICA_URLS with SCDB_CLUSTER_URLS is not built: a standby per"
            " cluster is (docs/deploy.md)"
        )
    opened: list[PgBackend] = []
    try:
        directory = _open(s, _url(s), dim, model_id, audit_key, objects_root, audit_anchor)
        opened.append(directory)
        clusters: dict[str, PgBackend] = {}
        for name, url in clusters_of(s).items():
            anchor = (
                None
                if audit_anchor is None
                else audit_anchor.with_name(f"{audit_anchor.name}.{name}")
            )
            blobs = blobs_for(name)
            b = _open(s, url, dim, model_id, audit_key, blobs.root, anchor, blobs=blobs)
            opened.append(b)
            _check_model(b, model_id)
            clusters[name] = b
    except BaseException:
        for b in opened:
            b.close()
        raise
    router = ClusterRouter(directory, clusters, Placement(directory._conn, list(clusters)))
    return router, RoutedBlobs(objects_root, lambda: router.here().blobs)


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
    return _open(s, _url(s), dim, model_id, audit_key, blobs_root, audit_anchor, pool_size=2)


def open_operator_router(
    s: Settings, *, audit_key: bytes, objects_root: Path, audit_anchor: Path | None = None
) -> ClusterRouter:
    """``open_operator`` over the directory and every cluster (``keys``, ``audit``,
    ``tenants``): each database as a server migrated it, small pools, no blobs written."""
    recorded = PgBackend.recorded_model(_url(s))
    if recorded is None:
        raise UnavailableError(
            "the directory database has no SuperChargeDB schema yet: start `superchargedb"
            " serve` on it once first"
        )
    dim, model_id = recorded
    directory = _open(s, _url(s), dim, model_id, audit_key, objects_root, audit_anchor, pool_size=2)
    clusters: dict[str, PgBackend] = {}
    try:
        for name, url in clusters_of(s).items():
            anchor = (
                None
                if audit_anchor is None
                else audit_anchor.with_name(f"{audit_anchor.name}.{name}")
            )
            clusters[name] = _open(
                s, url, dim, model_id, audit_key, objects_root / name, anchor, pool_size=2
            )
    except BaseException:
        for b in [directory, *clusters.values()]:
            b.close()
        raise
    return ClusterRouter(directory, clusters, Placement(directory._conn, list(clusters)))


def _url(s: Settings) -> str:
    if not s.database_url:
        raise UnavailableError("SCDB_DATABASE_URL is not set")
    return s.database_url


def _open(
    s: Settings,
    url: str,
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
        url,
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
