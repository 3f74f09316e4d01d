"""Admission control: a bounded number of requests in flight per class, a short bounded queue.

Overload must degrade into fast, explicit refusals (503 ``overloaded`` with ``Retry-After``)
instead of requests that queue without bound, time out and hold their bodies in memory. Each
class (ingest, search, answer, other) has at most ``inflight`` slots and ``queue`` waiting
places; a request that finds both full, or waits longer than ``wait_s``, is refused at once.
Everything admitted is therefore bounded by the sum of the classes' slots and queues.

A fixed slot count cannot know how fast the machine is right now (other tenants, a noisy
neighbour, a cold cache): the work is CPU-bound, so more requests in flight than the CPUs can
serve only stretch every request's latency until clients time out. Each class therefore adapts
its limit below the configured ceiling (AIMD, as TCP does): a request that took longer than the
class's latency target cuts the limit by 10 % (at most once per generation of requests, so one
burst of slow completions counts once); a fast one raises it by ``1/limit``. The limit never
drops below one slot, so every class always makes progress.

The policy lives here; ``api/admission.py`` only maps HTTP requests onto it. It runs on the
server's event loop (one thread), so the counters need no lock.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .errors import OverloadedError

if TYPE_CHECKING:
    from .settings import Settings

CLASSES = ("ingest", "search", "answer", "other")
DECREASE = 0.9


@dataclass
class ClassState:
    inflight_max: int  # the ceiling; 0: unlimited
    queue_max: int
    target_s: float = 0.0  # latency target; 0: fixed limit
    limit: float = 0.0  # the adaptive limit, 1 <= limit <= inflight_max
    inflight: int = 0
    waiters: deque[asyncio.Future[None]] = field(default_factory=deque)
    admitted: int = 0
    rejected: int = 0
    last_cut: float = 0.0

    def __post_init__(self) -> None:
        self.limit = float(self.inflight_max)

    def has_slot(self) -> bool:
        return self.inflight_max <= 0 or self.inflight < max(1, math.floor(self.limit))


def classify(method: str, path: str) -> str | None:
    """The admission class of a request; None for the probes that must answer under overload."""
    if path in ("/healthz", "/readyz", "/metrics"):
        return None
    if method == "POST" and path == "/v1/ingest":
        return "ingest"
    if method == "PUT" and path.startswith("/v1/objects/"):
        return "ingest"  # uploads stream to disk and enqueue derivation: write work
    if method == "POST" and path == "/v1/search":
        return "search"
    if method == "POST" and path == "/v1/answer":
        return "answer"
    return "other"


class Admission:
    def __init__(
        self,
        limits: dict[str, tuple[int, int]],
        wait_s: float,
        targets_s: dict[str, float] | None = None,
    ) -> None:
        targets_s = targets_s or {}
        self.classes = {
            name: ClassState(*limits[name], target_s=targets_s.get(name, 0.0)) for name in CLASSES
        }
        self.wait_s = wait_s
        self.retry_after = max(1, math.ceil(wait_s))

    @classmethod
    def from_settings(cls, s: Settings) -> Admission:
        return cls(
            {
                "ingest": (s.inflight_ingest, s.queue_ingest),
                "search": (s.inflight_search, s.queue_search),
                "answer": (s.inflight_answer, s.queue_answer),
                "other": (s.inflight_other, s.queue_other),
            },
            s.queue_wait_s,
            {
                "ingest": s.latency_target_ingest_s,
                "search": s.latency_target_search_s,
                "answer": s.latency_target_answer_s,
                "other": s.latency_target_other_s,
            },
        )

    def _refuse(self, name: str, st: ClassState, why: str) -> OverloadedError:
        st.rejected += 1
        return OverloadedError(
            f"the server is at capacity for {name} requests ({why}); retry after "
            f"{self.retry_after} s",
            retry_after=self.retry_after,
            request_class=name,
        )

    async def acquire(self, name: str) -> float:
        """Take a slot of class ``name``, waiting at most ``wait_s``; raises OverloadedError.

        Returns the admission time, to give back to ``release``."""
        st = self.classes[name]
        if st.has_slot() and not st.waiters:
            st.inflight += 1
            st.admitted += 1
            return time.monotonic()
        if len(st.waiters) >= st.queue_max:
            raise self._refuse(name, st, "queue full")
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        st.waiters.append(fut)
        try:
            await asyncio.wait({fut}, timeout=self.wait_s)
        except BaseException:  # cancelled (client went away): give back a slot handed to us
            if fut.done() and not fut.cancelled():
                self.release(name)
            else:
                fut.cancel()
                self._forget(st, fut)
            raise
        if fut.done() and not fut.cancelled():
            st.admitted += 1  # _hand_over() counted it in inflight already
            return time.monotonic()
        fut.cancel()
        self._forget(st, fut)
        raise self._refuse(name, st, f"waited {self.wait_s:g} s")

    def release(self, name: str, started: float | None = None) -> None:
        """Free a slot, adapting the limit to how long the request took (``started`` is what
        ``acquire`` returned); then admit waiters while the limit allows."""
        st = self.classes[name]
        st.inflight -= 1
        if started is not None and st.target_s > 0 and st.inflight_max > 0:
            now = time.monotonic()
            if now - started > st.target_s:
                if started >= st.last_cut:  # it ran under the current limit: cut once
                    st.limit = max(1.0, st.limit * DECREASE)
                    st.last_cut = now
            else:
                st.limit = min(float(st.inflight_max), st.limit + 1.0 / st.limit)
        self._hand_over(st)

    @staticmethod
    def _hand_over(st: ClassState) -> None:
        while st.waiters and st.has_slot():
            fut = st.waiters.popleft()
            if not fut.done():
                st.inflight += 1
                fut.set_result(None)

    @staticmethod
    def _forget(st: ClassState, fut: asyncio.Future[None]) -> None:
        with contextlib.suppress(ValueError):  # already handed a slot and popped
            st.waiters.remove(fut)

    def snapshot(self) -> dict[str, dict[str, float]]:
        return {
            name: {
                "inflight": st.inflight,
                "limit": round(st.limit, 2) if st.inflight_max > 0 else 0,
                "queued": len(st.waiters),
                "admitted": st.admitted,
                "rejected": st.rejected,
            }
            for name, st in self.classes.items()
        }
