"""Small thread-safe LRU maps for per-query values: the query vectors of the embedders and the
embedding executor, and the query token counts of the searcher."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

import numpy as np

Vectors = np.ndarray
K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class Lru(Generic[K, V]):
    """The ``size`` most recently used values; 0 disables it. Thread-safe."""

    def __init__(self, size: int) -> None:
        self._size = max(0, size)
        self._items: OrderedDict[K, V] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._items)

    def get_or(self, key: K, make: Callable[[], V]) -> V:
        """The cached value of ``key``, else ``make()`` (cached). ``make`` runs unlocked."""
        with self._lock:
            if key in self._items:
                self._items.move_to_end(key)
                return self._items[key]
        value = make()
        if self._size:
            with self._lock:
                self._items[key] = value
                self._items.move_to_end(key)
                while len(self._items) > self._size:
                    self._items.popitem(last=False)
        return value


class QueryVectorCache(Lru[str, Vectors]):
    """Query vectors per text; each array is read-only: every caller shares it."""

    def get_or_embed(self, text: str, embed: Callable[[list[str]], Vectors]) -> Vectors:
        def make() -> Vectors:
            vec = embed([text])[0].copy()
            vec.flags.writeable = False
            return vec

        return self.get_or(text, make)
