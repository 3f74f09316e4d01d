"""The dense leg's readable candidates, cached per predicate.

Resolving "which Units may this caller read here" is a mask over the lexical index's signatures
(or a catalog scan); it is the same for every query with the same scope/ACL/filter predicate
until the next write, so the sorted ids are cached. The key holds the predicate, its parameters
(which include the applied outbox watermark) and the scope generations (ACL updates bump them
without outbox ops), so any write that could change the set makes old entries unreachable.

The vectors are not cached here: the store's exact scan gathers the candidates' rows from its f16
row mirror (``storage/vector_rows.py``) as fast as a cached f32 matrix was multiplied.
"""

from __future__ import annotations

import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass
class Candidates:
    ids: np.ndarray  # sorted, unique uint64 catalog rowids (= vector keys)

    @property
    def nbytes(self) -> int:
        return int(self.ids.nbytes)


class CandidateCache:
    """LRU of :class:`Candidates` bounded by bytes, dropping stale epochs.

    Keys hold the applied outbox watermark, so after any write every older entry is unreachable.
    Left to age out of the LRU, those dead entries (up to ``max_bytes`` of id arrays, one set
    per principal and predicate per write) filled the cache under a steady
    ingest and kept it full: the load test's RSS grew while no live entry was reused. ``put``
    with a newer ``epoch`` (the watermark) therefore drops every entry of an older one, and a
    late ``put`` from a query that read an older watermark is not cached at all.
    """

    def __init__(self, max_bytes: int = 128 * 2**20) -> None:
        self.max_bytes = max_bytes
        self._data: OrderedDict[tuple[Any, ...], Candidates] = OrderedDict()
        self._epochs: dict[tuple[Any, ...], int] = {}
        self._epoch = 0
        self._size = 0
        self._lock = threading.Lock()

    @property
    def nbytes(self) -> int:
        return self._size

    def __len__(self) -> int:
        return len(self._data)

    def get(self, key: tuple[Any, ...]) -> Candidates | None:
        with self._lock:
            c = self._data.get(key)
            if c is not None:
                self._data.move_to_end(key)
            return c

    def put(self, key: tuple[Any, ...], c: Candidates, epoch: int = 0) -> None:
        with self._lock:
            if epoch < self._epoch:
                return  # built from an older watermark: no later query asks for it
            if epoch > self._epoch:
                self._epoch = epoch
                for k in [k for k, e in self._epochs.items() if e < epoch]:
                    self._drop(k)
            self._drop(key)
            if c.nbytes > self.max_bytes // 4:
                return
            self._data[key] = c
            self._epochs[key] = epoch
            self._size += c.nbytes
            self._evict()

    def _drop(self, key: tuple[Any, ...]) -> None:
        old = self._data.pop(key, None)
        self._epochs.pop(key, None)
        if old is not None:
            self._size -= old.nbytes

    def _evict(self) -> None:
        while self._size > self.max_bytes and self._data:
            k, ev = self._data.popitem(last=False)
            self._epochs.pop(k, None)
            self._size -= ev.nbytes


def readable_ids(
    conn: sqlite3.Connection, where: str, params: Sequence[object], plane: str
) -> np.ndarray:
    """Sorted unique rowids matching the visibility predicate in one plane."""
    cur = conn.cursor()
    cur.row_factory = None  # plain tuples: no Row object per id
    rows = cur.execute(
        f"SELECT u.id FROM units u WHERE {where} AND u.plane = ? ORDER BY u.id",
        (*params, plane),
    ).fetchall()
    return np.fromiter((r[0] for r in rows), dtype=np.uint64, count=len(rows))
