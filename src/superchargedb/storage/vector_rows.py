"""f16 copies of one plane's vectors in a numpy array, addressed by key: the exact scan's rows.

USearch keeps its vectors inside the graph, and copying them out for an exact scan over a
filtered candidate set (``get_many`` plus a join) cost 0.6 ms for 1,000 rows and 6 ms for 10,000
per search, most of the dense leg of a cold 1 %-filter search; a gather from this array costs
0.05 / 0.5 ms. Rows are copied from the index itself after each add, so they are bit-identical to
what the index scores and every plan ranks the same.

Keys are catalog rowids, dense from 1, so a key's row is found through a direct-address table
(4 bytes a key). A key far beyond the plane's size (a caller with sparse custom keys) would make
that table huge: the mirror then reports that it cannot hold it, and the store falls back to
copying rows out of the index.
"""

from __future__ import annotations

import numpy as np

# The key table may reach this many entries per live row (plus _MIN_KEYS) before the mirror
# gives up: rowids are dense, but deletes leave holes.
_KEYS_PER_ROW = 4
_MIN_KEYS = 1 << 20
_GROW = 1.5


class RowMirror:
    """Rows by key; mutated under the store's write lock, read under its read lock."""

    def __init__(self, dim: int, capacity: int = 0) -> None:
        self.dim = dim
        self.rows = np.empty((capacity, dim), dtype=np.float16)
        self.used = 0  # rows handed out (removed keys leave theirs until a rebuild)
        self.live = 0
        self.slot = np.full(0, -1, dtype=np.int32)  # key -> row, -1: absent

    @property
    def nbytes(self) -> int:
        return int(self.rows.nbytes + self.slot.nbytes)

    def put(self, keys: np.ndarray, rows: np.ndarray) -> bool:
        """Add ``rows`` (f16, unit norm) under ``keys`` (absent, distinct); False when a key is
        too large for the table (the mirror is then unusable and must be dropped)."""
        if len(keys) == 0:
            return True
        top = int(keys.max())
        if top >= _KEYS_PER_ROW * (self.live + len(keys)) + _MIN_KEYS:
            return False
        if top >= len(self.slot):
            grown = np.full(max(top + 1, int(len(self.slot) * _GROW)), -1, dtype=np.int32)
            grown[: len(self.slot)] = self.slot
            self.slot = grown
        end = self.used + len(keys)
        if end > len(self.rows):
            grown_rows = np.empty((max(end, int(len(self.rows) * _GROW)), self.dim), np.float16)
            grown_rows[: self.used] = self.rows[: self.used]
            self.rows = grown_rows
        self.rows[self.used : end] = rows
        self.slot[keys.astype(np.int64)] = np.arange(self.used, end, dtype=np.int32)
        self.used, self.live = end, self.live + len(keys)
        return True

    def drop(self, key: int) -> None:
        if 0 <= key < len(self.slot) and self.slot[key] >= 0:
            self.slot[key] = -1
            self.live -= 1

    def find(self, keys: np.ndarray) -> np.ndarray:
        """Each key's row (-1 when absent)."""
        k = keys.astype(np.int64, copy=False)
        out = np.full(len(k), -1, dtype=np.int32)
        inside = (k >= 0) & (k < len(self.slot))  # a uint64 key >= 2**63 wraps negative
        out[inside] = self.slot[k[inside]]
        return out

    def present(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The keys of ``keys`` held here (in order) and their rows, (n, dim) f16."""
        at = self.find(keys)
        ok = at >= 0
        return keys[ok], self.rows.take(at[ok], axis=0)
