"""Admission control: a bounded number of requests in flight per class, a short bounded queue.

Overload must degrade into fast, explicit refusals (503 ``overloaded`` with ``Retry-After``)
instead of requests that queue without bound, time out and hold their bodies in memory. Each
class (ingest, search, answer, other) has ``inflight`` slots and ``queue`` waiting places; a
request that finds both full, or waits longer than ``wait_s``, is refused at once. Everything
admitted is therefore bounded by the sum of the classes' slots and queues.

The policy lives here; ``api/admission.py`` only maps HTTP requests onto it. It runs on the
server's event loop (one thread), so the counters need no lock.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .errors import OverloadedError

if TYPE_CHECKING:
    from .settings import Settings

CLASSES = ("ingest", "search", "answer", "other")


@dataclass
class ClassState:
    inflight_max: int  # 0: unlimited
    queue_max: int
    inflight: int = 0
    waiters: deque[asyncio.Future[None]] = field(default_factory=deque)
    admitted: int = 0
    rejected: int = 0


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
    def __init__(self, limits: dict[str, tuple[int, int]], wait_s: float) -> None:
        self.classes = {name: ClassState(*limits[name]) for name in CLASSES}
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
        )

    def _refuse(self, name: str, st: ClassState, why: str) -> OverloadedError:
        st.rejected += 1
        return OverloadedError(
            f"the server is at capacity for {name} requests ({why}); retry after "
            f"{self.retry_after} s",
            retry_after=self.retry_after,
            request_class=name,
        )

    async def acquire(self, name: str) -> None:
        """Take a slot of class ``name``, waiting at most ``wait_s``; raises OverloadedError."""
        st = self.classes[name]
        if st.inflight_max <= 0 or (st.inflight < st.inflight_max and not st.waiters):
            st.inflight += 1
            st.admitted += 1
            return
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
            st.admitted += 1  # release() handed its slot over: inflight already counts it
            return
        fut.cancel()
        self._forget(st, fut)
        raise self._refuse(name, st, f"waited {self.wait_s:g} s")

    def release(self, name: str) -> None:
        """Free a slot: hand it straight to the oldest live waiter, else return it."""
        st = self.classes[name]
        if st.inflight_max <= 0:
            st.inflight -= 1
            return
        while st.waiters:
            fut = st.waiters.popleft()
            if not fut.done():
                fut.set_result(None)
                return
        st.inflight -= 1

    @staticmethod
    def _forget(st: ClassState, fut: asyncio.Future[None]) -> None:
        with contextlib.suppress(ValueError):  # already handed a slot and popped
            st.waiters.remove(fut)

    def snapshot(self) -> dict[str, dict[str, int]]:
        return {
            name: {
                "inflight": st.inflight,
                "queued": len(st.waiters),
                "admitted": st.admitted,
                "rejected": st.rejected,
            }
            for name, st in self.classes.items()
        }
