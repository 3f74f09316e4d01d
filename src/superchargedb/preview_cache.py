"""The rendered-preview cache: PNG bytes keyed by what was drawn, never by who asked.

A key is the blob's sha256, the page, the box and the output size: everything the picture
depends on and nothing about the caller, so two principals who may both read a Unit share one
rendering. That is safe only because the cache sits *behind* authorization: the route resolves
the Unit for the caller first (the same 404 as a missing id when it may not read it) and only
then asks here, so holding a key grants nothing. Bounded in bytes (least recently used out).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable


class RenderCache:
    """LRU of rendered PNGs, bounded by the sum of their sizes; ``max_bytes`` 0 turns it off."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._data: OrderedDict[Hashable, bytes] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    @property
    def nbytes(self) -> int:
        return self._bytes

    def __len__(self) -> int:
        return len(self._data)

    def get(self, key: Hashable) -> bytes | None:
        with self._lock:
            png = self._data.get(key)
            if png is None:
                self.misses += 1
                return None
            self._data.move_to_end(key)
            self.hits += 1
            return png

    def put(self, key: Hashable, png: bytes) -> None:
        # One huge page must not flush everything else: an entry takes at most a quarter.
        if self.max_bytes <= 0 or len(png) > self.max_bytes // 4:
            return
        with self._lock:
            old = self._data.pop(key, None)
            if old is not None:
                self._bytes -= len(old)
            self._data[key] = png
            self._bytes += len(png)
            while self._bytes > self.max_bytes and self._data:
                _, ev = self._data.popitem(last=False)
                self._bytes -= len(ev)

    def clear(self) -> None:
        with self._lock:
            self._data.clear()
            self._bytes = 0
