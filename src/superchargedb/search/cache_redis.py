"""The result cache in Valkey/Redis, shared by every API process of a deployment (D-191).

Valkey holds copies, never the truth. An entry's key is :func:`~.cache.cache_key`, which hashes
the request's whole read filter, the principal, and the generation of every scope involved as
the catalog had them at request start. A write bumps those generations in its own transaction,
so once it commits every process computes a new key for the reads it affects: the old entry is
not deleted, it is simply never asked for again, and expires (``ttl_s``). Nothing here decides
validity, so losing Valkey loses speed, not correctness: an unreachable store is a miss (and is
left alone for a few seconds), never an error.

Keys are namespaced by ``prefix`` and by a hash of the deployment's audit key, so two
deployments sharing one Valkey cannot read each other's entries even with the same prefix.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from typing import Any

import orjson

from ..errors import UnavailableError

log = logging.getLogger(__name__)

# After a failed call the store is skipped this long: a down cache must not add its timeout
# to every request.
BACKOFF_S = 5.0


class RedisResultCache:
    """``get``/``put`` like :class:`~.cache.ResultCache`, with the entries in Valkey."""

    def __init__(
        self,
        url: str,
        deployment_key: bytes,
        *,
        prefix: str = "scdb:rc:",
        ttl_s: int = 600,
        max_bytes: int = 64 * 1024 * 1024,
        timeout_s: float = 0.25,
    ) -> None:
        try:
            import redis
        except ImportError as exc:  # pragma: no cover - depends on the install
            raise UnavailableError(
                "SCDB_RESULT_CACHE=redis needs the redis client: pip install 'superchargedb[redis]'"
            ) from exc
        self._errors: tuple[type[BaseException], ...] = (redis.RedisError, OSError)
        self.client: Any = redis.Redis.from_url(
            url, socket_timeout=timeout_s, socket_connect_timeout=timeout_s
        )
        ns = hashlib.sha256(b"scdb result cache\0" + deployment_key).hexdigest()[:16]
        self.prefix = f"{prefix}{ns}:"
        self.ttl_s = ttl_s
        # 0 turns caching off (as for the in-process cache); one entry at most a quarter.
        self.max_bytes = max_bytes
        self.nbytes = 0  # nothing is held in this process
        self.hits = 0
        self.misses = 0
        self.errors = 0
        self._down_until = 0.0
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return 0

    def _usable(self) -> bool:
        return self.max_bytes > 0 and time.monotonic() >= self._down_until

    def _failed(self, exc: BaseException) -> None:
        with self._lock:
            self.errors += 1
            self._down_until = time.monotonic() + BACKOFF_S
        log.warning("result cache store unreachable, skipped for %.0f s: %s", BACKOFF_S, exc)

    def get(self, key: str) -> Any | None:
        raw = None
        if self._usable():
            try:
                raw = self.client.get(self.prefix + key)
            except self._errors as exc:
                self._failed(exc)
        with self._lock:
            if raw is None:
                self.misses += 1
            else:
                self.hits += 1
        return None if raw is None else orjson.loads(raw)

    def put(self, key: str, value: Any) -> None:
        if not self._usable():
            return
        raw = orjson.dumps(value)
        if len(raw) > self.max_bytes // 4:
            return
        try:
            self.client.set(self.prefix + key, raw, ex=self.ttl_s)
        except self._errors as exc:
            self._failed(exc)

    def clear(self) -> None:
        """Drop this deployment's entries (tests, operators); never needed for correctness."""
        try:
            for k in self.client.scan_iter(match=self.prefix + "*", count=1000):
                self.client.delete(k)
        except self._errors as exc:
            self._failed(exc)

    def close(self) -> None:
        self.client.close()
