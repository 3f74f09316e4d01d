"""A thread-safe LRU of byte strings bounded by the sum of their lengths.

The result cache (JSON of search/answer responses) and the preview cache (rendered PNGs) both
need the same thing: a bound that counts what is actually held, and no single entry big enough
to flush everything else (an entry takes at most a quarter of the bound).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable


class BytesLRU:
    """LRU bounded by the sum of its values' lengths; ``max_bytes`` 0 turns it off."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._data: OrderedDict[Hashable, bytes] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    @property
    def nbytes(self) -> int:
        """Bytes held (at most ``max_bytes``)."""
        return self._bytes

    def __len__(self) -> int:
        return len(self._data)

    def get_bytes(self, key: Hashable) -> bytes | None:
        with self._lock:
            raw = self._data.get(key)
            if raw is None:
                self.misses += 1
                return None
            self._data.move_to_end(key)
            self.hits += 1
            return raw

    def put_bytes(self, key: Hashable, raw: bytes) -> None:
        if self.max_bytes <= 0 or len(raw) > self.max_bytes // 4:
            return
        with self._lock:
            old = self._data.pop(key, None)
            if old is not None:
                self._bytes -= len(old)
            self._data[key] = raw
            self._bytes += len(raw)
            while self._bytes > self.max_bytes and self._data:
                _, ev = self._data.popitem(last=False)
                self._bytes -= len(ev)

    def clear(self) -> None:
        with self._lock:
            self._data.clear()
            self._bytes = 0
