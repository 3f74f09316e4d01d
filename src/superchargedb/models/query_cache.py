"""The per-text LRU of query vectors shared by the embedders and the embedding executor."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable

import numpy as np

Vectors = np.ndarray


class QueryVectorCache:
    """``size`` most recently used query vectors; 0 disables it. Thread-safe."""

    def __init__(self, size: int) -> None:
        self._size = max(0, size)
        self._items: OrderedDict[str, Vectors] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._items)

    def get_or_embed(self, text: str, embed: Callable[[list[str]], Vectors]) -> Vectors:
        """The cached vector of ``text``, else ``embed([text])[0]`` (cached). The array is
        read-only: every caller shares it."""
        with self._lock:
            hit = self._items.get(text)
            if hit is not None:
                self._items.move_to_end(text)
                return hit
        vec = embed([text])[0].copy()
        vec.flags.writeable = False
        if self._size:
            with self._lock:
                self._items[text] = vec
                self._items.move_to_end(text)
                while len(self._items) > self._size:
                    self._items.popitem(last=False)
        return vec
