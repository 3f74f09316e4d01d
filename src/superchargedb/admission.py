"""Admission control: bounded slots per class, shared fairly between tenants and principals.

Overload must degrade into fast, explicit refusals (503 ``overloaded`` with ``Retry-After``)
instead of requests that queue without bound. Each class (ingest, search, answer, other) has at
most ``inflight`` slots and ``queue`` waiting places.

Slots are taken after the key lookup and after the body has arrived (``api/admission.py``), so a
slot is only ever held by work the server can do now, never by a slow client. Who gets a slot:

- Work-conserving: a request that finds a free slot and nobody waiting takes it, so a lone
  principal uses every idle slot.
- Under contention the next free slot goes to the waiter whose tenant has the fewest requests of
  the class in flight, then whose principal has the fewest, then the oldest (``_pick``). A tenant
  flooding the class therefore delays another tenant by at most one of its own requests.
- The queue is shared the same way: when it is full, a newcomer takes the place of the newest
  waiter of the heaviest share (most in flight plus waiting) if that share is heavier than its
  own; otherwise the newcomer is refused.
- A waiter is refused after ``wait_s`` only while its tenant already has a request of the class
  in flight; a tenant with none is next in line and waits for the next free slot.

A fixed slot count cannot know how fast the machine is right now, so each class adapts its limit
below the ceiling (AIMD, as TCP does): a request slower than the class's latency target cuts the
limit by 10 % (at most once per generation of requests), a fast one raises it by ``1/limit``. A
request that reports embedded tokens (``release(..., tokens=n)``) is allowed ``token_target_s``
more per token, so a few long Units are not mistaken for an overloaded machine.

It runs on the server's event loop (one thread), so the counters need no lock.
"""

from __future__ import annotations

import asyncio
import itertools
import math
import time
from collections import Counter, OrderedDict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .errors import OverloadedError

if TYPE_CHECKING:
    from .settings import Settings

CLASSES = ("ingest", "search", "answer", "other")
DECREASE = 0.9


@dataclass(frozen=True)
class Share:
    """Whom a request counts against: its tenant (scope root) and its principal."""

    tenant: str
    principal: str


@dataclass
class Ticket:
    name: str
    share: Share
    started: float


@dataclass(eq=False)
class _Waiter:
    share: Share
    seq: int
    fut: asyncio.Future[None]
    since: float


@dataclass
class ClassState:
    inflight_max: int  # the ceiling; 0: unlimited
    queue_max: int
    target_s: float = 0.0  # latency target per request; 0: fixed limit
    token_target_s: float = 0.0  # latency target per embedded token (requests that report any)
    limit: float = 0.0  # the adaptive limit, 1 <= limit <= inflight_max
    inflight: int = 0
    waiters: list[_Waiter] = field(default_factory=list)
    by_tenant: Counter[str] = field(default_factory=Counter)
    by_principal: Counter[str] = field(default_factory=Counter)
    admitted: int = 0
    rejected: int = 0
    last_cut: float = 0.0

    def __post_init__(self) -> None:
        self.limit = float(self.inflight_max)

    def has_slot(self) -> bool:
        return self.inflight_max <= 0 or self.inflight < max(1, math.floor(self.limit))

    def take(self, share: Share) -> None:
        self.inflight += 1
        self.by_tenant[share.tenant] += 1
        self.by_principal[share.principal] += 1

    def give_back(self, share: Share) -> None:
        self.inflight -= 1
        for counter, key in ((self.by_tenant, share.tenant), (self.by_principal, share.principal)):
            counter[key] -= 1
            if counter[key] <= 0:
                del counter[key]


def classify(method: str, path: str) -> str | None:
    """The admission class of a request; None for the probes that must answer under overload."""
    if path in ("/healthz", "/readyz", "/metrics"):
        return None
    if method == "POST" and path == "/v1/ingest":
        return "ingest"
    if method == "PUT" and path.startswith("/v1/objects/"):
        return "ingest"  # uploads enqueue derivation: write work
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
        token_targets_s: dict[str, float] | None = None,
    ) -> None:
        targets_s = targets_s or {}
        token_targets_s = token_targets_s or {}
        self.classes = {
            name: ClassState(
                *limits[name],
                target_s=targets_s.get(name, 0.0),
                token_target_s=token_targets_s.get(name, 0.0),
            )
            for name in CLASSES
        }
        self.wait_s = wait_s
        self.retry_after = max(1, math.ceil(wait_s))
        self._seq = itertools.count()

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
            {"ingest": s.latency_target_ingest_token_ms / 1000},
        )

    def _refuse(self, name: str, st: ClassState, why: str) -> OverloadedError:
        st.rejected += 1
        return OverloadedError(
            f"the server is at capacity for {name} requests ({why}); retry after "
            f"{self.retry_after} s",
            retry_after=self.retry_after,
            request_class=name,
        )

    @staticmethod
    def _weight(st: ClassState, share: Share) -> tuple[int, int]:
        """How much of the class a share holds or asks for (tenant first, then principal)."""
        waiting_t = sum(1 for w in st.waiters if w.share.tenant == share.tenant)
        waiting_p = sum(1 for w in st.waiters if w.share.principal == share.principal)
        return (
            st.by_tenant[share.tenant] + waiting_t,
            st.by_principal[share.principal] + waiting_p,
        )

    async def acquire(self, name: str, share: Share) -> Ticket:
        """Take a slot of class ``name`` for ``share``; raises OverloadedError."""
        st = self.classes[name]
        if st.has_slot() and not st.waiters:
            st.take(share)
            st.admitted += 1
            return Ticket(name, share, time.monotonic())
        if len(st.waiters) >= st.queue_max and not self._evict_for(name, st, share):
            raise self._refuse(name, st, "queue full")
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        me = _Waiter(share, next(self._seq), fut, time.monotonic())
        st.waiters.append(me)
        try:
            while not fut.done():
                if st.by_tenant[share.tenant] == 0:
                    timeout = 0.25  # next in line: re-check now and then whether that changed
                else:
                    timeout = me.since + self.wait_s - time.monotonic()
                    if timeout <= 0:
                        break
                await asyncio.wait({fut}, timeout=timeout)
        except BaseException:  # cancelled (client went away): give back a slot handed to us
            if fut.done() and not fut.cancelled() and fut.exception() is None:
                self.release(Ticket(name, share, time.monotonic()))
            else:
                fut.cancel()
                self._forget(st, me)
            raise
        if fut.done() and not fut.cancelled():
            exc = fut.exception()
            if exc is not None:  # evicted from a full queue by a lighter share
                raise exc
            st.admitted += 1  # _hand_over() counted it in inflight already
            return Ticket(name, share, time.monotonic())
        fut.cancel()
        self._forget(st, me)
        raise self._refuse(name, st, f"waited {self.wait_s:g} s")

    def _evict_for(self, name: str, st: ClassState, share: Share) -> bool:
        """Make room in a full queue for ``share`` by refusing the heaviest share's newest
        waiter, if that share is heavier than ``share`` would be; False when it is not."""
        if not st.waiters:
            return False
        mine = self._weight(st, share)
        mine = (mine[0] + 1, mine[1] + 1)
        heaviest = max(st.waiters, key=lambda w: (self._weight(st, w.share), w.seq))
        if self._weight(st, heaviest.share) <= mine:
            return False
        victim = max((w for w in st.waiters if w.share == heaviest.share), key=lambda w: w.seq)
        st.waiters.remove(victim)
        if not victim.fut.done():
            victim.fut.set_exception(self._refuse(name, st, "queue full"))
        return True

    def release(self, ticket: Ticket, tokens: int = 0) -> None:
        """Free a slot, adapting the limit to how long the request took (per embedded token
        when it reports any); then hand free slots to waiters."""
        st = self.classes[ticket.name]
        st.give_back(ticket.share)
        if st.inflight_max > 0:
            now = time.monotonic()
            took = now - ticket.started
            slow: bool | None = None
            if st.target_s > 0:
                # Embedded tokens are work, not a sign of overload: each earns its own time.
                slow = took > st.target_s + tokens * st.token_target_s
            if slow:
                if ticket.started >= st.last_cut:  # it ran under the current limit: cut once
                    st.limit = max(1.0, st.limit * DECREASE)
                    st.last_cut = now
            elif slow is not None:
                st.limit = min(float(st.inflight_max), st.limit + 1.0 / st.limit)
        self._hand_over(st)

    @staticmethod
    def _pick(st: ClassState) -> _Waiter:
        return min(
            st.waiters,
            key=lambda w: (st.by_tenant[w.share.tenant], st.by_principal[w.share.principal], w.seq),
        )

    def _hand_over(self, st: ClassState) -> None:
        while st.waiters and st.has_slot():
            w = self._pick(st)
            st.waiters.remove(w)
            if not w.fut.done():
                st.take(w.share)
                w.fut.set_result(None)

    @staticmethod
    def _forget(st: ClassState, w: _Waiter) -> None:
        if w in st.waiters:
            st.waiters.remove(w)

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


class AddressGate:
    """Before the key lookup: at most ``per_address`` requests of one client address are being
    authenticated at once (each a worker-thread lookup), so one address cannot fill the thread
    pool with key lookups; the others wait their turn (in arrival order)."""

    def __init__(self, per_address: int) -> None:
        self.per_address = per_address
        self._busy: Counter[str] = Counter()
        self._waiting: dict[str, list[asyncio.Future[None]]] = {}

    async def enter(self, address: str) -> None:
        if self.per_address <= 0:
            return
        if self._busy[address] < self.per_address and not self._waiting.get(address):
            self._busy[address] += 1
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(address, []).append(fut)
        try:
            await fut
        except BaseException:
            if fut.done() and not fut.cancelled():
                self.leave(address)
            else:
                queue = self._waiting.get(address, [])
                if fut in queue:
                    queue.remove(fut)
            raise

    def leave(self, address: str) -> None:
        if self.per_address <= 0:
            return
        queue = self._waiting.get(address)
        while queue:
            fut = queue.pop(0)
            if not fut.done():
                fut.set_result(None)  # the place passes on: _busy stays the same
                return
        self._waiting.pop(address, None)
        self._busy[address] -= 1
        if self._busy[address] <= 0:
            del self._busy[address]


class RefusalHold:
    """Held refusals (D-283): a client that keeps sending after it was told to wait (429) gets
    each further 429 only after ``hold_s``.

    A refused request still costs the event loop its parsing, the middleware and a response;
    a closed-loop flood that is refused at once comes straight back, so ~256 connections of one
    key made ~1,000 refusals a second and took the loop (and the GIL) from every other tenant.
    Held, each of its connections carries at most one request per ``hold_s``. The first refusals
    of a client (a bucket of ``2 * free_per_s`` refilled at ``free_per_s``) are answered at
    once: a client that backs off as Retry-After says never waits. A hold costs a sleeping
    task, no slot and no thread. Clients are counted by address, at most ``max_clients`` of them
    (the least recently refused are forgotten first).
    """

    def __init__(self, hold_s: float, free_per_s: float, max_clients: int = 10_000) -> None:
        self.hold_s = hold_s
        self.rate = free_per_s
        self.burst = max(1.0, 2 * free_per_s)
        self.max_clients = max_clients
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()
        self.held = 0

    def delay(self, who: str, now: float | None = None) -> float:
        """Seconds to hold this refusal of ``who`` before it is sent (0: at once)."""
        if self.hold_s <= 0:
            return 0.0
        now = time.monotonic() if now is None else now
        tokens, at = self._buckets.pop(who, (self.burst, now))
        tokens = min(self.burst, tokens + (now - at) * self.rate)
        held = tokens < 1.0
        self._buckets[who] = (tokens if held else tokens - 1.0, now)
        while len(self._buckets) > self.max_clients:
            self._buckets.popitem(last=False)
        if held:
            self.held += 1
            return self.hold_s
        return 0.0
