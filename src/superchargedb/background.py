"""The server's background threads: usage flushes, derivation job workers and the outbox tail.

Started after every part exists and stopped before any is closed (the wiring's order).
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING

from .ingest.engine_settings import media_limits
from .ingest.jobs_runner import JobRunner

if TYPE_CHECKING:
    from .components import Components

log = logging.getLogger(__name__)


class Background:
    def __init__(self, parts: Components) -> None:
        self.parts = parts
        self.wake = threading.Event()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        n = self.parts.settings.job_workers
        targets = [(self._flush_loop, "scdb-meter")]
        targets += [(self._work_loop, f"scdb-worker-{i}") for i in range(n)]
        targets.append((self._tail_loop, "scdb-outbox-tail"))
        for fn, name in targets:
            t = threading.Thread(target=fn, name=name, daemon=True)
            t.start()
            self._threads.append(t)

    def stop(self) -> None:
        self._stop.set()
        self.wake.set()
        for t in self._threads:
            t.join(timeout=30)

    def _flush_loop(self) -> None:
        while not self._stop.wait(5.0):
            try:
                self.parts.meter.flush()
            except Exception:  # metering must never take the server down
                log.exception("usage flush failed")

    def _work_loop(self) -> None:
        p = self.parts
        assert p.ingestor is not None
        runner = JobRunner(p.ingestor, p.writes.jobs, media_limits(p.settings))
        while not self._stop.is_set():
            try:
                while not self._stop.is_set() and runner.run_once():
                    pass
            except Exception:  # never let the worker thread die
                log.exception("job worker error")
            self.wake.wait(1.0)
            self.wake.clear()

    def _tail_loop(self) -> None:
        """Apply outbox rows committed by external ``superchargedb worker`` processes."""
        p = self.parts
        while not self._stop.wait(0.25):
            try:
                if p.outbox.head() > p.outbox.applied():
                    p.outbox.replay()
            except Exception:
                log.exception("outbox tail error")
