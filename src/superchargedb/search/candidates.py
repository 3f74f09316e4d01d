"""The dense leg's readable candidates, cached per predicate, with their vectors for exact scans.

Resolving "which Units may this caller read here" is a catalog scan; scoring a few thousand of
them exactly needs their vectors out of the index. Both are the same for every query with the
same scope/ACL/filter predicate until the next write, so they are cached together:

* the key holds the predicate, its parameters (which include the applied outbox watermark) and
  the scope generations (ACL updates bump them without outbox ops), so any write that could change
  the set makes old entries unreachable; they age out of the byte-bounded LRU;
* a set small enough for the planner's exact scan also keeps its rows as one float32 matrix and
  their norms, so an exact query is a single BLAS matrix-vector product (no per-query copy of the
  rows out of USearch, no Python loop over candidates). Scores are the f32 cosine of the stored
  f16 rows, ties by key: the result equals ``VectorStore.search_planned``'s exact plan.
"""

from __future__ import annotations

import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..storage.vectors import VectorStore


@dataclass
class Candidates:
    ids: np.ndarray  # sorted, unique uint64 catalog rowids (= vector keys)
    rows: np.ndarray | None = None  # float32 (n, dim) of keys, for exact scans
    norms: np.ndarray | None = None
    keys: np.ndarray | None = None  # the ids the index held when rows were taken
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def nbytes(self) -> int:
        extra = 0 if self.rows is None else self.rows.nbytes + 12 * len(self.rows)
        return int(self.ids.nbytes) + extra


class CandidateCache:
    """LRU of :class:`Candidates` bounded by bytes (ids + matrices), dropping stale epochs.

    Keys hold the applied outbox watermark, so after any write every older entry is unreachable.
    Left to age out of the LRU, those dead entries (up to ``max_bytes`` of id arrays and float32
    matrices, one set per principal and predicate per write) filled the cache under a steady
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

    def grew(self, key: tuple[Any, ...], c: Candidates, before: int) -> None:
        """Account for a matrix attached to a cached entry (evicting others if needed)."""
        with self._lock:
            if self._data.get(key) is not c:
                return
            self._size += c.nbytes - before
            if c.nbytes > self.max_bytes // 4:
                self._drop(key)
            self._evict()


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


def exact_top(
    store: VectorStore,
    cache: CandidateCache,
    key: tuple[Any, ...],
    c: Candidates,
    plane: str,
    q: np.ndarray,
    k: int,
) -> list[tuple[int, float]] | None:
    """Exact top-k over the cached matrix (built on first use); None when it cannot be built
    (a candidate left the index since: the caller falls back to the store's own planner)."""
    if c.rows is None:
        with c.lock:
            if c.rows is None:
                before = c.nbytes
                try:
                    rows = store.get(plane, c.ids)
                except KeyError:
                    return None
                norms = np.sqrt(np.einsum("ij,ij->i", rows, rows))
                c.norms = np.where(norms == 0.0, 1.0, norms).astype(np.float32)
                c.keys = c.ids
                c.rows = rows
                cache.grew(key, c, before)
    assert c.rows is not None and c.norms is not None and c.keys is not None
    qn = np.asarray(q, dtype=np.float32).reshape(-1)
    norm = float(np.linalg.norm(qn))
    if k <= 0 or norm == 0.0 or not np.isfinite(norm) or len(c.keys) == 0:
        return []
    scores = (c.rows @ (qn / norm)) / c.norms
    if len(scores) > k:
        # Only rows that can reach the top k (ties at the k-th score included) get sorted.
        kth = np.partition(scores, -k)[-k]
        pick = np.flatnonzero(scores >= kth)
        return VectorStore._top(c.keys[pick], scores[pick], k)
    return VectorStore._top(c.keys, scores, k)


def use_exact(n_cand: int, n_plane: int, exact_max: int, exact_fraction: float) -> bool:
    """The planner's rule (VectorStore.search_planned): exact scan for small candidate sets."""
    return n_cand <= exact_max or n_cand <= exact_fraction * n_plane
