"""The one place that builds a process from Settings: the server's parts, its background
threads and the service facade over them, or a worker's slice.

``serve``, ``worker``, the offline CLI, the benchmarks and the tests all come through here, so
the order is one order: lock the data dir, build storage, then the models and pipelines over it,
sweep what a crash left, start the threads; closing stops the threads first, then the parts in
reverse (``Components.close``).
"""

from __future__ import annotations

import logging
import shutil
import time
from pathlib import Path
from typing import Any

from threadpoolctl import threadpool_limits

from .answer.localize import Localizer
from .answer.pipeline import Answerer
from .answer.providers import ChatProvider, OpenAIChatProvider
from .answer.verify import make_checker
from .background import Background
from .components import Components
from .documents import word_dicts
from .errors import ValidationError
from .ingest.deps import IngestDeps
from .ingest.pipeline import Ingestor
from .metering import Meter
from .metrics import Metrics
from .models.embedder import Embedder, make_embedder
from .models.executor import EmbedExecutor
from .ratelimit import make_limiter
from .search.cache import make_result_cache
from .search.hybrid import Searcher
from .search.rerank import make_reranker
from .service import Service
from .settings import Settings
from .storage.lock import DataDirLock
from .storage.protocols import Outbox
from .storage.protocols_reads import Maintenance
from .storage.protocols_service import ServerBackend
from .storage.protocols_writes import WriteStore
from .storage.s3.objects import S3BlobStore
from .storage.sqlite import audit
from .storage.sqlite.backend import SqliteBackend
from .storage.sqlite.maintenance import SqliteMaintenance
from .storage.sqlite.objects import FileBlobStore
from .storage.sqlite.open import open_server as open_sqlite_server
from .storage.sqlite.open import open_worker as open_sqlite_worker
from .worker import WorkerContext

log = logging.getLogger(__name__)


def _model(s: Settings, **extra: Any) -> Embedder:
    """The configured embedding model, loaded."""
    return make_embedder(
        s.embedder,
        max_tokens=s.embed_max_tokens,
        threads=s.embed_threads,
        batch_size=s.embed_batch_size,
        **extra,
    )


def _executor(settings: Settings, embedder: Embedder | None) -> EmbedExecutor:
    """Every embedding goes through one micro-batching worker (D-42)."""
    s = settings
    return EmbedExecutor(
        embedder or _model(s, cache_size=0),  # the executor caches query vectors
        max_batch=s.embed_batch_size,
        wait_ms=s.embed_batch_wait_ms,
        max_queue=s.embed_queue_max,
        cache_size=s.embed_cache_size,
        owns_inner=embedder is None,
    )


def providers(s: Settings) -> list[ChatProvider]:
    out: list[ChatProvider] = []
    for name in [n.strip() for n in s.answer_providers.split(",") if n.strip()]:
        if name == "openai":
            out.append(
                OpenAIChatProvider(
                    s.openai_chat_model,
                    s.openai_base_url,
                    s.openai_api_key,
                    context_words=s.openai_context_words or None,
                )
            )
        elif name == "local":
            from .answer.local_llm import LocalLlamaProvider

            out.append(
                LocalLlamaProvider(s.local_model_path, context_words=s.local_context_words or None)
            )
        else:
            raise ValidationError(f"unknown answer provider {name!r} (openai, local)")
    return out


def blob_store(s: Settings, data: Path, cluster: str | None = None) -> FileBlobStore:
    """The objects' blobs: files under the data dir, or an S3 bucket when one is set (D-190),
    with its upload temp files and local copies in the same ``objects/`` folder. A cluster's
    (D-279) are its own: ``objects/<cluster>/``, and ``<prefix><cluster>/`` in the bucket."""
    local = data / "objects" if cluster is None else data / "objects" / cluster
    if not s.s3_endpoint_url:
        return FileBlobStore(local)
    from .storage.s3.client import make_client

    client = make_client(s.s3_endpoint_url, s.s3_access_key, s.s3_secret_key, s.s3_region)
    store = S3BlobStore(
        client,
        s.s3_bucket,
        local,
        prefix=s.s3_prefix if cluster is None else f"{s.s3_prefix}{cluster}/",
        cache_max_bytes=s.s3_cache_max_bytes,
    )
    store.check()  # a wrong endpoint, bucket or key stops the start, not the first upload
    return store


def _open_backend(
    s: Settings,
    lock: DataDirLock | None,
    *,
    emb: EmbedExecutor,
    audit_key: bytes,
    audit_anchor: Path,
    blobs: FileBlobStore,
    locked_at: float,
) -> tuple[ServerBackend, dict[str, Any]]:
    """The one backend (D-231, D-246) and what it shows of itself (``_embedded_parts``); over
    several clusters (D-277), also the parts that are not the backend's own: the directory's
    auth store and meter store, and the blob store that follows the request."""
    if s.database_url and s.cluster_urls:
        router, routed_blobs = _router(s, emb.model_id, emb.dim, audit_key, blobs, audit_anchor)
        parts = {"auth_store": router.auth, "blobs": routed_blobs, "meter_store": router.directory}
        return router, parts
    if s.database_url:
        from .storage.postgres.open import open_backend

        pg = open_backend(
            s,
            model_id=emb.model_id,
            dim=emb.dim,
            audit_key=audit_key,
            blobs=blobs,
            audit_anchor=audit_anchor,
        )
        return pg, {}
    assert lock is not None
    sqlite = open_sqlite_server(
        s,
        lock,
        model_id=emb.model_id,
        dim=emb.dim,
        audit_key=audit_key,
        audit_anchor=audit_anchor,
        blobs=blobs,
        locked_at=locked_at,
    )
    return sqlite, _embedded_parts(sqlite)


def _router(
    s: Settings,
    model_id: str,
    dim: int,
    audit_key: bytes,
    blobs: FileBlobStore,
    audit_anchor: Path | None = None,
) -> tuple[Any, FileBlobStore]:
    """The directory and clusters of ``SCDB_CLUSTER_URLS`` (D-277), each cluster's blobs its
    own (D-279), and the blob store that follows the request."""
    from .storage.postgres.open import open_router

    return open_router(
        s,
        model_id=model_id,
        dim=dim,
        audit_key=audit_key,
        objects_root=blobs.root,
        blobs_for=lambda name: blob_store(s, Path(s.data_dir), name),
        audit_anchor=audit_anchor,
    )


def build_components(settings: Settings, embedder: Embedder | None = None) -> Components:
    """Lock the data dir (the embedded store's; a database is shared) and build every part
    over it (nothing started yet)."""
    s = settings
    data = Path(s.data_dir)
    data.mkdir(parents=True, exist_ok=True)
    (data / "index").mkdir(exist_ok=True)
    (data / "objects").mkdir(exist_ok=True)
    lock = None if s.database_url else DataDirLock(data)
    if lock is not None:
        lock.acquire()
    locked_at = time.time()  # anything in objects/ older than this has no live writer
    # numpy's OpenBLAS spreads even a 2,000 x 384 product over every core, and under load
    # its spinning threads made the exact scan 17x slower (D-42: thread counts are settings).
    # Process-wide, like onnxruntime's thread setting.
    threadpool_limits(limits=s.blas_threads, user_api="blas")
    emb: EmbedExecutor | None = None
    try:
        blobs = blob_store(s, data)
        emb = _executor(s, embedder)
        audit_key = audit.load_key(s.audit_key_file)
        cache = make_result_cache(s, audit_key)  # its namespace: this deployment's (D-191)
        audit_anchor = audit.anchor_path(data, s.audit_anchor_file)
        backend, inside = _open_backend(
            s,
            lock,
            emb=emb,
            audit_key=audit_key,
            audit_anchor=audit_anchor,
            blobs=blobs,
            locked_at=locked_at,
        )
    except BaseException:
        if emb is not None:
            emb.close()
        if lock is not None:
            lock.release()
        raise
    auth_store = inside.pop("auth_store", backend)
    blobs = inside.pop("blobs", blobs)
    meter_store = inside.pop("meter_store", backend)
    reranker = make_reranker(s)
    searcher = Searcher(s, backend.search, emb, reranker)
    answerer = Answerer(
        s,
        searcher,
        emb,
        providers(s),
        make_checker(s.support_checker, emb),
        Localizer(emb),
        words=lambda unit_ids: {
            u: word_dicts(ws) for u, ws in backend.words.of_units(unit_ids).items()
        },
    )
    return Components(
        settings=s,
        lock=lock,
        embedder=emb,
        backend=backend,
        audit_key=audit_key,
        audit_anchor=audit_anchor,
        cache=cache,
        limiter=make_limiter(s),
        reranker=reranker,
        searcher=searcher,
        answerer=answerer,
        blobs=blobs,
        writes=backend,
        bulk=backend.bulk,
        meter=Meter(meter_store),
        metrics=Metrics(),
        counts=backend.counts,
        job_views=backend.job_views,
        audit_trail=backend.audit_trail,
        auth_store=auth_store,
        outbox=backend.outbox,
        vectors=backend.vectors,
        unit_reader=backend.units,
        word_reader=backend.words,
        keyframes=backend.keyframes,
        listing=backend.listing,
        usage_reader=backend.usage,
        object_rows=backend.object_rows,
        versions=f"{emb.model_id};rrf{s.rrf_k};d{s.leg_depth}",
        **inside,
    )


def _embedded_parts(b: SqliteBackend) -> dict[str, Any]:
    """What the embedded backend shows of itself: the start-up sweep's report. A test or
    benchmark that looks inside it reaches the backend itself (``Components.backend``)."""
    return {"swept": b.swept}


def _replayed(outbox: Outbox) -> None:
    """After a commit, under the write order: the derived indexes apply it before the ack."""
    outbox.replay()


def open_service(settings: Settings, embedder: Embedder | None = None) -> Service:
    """The server's service facade over freshly built parts, its threads running."""
    parts = build_components(settings, embedder)
    bg = Background(parts)
    svc = Service(parts, bg)
    parts.ingestor = svc.ingestor = Ingestor(
        IngestDeps(
            settings=parts.settings,
            store=parts.writes,
            embedder=parts.embedder,
            blobs=parts.blobs,
            objects=svc,
            apply=lambda: _replayed(parts.outbox),
            wake=bg.wake.set,
        )
    )
    bg.start()
    return svc


def open_worker(settings: Settings, embedder: Embedder | None = None) -> WorkerContext:
    """A ``superchargedb worker`` process's parts: it does not own the data dir."""
    s = settings
    emb = embedder or _model(s)
    key = audit.load_key(s.audit_key_file)
    blobs = blob_store(s, Path(s.data_dir))
    store: WriteStore
    if s.database_url and s.cluster_urls:
        router, blobs = _router(s, emb.model_id, emb.dim, key, blobs)
        store, close = router, router.close
    elif s.database_url:
        from .storage.postgres.open import open_backend

        store = open_backend(
            s, model_id=emb.model_id, dim=emb.dim, audit_key=key, blobs=blobs, searches=False
        )
        close = store.close
    else:
        sqlite = open_sqlite_worker(s, model_id=emb.model_id, audit_key=key)
        store, close = sqlite, sqlite.close
    deps = IngestDeps(settings=s, store=store, embedder=emb, blobs=blobs)
    return WorkerContext(deps, Ingestor(deps), close)


def open_maintenance(settings: Settings) -> Maintenance:
    """The data dir's whole-store operations (backup, restore, reindex) for the offline CLI:
    the database's and its blob folder's when ``database_url`` is set."""
    if settings.database_url and settings.cluster_urls:
        from .storage.postgres.cluster_maintenance import DIRECTORY, ClusteredMaintenance
        from .storage.postgres.maintenance import PgMaintenance
        from .storage.postgres.open import clusters_of

        objects = Path(settings.data_dir) / "objects"
        bins = _pg_bin_dir()
        # The directory keeps no blobs: a folder that never exists.
        parts = {DIRECTORY: PgMaintenance(settings.database_url, objects / ".none", bins)}
        for name, url in clusters_of(settings).items():
            parts[name] = PgMaintenance(url, objects / name, bins)
        return ClusteredMaintenance(parts)
    if settings.database_url:
        from .storage.postgres.maintenance import PgMaintenance

        return PgMaintenance(
            settings.database_url, Path(settings.data_dir) / "objects", _pg_bin_dir()
        )
    return SqliteMaintenance(
        Path(settings.data_dir),
        settings.sqlite_synchronous,
        settings.job_lease_s,
        settings.job_max_attempts,
    )


def _pg_bin_dir() -> Path:
    """The PostgreSQL client programs (pg_dump, pg_restore): the stack extra's, which match its
    server, else the ones on PATH."""
    from .stack.postgres import StackUnavailableError, bin_dir

    try:
        return bin_dir()
    except StackUnavailableError:
        found = shutil.which("pg_dump")
        if found is None:
            raise ValidationError(
                "backup and restore on PostgreSQL need pg_dump and pg_restore on PATH"
            ) from None
        return Path(found).parent
