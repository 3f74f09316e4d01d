"""An ACL-safe, byte-bounded result cache (D-28).

The key is a sha256 over everything that can change a result or who may see it: the endpoint,
every query field, the clamped scopes, the principal's id, groups, perms and tier, the request's
whole read filter, the generation of every scope involved (read at request start) and the
model/index versions. A write bumps the generations of the written scope and its ancestors
inside its transaction, so a search over ``acme/alpha`` is invalidated by a write in
``acme/alpha/x`` but one over ``acme/beta`` is not. The entries live in this process
(:class:`ResultCache`) or in Valkey for every API process (``cache_redis.py``, D-191): the same
keys either way.
"""

from __future__ import annotations

import hashlib
from dataclasses import fields
from typing import TYPE_CHECKING, Any, Protocol

import orjson

from ..lru import BytesLRU
from ..readfilter import ReadFilter
from ..types import Principal

if TYPE_CHECKING:
    from ..settings import Settings


class Cache(Protocol):
    """What the service needs of a result cache, wherever its entries live."""

    max_bytes: int  # 0: caching off
    hits: int
    misses: int

    @property
    def nbytes(self) -> int: ...

    def get(self, key: str) -> Any | None: ...

    def put(self, key: str, value: Any) -> None: ...


def filter_identity(rf: ReadFilter) -> dict[str, Any]:
    """Every field of the read filter, sets sorted: two filters admitting different Units never
    share an identity."""
    out: dict[str, Any] = {}
    for f in fields(rf):
        v = getattr(rf, f.name)
        out[f.name] = sorted(v) if isinstance(v, frozenset) else v
    return out


def cache_key(
    endpoint: str,
    query: dict[str, Any],
    effective_scopes: list[str],
    principal: Principal,
    generations: dict[str, int],
    versions: str,
    rf: ReadFilter | None = None,
) -> str:
    material = {
        "endpoint": endpoint,
        "query": query,
        "scopes": sorted(effective_scopes),
        "principal": principal.id,
        "groups": sorted(principal.groups),
        "perms": sorted(principal.perms),
        "tier": principal.tier,
        # Without the generations a re-permission would serve stale entries.
        "gens": sorted(generations.items()),
        "versions": versions,
        "filter": None if rf is None else filter_identity(rf),
    }
    return hashlib.sha256(orjson.dumps(material, option=orjson.OPT_SORT_KEYS)).hexdigest()


class ResultCache(BytesLRU):
    """Serialized responses, bounded by their serialized size."""

    def get(self, key: str) -> Any | None:
        raw = self.get_bytes(key)
        return None if raw is None else orjson.loads(raw)

    def put(self, key: str, value: Any) -> None:
        if self.max_bytes <= 0:  # caching off: do not serialize for nothing
            return
        # orjson's output keeps the buffer it grew while writing, several times its length
        # (measured: 190 KB held for 20 KB of JSON); the bound counts len(raw), so keep an
        # exact-size copy, or the cache holds several times its bound.
        self.put_bytes(key, bytes(memoryview(orjson.dumps(value))))


def make_result_cache(s: Settings, deployment_key: bytes) -> Cache:
    """The in-process LRU, or the shared one in Valkey (``SCDB_RESULT_CACHE=redis``)."""
    if s.result_cache == "memory":
        return ResultCache(s.cache_max_bytes)
    if not s.redis_url:
        from ..errors import ValidationError

        raise ValidationError("SCDB_RESULT_CACHE=redis needs SCDB_REDIS_URL", field="result_cache")
    from .cache_redis import RedisResultCache

    return RedisResultCache(
        s.redis_url,
        deployment_key,
        prefix=s.redis_cache_prefix,
        ttl_s=s.redis_cache_ttl_s,
        max_bytes=s.cache_max_bytes,
    )
