"""Rate limits: token buckets per API key and per client address (DECISIONS Part 2, "Rate limits").

The per-address limit runs BEFORE any key lookup, and failed authentications drain a separate,
much smaller per-address bucket, so brute-forcing keys is throttled without touching the
catalog. The embedded store keeps buckets in process (one process owns the data dir); a server
deployment plugs a shared implementation in through the ``Limiter`` Protocol.
"""

from __future__ import annotations

import math
import threading
import time
from collections import OrderedDict
from typing import Protocol

from .errors import RateLimitedError


class Limiter(Protocol):
    def take(self, bucket: str, rate: float, burst: float, cost: float = 1.0) -> float:
        """Take ``cost`` tokens; returns 0 when allowed, else the seconds to wait."""


class MemoryLimiter:
    """Token buckets in an LRU bounded by ``max_buckets`` (memory stays flat under floods)."""

    def __init__(self, max_buckets: int = 100_000) -> None:
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()
        self._max = max_buckets
        self._lock = threading.Lock()

    def take(self, bucket: str, rate: float, burst: float, cost: float = 1.0) -> float:
        now = time.monotonic()
        with self._lock:
            tokens, last = self._buckets.pop(bucket, (burst, now))
            tokens = min(burst, tokens + (now - last) * rate)
            if tokens >= cost:
                self._buckets[bucket] = (tokens - cost, now)
                wait = 0.0
            else:
                self._buckets[bucket] = (tokens, now)
                wait = (cost - tokens) / rate if rate > 0 else math.inf
            while len(self._buckets) > self._max:
                self._buckets.popitem(last=False)
        return wait

    def peek(self, bucket: str, rate: float, burst: float) -> float:
        """Seconds until one token is available (0 when one is)."""
        now = time.monotonic()
        with self._lock:
            tokens, last = self._buckets.get(bucket, (burst, now))
        tokens = min(burst, tokens + (now - last) * rate)
        return 0.0 if tokens >= 1 else (1 - tokens) / rate if rate > 0 else math.inf


def limited(wait: float, what: str) -> RateLimitedError:
    retry = max(1, math.ceil(wait))
    return RateLimitedError(
        f"rate limit exceeded ({what}); retry after {retry} s", retry_after=retry
    )
