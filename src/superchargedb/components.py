"""The parts one process is made of, built by ``wiring.py`` and closed in reverse order.

A plain record: no part reaches another through it. The service facade, the background
threads and the CLI take the parts they use from it. Every storage part is the one backend's
(``backend``, a ``ServerBackend``), seen through the Protocol each user needs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .models.executor import EmbedExecutor
from .ratelimit import RedisLimiter

if TYPE_CHECKING:
    from pathlib import Path

    from .answer.pipeline import Answerer
    from .ingest.pipeline import Ingestor
    from .metering import Meter
    from .metrics import Metrics
    from .models.embedder import Embedder
    from .ratelimit import Limiter
    from .search.cache import Cache
    from .search.hybrid import Searcher
    from .search.rerank import Reranker
    from .settings import Settings
    from .storage.lock import DataDirLock
    from .storage.protocols import Outbox, UnitReader, VectorIndex
    from .storage.protocols_auth import AuthStore
    from .storage.protocols_reads import AuditTrail, CatalogCounts, JobListing
    from .storage.protocols_service import (
        KeyframeReader,
        Listing,
        ObjectCatalog,
        ServerBackend,
        ServiceStore,
        UsageReader,
        WordReader,
    )
    from .storage.protocols_writes import BulkLoad
    from .storage.sqlite.objects import FileBlobStore


@dataclass
class Components:
    settings: Settings
    lock: DataDirLock | None  # the embedded store's; a shared database takes none
    embedder: Embedder
    backend: ServerBackend  # the one store: every storage part below is a view of it
    audit_key: bytes
    audit_anchor: Path
    cache: Cache
    limiter: Limiter
    reranker: Reranker | None
    searcher: Searcher
    answerer: Answerer
    blobs: FileBlobStore
    writes: ServiceStore  # the one write transaction (ingest, jobs, deletes, objects, meter)
    bulk: BulkLoad  # the index side of a bulk import
    meter: Meter
    metrics: Metrics
    counts: CatalogCounts
    job_views: JobListing
    audit_trail: AuditTrail
    auth_store: AuthStore  # principals, keys and console sessions
    outbox: Outbox  # the derived indexes follow it
    vectors: VectorIndex
    unit_reader: UnitReader
    word_reader: WordReader
    keyframes: KeyframeReader  # video shots' kept keyframes (D-236)
    listing: Listing  # documents and Units as a reader lists them
    usage_reader: UsageReader
    object_rows: ObjectCatalog  # objects by (key, owner), the blob collector
    ingestor: Ingestor | None = None  # set by the wiring once the object gate exists
    swept: dict[str, Any] | None = None  # what the start-up sweep of objects/ reclaimed
    versions: str = ""  # model and fusion versions: part of every result-cache key

    def close(self) -> None:
        """Flush, then close the backend (checkpoint, anchor, release) and the rest, in
        reverse order of building (the background threads are stopped first, by their
        owner)."""
        for prov in self.answerer.providers:
            closer = getattr(prov, "close", None)
            if closer is not None:
                closer()
        try:
            self.meter.flush()
        finally:
            try:
                self.backend.close()
            finally:
                if isinstance(self.limiter, RedisLimiter):
                    self.limiter.close()
                closer = getattr(self.cache, "close", None)  # the shared cache's connection
                if closer is not None:
                    closer()
                if isinstance(self.embedder, EmbedExecutor):
                    self.embedder.close()
