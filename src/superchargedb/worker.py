"""``superchargedb worker``: derivation jobs in a separate process (D-40).

A worker does not own the data dir: it writes only catalog rows and outbox entries (SQLite WAL
allows several processes), and the serving process tails the outbox into its vector index.
"""

from __future__ import annotations

import logging
import threading

from . import faults
from .ingest.deps import IngestDeps
from .ingest.engine_settings import media_limits
from .ingest.jobs_runner import JobRunner
from .ingest.pipeline import Ingestor

log = logging.getLogger(__name__)


class WorkerContext:
    """The slice of the server a job needs (catalog, blobs, embedder, audit key), built by
    ``wiring.open_worker``."""

    def __init__(self, deps: IngestDeps, ingestor: Ingestor) -> None:
        self.deps = deps
        self.settings = deps.settings
        self.catalog = deps.catalog
        self.embedder = deps.embedder
        self.blobs = deps.blobs
        self.jobs = deps.jobs
        self.audit_key = deps.audit_key
        self.ingestor = ingestor

    def runner(self) -> JobRunner:
        return JobRunner(self.ingestor, self.jobs, media_limits(self.settings))

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
