"""``superchargedb worker``: derivation jobs in a separate process (D-40).

A worker does not own the data dir: it writes only catalog rows and outbox entries (SQLite WAL
allows several processes), and the serving process tails the outbox into its vector index.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from . import faults
from .errors import UnavailableError
from .ingest.deps import IngestDeps
from .ingest.engine_settings import media_limits
from .ingest.jobs_runner import JobRunner
from .ingest.pipeline import Ingestor

log = logging.getLogger(__name__)


class WorkerContext:
    """The slice of the server a job needs (the write store, blobs, embedder), built by
    ``wiring.open_worker``; ``close`` releases the store."""

    def __init__(self, deps: IngestDeps, ingestor: Ingestor, close: Callable[[], None]) -> None:
        self.deps = deps
        self.settings = deps.settings
        self.embedder = deps.embedder
        self.blobs = deps.blobs
        self.jobs = deps.store.jobs
        self.ingestor = ingestor
        self._close = close

    def runner(self) -> JobRunner:
        return JobRunner(self.ingestor, self.jobs, media_limits(self.settings))

    def run(self, stop: threading.Event, once: bool = False, poll_s: float = 0.5) -> int:
        runner = self.runner()
        done = 0
        while not stop.is_set():
            try:
                ran = runner.run_once()
            except UnavailableError as exc:
                # The database is failing over: the job (if one was claimed) keeps its lease
                # until it expires, then runs again; completion is idempotent (D-272).
                log.warning("database unavailable, retrying: %s", exc.message)
                stop.wait(poll_s)
                continue
            if ran:
                faults.point("worker.after_job")
                done += 1
                continue
            if once:
                break
            stop.wait(poll_s)
        return done

    def close(self) -> None:
        self._close()
