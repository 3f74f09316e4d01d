"""The rendered-preview cache: PNG bytes keyed by what was drawn, never by who asked.

A key is the blob's sha256, the page, the box and the output size: everything the picture
depends on and nothing about the caller, so two principals who may both read a Unit share one
rendering. That is safe only because the cache sits *behind* authorization: the route resolves
the Unit for the caller first (the same 404 as a missing id when it may not read it) and only
then asks here, so holding a key grants nothing. Bounded in bytes (least recently used out).
"""

from __future__ import annotations

from .lru import BytesLRU


class RenderCache(BytesLRU):
    """Rendered PNGs keyed by (blob sha256, mime, page, box, size); ``max_bytes`` 0: off."""

    get = BytesLRU.get_bytes
    put = BytesLRU.put_bytes
