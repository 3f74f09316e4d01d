"""Rate limits: token buckets per API key and per client address (D-56).

The per-address limit runs BEFORE any key lookup, and failed authentications drain a separate,
much smaller per-address bucket, so brute-forcing keys is throttled without touching the
catalog. ``MemoryLimiter`` keeps buckets in process (one process owns the data dir);
``RedisLimiter`` keeps them in the shared store (``SCDB_REDIS_URL``) so that every server process
and host draws from the same bucket: per-process buckets multiply the limit by the process count.
"""

from __future__ import annotations

import math
import threading
import time
from collections import OrderedDict
from typing import TYPE_CHECKING, Any, Protocol

from .errors import RateLimitedError, UnavailableError

if TYPE_CHECKING:
    from .settings import Settings


class Limiter(Protocol):
    # True when a call waits on the network: the API then calls it off the event loop.
    remote: bool

    def take(self, bucket: str, rate: float, burst: float, cost: float = 1.0) -> float:
        """Take ``cost`` tokens; returns 0 when allowed, else the seconds to wait."""

    def peek(self, bucket: str, rate: float, burst: float) -> float:
        """Seconds until one token is available (0 when one is); takes nothing."""


class MemoryLimiter:
    """Token buckets in an LRU bounded by ``max_buckets`` (memory stays flat under floods)."""

    remote = False

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
        now = time.monotonic()
        with self._lock:
            tokens, last = self._buckets.get(bucket, (burst, now))
        tokens = min(burst, tokens + (now - last) * rate)
        return 0.0 if tokens >= 1 else (1 - tokens) / rate if rate > 0 else math.inf


# One bucket is a hash {tokens, ts} refilled lazily. The script runs atomically in Redis, so
# concurrent takes from many processes never both spend the last token. Time comes from the
# Redis server, so clocks of the API hosts need not agree. The key expires once the bucket
# would be full again: an absent key IS a full bucket, so memory is bounded by the number of
# buckets active in the last burst/rate seconds, not by every address ever seen.
_TAKE = """
local rate = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local cost = tonumber(ARGV[3])
local peek = ARGV[4] == '1'
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1e6
local cur = redis.call('HMGET', KEYS[1], 'tokens', 'ts')
local tokens = tonumber(cur[1])
local last = tonumber(cur[2])
if tokens == nil or last == nil then
  tokens = burst
  last = now
end
tokens = math.min(burst, tokens + math.max(0, now - last) * rate)
local wait = 0
if tokens >= cost then
  if not peek then tokens = tokens - cost end
else
  if rate > 0 then wait = (cost - tokens) / rate else wait = -1 end
end
if not peek then
  redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'ts', tostring(now))
  local ttl = 60000
  if rate > 0 then ttl = math.ceil((burst - tokens) / rate * 1000) + 1000 end
  redis.call('PEXPIRE', KEYS[1], ttl)
end
return tostring(wait)
"""


class RedisLimiter:
    """Token buckets in Redis, one Lua script per check (atomic across processes and hosts).

    When Redis cannot be reached the request fails closed with 503 ``unavailable``: allowing it
    would switch brute-force protection off exactly when the store is under attack or down.
    """

    remote = True

    def __init__(self, url: str, prefix: str = "scdb:rl:", timeout_s: float = 0.5) -> None:
        try:
            import redis
        except ImportError as exc:  # pragma: no cover - depends on the install
            raise UnavailableError(
                "SCDB_REDIS_URL is set but the redis client is not installed: "
                "pip install 'superchargedb[redis]'"
            ) from exc
        self._redis_errors: tuple[type[BaseException], ...] = (redis.RedisError, OSError)
        self.client: Any = redis.Redis.from_url(
            url, socket_timeout=timeout_s, socket_connect_timeout=timeout_s
        )
        self.prefix = prefix
        self._script = self.client.register_script(_TAKE)

    def _run(self, bucket: str, rate: float, burst: float, cost: float, peek: bool) -> float:
        try:
            raw = self._script(
                keys=[self.prefix + bucket], args=[rate, burst, cost, "1" if peek else "0"]
            )
        except self._redis_errors as exc:
            raise UnavailableError(
                "the rate-limit store is unreachable; retry shortly", retry_after=1
            ) from exc
        wait = float(raw)
        return math.inf if wait < 0 else wait

    def take(self, bucket: str, rate: float, burst: float, cost: float = 1.0) -> float:
        return self._run(bucket, rate, burst, cost, peek=False)

    def peek(self, bucket: str, rate: float, burst: float) -> float:
        return self._run(bucket, rate, burst, 1.0, peek=True)

    def close(self) -> None:
        self.client.close()


def make_limiter(settings: Settings) -> MemoryLimiter | RedisLimiter:
    """The shared store when ``SCDB_REDIS_URL`` is set, else in-process buckets."""
    if settings.redis_url:
        return RedisLimiter(settings.redis_url, settings.redis_prefix)
    return MemoryLimiter()


class RefusedKeys:
    """Keys refused by their principal's bucket, until the bucket has a token again (D-288).

    A flood within one key's rate limit made each of its many refusals cost a catalog lookup
    and a thread hop (and, with a shared store, a round trip) before the bucket said no. The
    first refusal is remembered here, in process, by the full key's digest and for the wait the
    bucket gave; until then the key is refused from memory. It only ever refuses, and only the
    key's holder; at most ``max_keys`` keys (the oldest are forgotten first).
    """

    def __init__(self, max_keys: int = 10_000) -> None:
        self._until: OrderedDict[str, float] = OrderedDict()
        self._max = max_keys
        self._lock = threading.Lock()

    def wait(self, digest: str) -> float:
        """Seconds this key is still refused for (0: look it up)."""
        with self._lock:
            until = self._until.get(digest)
        left = until - time.monotonic() if until is not None else 0.0
        return left if left > 0 else 0.0

    def refuse(self, digest: str, wait: float) -> None:
        if not math.isfinite(wait):
            return  # a zero rate: the bucket refuses each time anyway
        with self._lock:
            self._until.pop(digest, None)
            self._until[digest] = time.monotonic() + wait
            while len(self._until) > self._max:
                self._until.popitem(last=False)


def limited(wait: float, what: str) -> RateLimitedError:
    retry = max(1, math.ceil(wait)) if math.isfinite(wait) else 60
    return RateLimitedError(
        f"rate limit exceeded ({what}); retry after {retry} s", retry_after=retry
    )
