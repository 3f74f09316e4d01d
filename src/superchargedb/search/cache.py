"""An ACL-safe, byte-bounded result cache (D-28).

The key is a sha256 over everything that can change a result or who may see it: the endpoint,
every query field, the clamped scopes, the principal's id, groups, perms and tier, the generation
of every scope involved (read at request start) and the model/index versions. A write bumps the
generations of the written scope and its ancestors inside its transaction, so a search over
``acme/alpha`` is invalidated by a write in ``acme/alpha/x`` but one over ``acme/beta`` is not.
"""

from __future__ import annotations

import hashlib
from typing import Any

import orjson

from ..lru import BytesLRU
from ..types import Principal


def cache_key(
    endpoint: str,
    query: dict[str, Any],
    effective_scopes: list[str],
    principal: Principal,
    generations: dict[str, int],
    versions: str,
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
