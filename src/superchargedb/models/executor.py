"""One embedding worker for the whole process, micro-batching concurrent requests (D-42).

Every embedding (query, ingest, answer checks) runs under one model lock, fed by one worker
thread. Requests of a few texts (queries) are interactive: when the model is idle and nothing
waits, the caller runs it itself (no thread hop: at concurrency 1 a query costs what the model
costs); otherwise the request queues and the worker takes every one that is waiting into a single
model batch, and under load (the previous batch held more than one request) it waits up to
``wait_ms`` for more, so eight concurrent searches cost one or two onnxruntime runs instead of
eight competing ones. Larger requests (ingest) are
bulk: sorted by length and cut into slices of ``max_batch`` texts, one slice per turn, and
interactive requests go first at every turn, so a search waits at most one slice behind an
ingest. The queue is bounded (``max_queue`` requests): beyond it a caller gets 503 ``overloaded``.

A failing batch is retried request by request, so an error reaches only the request that caused
it. ``close()`` finishes the batch in flight, fails the waiting requests with 503, and joins.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import OverloadedError, UnavailableError
from .embedder import Embedder, Vectors
from .query_cache import QueryVectorCache


class _Request:
    __slots__ = ("texts", "out", "left", "error", "done")

    def __init__(self, texts: list[str], dim: int) -> None:
        self.texts = texts
        self.out = np.empty((len(texts), dim), dtype=np.float32)
        self.left = 0  # bulk slices not yet done
        self.error: BaseException | None = None
        self.done = threading.Event()


class EmbedExecutor:
    """An :class:`Embedder` that runs ``inner`` on one worker thread, batching callers."""

    def __init__(
        self,
        inner: Embedder,
        *,
        max_batch: int = 32,
        wait_ms: float = 2.0,
        max_queue: int = 1024,
        small_max: int = 4,
        cache_size: int = 4096,
        owns_inner: bool = False,
    ) -> None:
        self.inner = inner
        self.max_batch = max(1, max_batch)
        self.wait_s = max(0.0, wait_ms) / 1000
        self.max_queue = max(1, max_queue)
        self.small_max = max(1, small_max)
        self._owns = owns_inner
        self._cond = threading.Condition()
        self._model_lock = threading.Lock()  # one model run at a time, whoever runs it
        self._small: deque[_Request] = deque()
        self._bulk: deque[tuple[_Request, np.ndarray]] = deque()  # (request, row indices)
        self._queued = 0
        self._closed = False
        self._busy = False  # the last interactive batch held more than one request
        self._last_small = False
        self._queries = QueryVectorCache(cache_size)
        self.batches = 0  # model calls made (for tests and metrics)
        self._thread = threading.Thread(target=self._loop, name="scdb-embed", daemon=True)
        self._thread.start()

    # -- the Embedder protocol -------------------------------------------------------------
    @property
    def model_id(self) -> str:
        return self.inner.model_id

    @property
    def dim(self) -> int:
        return self.inner.dim

    @property
    def max_tokens(self) -> int:
        return self.inner.max_tokens

    def count_tokens(self, text: str) -> int:
        return self.inner.count_tokens(text)

    def token_spans(self, text: str) -> list[tuple[int, int]]:
        return self.inner.token_spans(text)

    def embed(self, texts: Sequence[str]) -> Vectors:
        texts = list(texts)
        if not texts:
            return np.empty((0, self.dim), dtype=np.float32)
        req = _Request(texts, self.dim)
        with self._cond:
            if self._closed:
                raise UnavailableError("the embedder is shut down")
            if self._queued >= self.max_queue:
                raise OverloadedError(
                    f"embedding queue is full ({self.max_queue} requests)", retry_after=1
                )
            self._queued += 1
            small = len(texts) <= self.small_max
            # Idle model, nobody waiting: run it here (the lock is taken, not waited for).
            direct = small and not self._small and not self._bulk
            direct = direct and self._model_lock.acquire(blocking=False)
            if small and not direct:
                self._small.append(req)
            elif not small:
                order = np.argsort([len(t) for t in texts], kind="stable")
                parts = range(0, len(order), self.max_batch)
                req.left = len(parts)
                self._bulk.extend((req, order[i : i + self.max_batch]) for i in parts)
            if not direct:  # waking the idle worker for nothing costs the caller the GIL
                self._cond.notify()
        if direct:
            try:
                return self._model(texts)
            finally:
                self._model_lock.release()
                with self._cond:
                    self._queued -= 1
        req.done.wait()
        if req.error is not None:
            raise req.error
        return req.out

    def embed_query(self, text: str) -> Vectors:
        """1-D unit vector; cached per text (read-only array) because queries repeat."""
        return self._queries.get_or_embed(text, self.embed)

    # -- the worker ------------------------------------------------------------------------
    def cache_len(self) -> int:
        """Query vectors cached (at most ``cache_size``)."""
        return len(self._queries)

    def _take(self) -> tuple[list[_Request], tuple[_Request, np.ndarray] | None] | None:
        """The next unit of work: interactive requests (batched), else one bulk slice."""
        with self._cond:
            while not self._small and not self._bulk and not self._closed:
                self._cond.wait()
            if self._closed:
                return None
            # Interactive first, but never twice in a row while a bulk slice waits: a search
            # waits at most one slice, and a stream of searches cannot starve an ingest.
            if self._small and not (self._bulk and self._last_small):
                self._last_small = True
                batch = [self._small.popleft()]
                n = len(batch[0].texts)
                deadline = time.monotonic() + (self.wait_s if self._busy else 0.0)
                while n < self.max_batch:
                    if self._small and n + len(self._small[0].texts) <= self.max_batch:
                        req = self._small.popleft()
                        batch.append(req)
                        n += len(req.texts)
                        continue
                    left = deadline - time.monotonic()
                    if self._small or left <= 0:
                        break
                    self._cond.wait(left)
                    if self._closed:
                        break
                self._busy = len(batch) > 1
                return batch, None
            self._last_small = False
            return [], self._bulk.popleft()

    def _loop(self) -> None:
        while True:
            work = self._take()
            if work is None:
                break
            batch, part = work
            try:
                if batch:
                    self._run_small(batch)
                elif part is not None:
                    self._run_slice(*part)
            except BaseException as exc:  # never let the worker die: fail what it held
                for req in batch or ([part[0]] if part else []):
                    self._finish(req, exc)
        self._fail_waiting()

    def _run_small(self, batch: list[_Request]) -> None:
        texts = [t for r in batch for t in r.texts]
        try:
            with self._model_lock:
                vecs = self._model(texts)
        except Exception:
            if len(batch) == 1:
                raise
            for r in batch:  # find the request at fault: each alone
                try:
                    with self._model_lock:
                        r.out[:] = self._model(r.texts)
                    self._finish(r, None)
                except Exception as exc:
                    self._finish(r, exc)
            return
        i = 0
        for r in batch:
            r.out[:] = vecs[i : i + len(r.texts)]
            i += len(r.texts)
            self._finish(r, None)

    def _run_slice(self, req: _Request, idx: np.ndarray) -> None:
        if req.error is None:  # a failed request's later slices are skipped
            try:
                with self._model_lock:
                    req.out[idx] = self._model([req.texts[i] for i in idx])
            except Exception as exc:
                req.error = exc
        req.left -= 1
        if req.left == 0:
            self._finish(req, req.error)

    def _model(self, texts: list[str]) -> np.ndarray:
        self.batches += 1
        out = np.asarray(self.inner.embed(texts), dtype=np.float32)
        if out.shape != (len(texts), self.dim):
            raise UnavailableError(f"embedder returned shape {out.shape} for {len(texts)} texts")
        return out

    def _finish(self, req: _Request, error: BaseException | None) -> None:
        if req.done.is_set():
            return
        req.error = error
        with self._cond:
            self._queued -= 1
        req.done.set()

    def _fail_waiting(self) -> None:
        with self._cond:
            pending = list(self._small) + [r for r, _ in self._bulk]
            self._small.clear()
            self._bulk.clear()
        for req in pending:
            self._finish(req, UnavailableError("the embedder is shut down"))

    def close(self, timeout: float = 30.0) -> None:
        """Finish the batch in flight, fail the waiting requests (503), stop the worker."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        self._thread.join(timeout)
        self._fail_waiting()
        if self._owns:
            closer: Any = getattr(self.inner, "close", None)
            if closer is not None:
                closer()
