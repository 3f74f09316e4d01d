"""``superchargedb worker``: derivation jobs in a separate process (D-40).

A worker does not own the data dir: it writes only catalog rows and outbox entries (SQLite WAL
allows several processes), and the serving process tails the outbox into its vector index.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path

from . import faults
from .ingest.derive import MediaLimits
from .ingest.jobs_runner import JobRunner
from .ingest.pipeline import Ingestor
from .models.embedder import Embedder, make_embedder
from .settings import Settings
from .storage import audit
from .storage.catalog import Catalog
from .storage.jobs import JobQueue
from .storage.objects import FileBlobStore

log = logging.getLogger(__name__)


class WorkerContext:
    """The slice of the service a job needs: catalog, blobs, embedder, audit key."""

    def __init__(self, settings: Settings, embedder: Embedder | None = None) -> None:
        data = Path(settings.data_dir)
        if not (data / "catalog.db").exists():
            raise SystemExit(f"no catalog in {data}: start the server once first")
        self.settings = settings
        self.catalog = Catalog(data / "catalog.db", settings.sqlite_synchronous)
        self.embedder = embedder or make_embedder(
            settings.embedder,
            max_tokens=settings.embed_max_tokens,
            threads=settings.embed_threads,
            batch_size=settings.embed_batch_size,
        )
        self.audit_key = audit.load_key(settings.audit_key_file)
        self.blobs = FileBlobStore(data / "objects")
        self.jobs = JobQueue(self.catalog, settings.job_lease_s, settings.job_max_attempts)
        # Leases of workers (or servers) that provably died on this machine resume at once.
        self.jobs.release_dead_leases(own_data_dir=False)
        self.ingestor = Ingestor(self)  # type: ignore[arg-type]

    def after_worker_commit(self) -> None:
        """Nothing to do: the owning server applies the outbox to its index."""

    def runner(self) -> JobRunner:
        s = self.settings
        return JobRunner(
            self.ingestor,
            self.jobs,
            MediaLimits(
                max_pages=s.media_max_pages,
                max_pixels=s.media_max_pixels,
                max_duration_s=s.media_max_duration_s,
                timeout_s=s.media_timeout_s,
                memory_mb=s.media_memory_mb,
            ),
        )

    def run(self, stop: threading.Event, once: bool = False, poll_s: float = 0.5) -> int:
        runner = self.runner()
        done = 0
        while not stop.is_set():
            if runner.run_once():
                faults.point("worker.after_job")
                done += 1
                continue
            if once:
                break
            stop.wait(poll_s)
        return done

    def close(self) -> None:
        self.catalog.close()
