"""Bounded preview rendering, counted against the caller.

Rendering a large page or image costs seconds of CPU in a subprocess; without a bound, one key
asking for the same preview 16 times at once holds 16 request slots for as long and every
other tenant waits. Here at most ``total`` renders run on the server and at most
``per_principal`` of them for one principal; a principal's further requests wait (at most
``queue`` of them, at most ``wait_s``) and are refused beyond that with 503 ``overloaded``, so a
principal's previews hold a bounded number of request slots whatever it sends. A freed render
slot goes to the waiting principal with the fewest renders running (then the longest waiting).

The render itself runs in a worker thread, off the event loop; its slot is released when the
thread finishes, even if the client went away meanwhile (the subprocess still runs until then).
Like admission control, this runs on the server's event loop only, so it needs no lock.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections import Counter, deque
from collections.abc import Callable
from typing import TypeVar

from .errors import OverloadedError

T = TypeVar("T")


class RenderGate:
    def __init__(self, total: int, per_principal: int, queue: int, wait_s: float) -> None:
        self.total = max(1, total)
        self.per_principal = max(1, per_principal)
        self.queue = max(0, queue)
        self.wait_s = wait_s
        self.retry_after = max(1, math.ceil(wait_s))
        self.running: Counter[str] = Counter()
        self.inflight = 0
        # Per principal: (enqueued at, future) in arrival order.
        self.waiting: dict[str, deque[tuple[float, asyncio.Future[None]]]] = {}
        self.rejected = 0

    async def run(self, who: str, fn: Callable[[], T]) -> T:
        """Run ``fn`` in a thread once ``who`` may render; raises OverloadedError."""
        await self._acquire(who)
        task = asyncio.ensure_future(asyncio.to_thread(fn))
        task.add_done_callback(lambda _t: self._release(who))
        return await asyncio.shield(task)  # cancelled: the slot stays taken until fn returns

    def _may_start(self, who: str) -> bool:
        return self.inflight < self.total and self.running[who] < self.per_principal

    def _start(self, who: str) -> None:
        self.inflight += 1
        self.running[who] += 1

    async def _acquire(self, who: str) -> None:
        mine = self.waiting.get(who)
        if not mine and self._may_start(who):
            self._start(who)
            return
        if len(mine or ()) >= self.queue:
            raise self._refuse("too many of this caller's previews are rendering or waiting")
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        entry = (time.monotonic(), fut)
        self.waiting.setdefault(who, deque()).append(entry)
        try:
            await asyncio.wait({fut}, timeout=self.wait_s)
        except BaseException:  # cancelled while waiting: give back a slot handed to us
            if fut.done() and not fut.cancelled():
                self._release(who)
            else:
                fut.cancel()
                self._forget(who, entry)
            raise
        if fut.done() and not fut.cancelled():
            return  # _hand_over() counted it as running already
        fut.cancel()
        self._forget(who, entry)
        raise self._refuse(f"waited {self.wait_s:g} s for a render slot")

    def _release(self, who: str) -> None:
        self.inflight -= 1
        self.running[who] -= 1
        if self.running[who] <= 0:
            del self.running[who]
        self._hand_over()

    def _hand_over(self) -> None:
        while self.inflight < self.total:
            ready = [
                (self.running[w], q[0][0], w)
                for w, q in self.waiting.items()
                if q and self.running[w] < self.per_principal
            ]
            if not ready:
                return
            _, _, who = min(ready)
            _, fut = self.waiting[who].popleft()
            if not self.waiting[who]:
                del self.waiting[who]
            if not fut.done():
                self._start(who)
                fut.set_result(None)

    def _forget(self, who: str, entry: tuple[float, asyncio.Future[None]]) -> None:
        q = self.waiting.get(who)
        if q is None:
            return
        with contextlib.suppress(ValueError):  # already handed a slot and popped
            q.remove(entry)
        if not q:
            del self.waiting[who]

    def _refuse(self, why: str) -> OverloadedError:
        self.rejected += 1
        return OverloadedError(
            f"the server is at capacity for previews ({why}); retry after {self.retry_after} s",
            retry_after=self.retry_after,
            request_class="preview",
        )
