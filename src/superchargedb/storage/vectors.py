"""Derived ANN index: one in-memory USearch HNSW index (cosine, f16) per plane.

The catalog is the source of truth: it keeps every Unit's f16 embedding and an outbox of
``(seq, op, plane, key)`` rows. This store applies those ops idempotently, records the last applied
``seq`` per plane, and checkpoints each plane to ``{plane}.{seq}.usearch`` (the ``seq`` in the file
name is the durable watermark, D-44). It never reads SQLite: callers pass ops and vectors.

Vectors are L2-normalized before they are added, so a stored row's dot product is its cosine.
Locking: one mutex serializes writers (apply, checkpoint, rebuild, compact); a readers-writer lock
lets searches run concurrently and excludes them only while an index is mutated or swapped.
"""

from __future__ import annotations

import json
import logging
import os
import re
import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, cast

import numkong as nk
import numpy as np
from usearch.index import Index, MetricKind, ScalarKind

from superchargedb import faults
from superchargedb.errors import UnavailableError
from superchargedb.storage.vector_rows import RowMirror

log = logging.getLogger(__name__)

PLANES: tuple[str, ...] = ("text", "visual", "audio", "doc_visual")
METRIC, DTYPE = "cos", "f16"
_FILE_RE = re.compile(r"^(?P<plane>[a-z_]+)\.(?P<seq>\d+)\.usearch$")
_SHORTLIST_MARGIN = 2e-3  # > the f16 query rounding error of a cosine between unit vectors
_BUILD_BATCH = 4096
# HNSW over-fetch (the search's ef): k / selectivity x this, doubled while short of k hits.
# Filtered, 2: at 1M Units with a 10 % filter the dense leg took 29 -> 14 ms p50 (search p95
# 59 -> 41 ms CPU) for a top-100 recall against the exact scan of 0.975 -> 0.968 (scope) and
# 0.979 -> 0.970 (ACL; min 0.91 -> 0.88), 40 queries each, the doubling included.
# Unfiltered, 4: at 2 the recall fell 0.958 -> 0.932 for 2 ms.
FETCH_FACTOR = 4
FILTERED_FETCH_FACTOR = 2
# Vectors added per hold of the write lock: a search waits for at most one chunk's HNSW inserts
# instead of a whole bulk-import batch's. 384-d inserts run at ~600-800/s on these 2 cores
# (onto 20k vectors), so 256 is ~0.4 s where a 20,000-vector batch held searches for ~30 s; the
# insert rate is the same in chunks of 128, 512 or all at once (within the run-to-run noise).
ADD_CHUNK = 256

Plan = Literal["exact", "hnsw"]


@dataclass(frozen=True)
class VectorOp:
    seq: int
    op: Literal["add", "remove"]
    plane: str
    key: int
    vector: np.ndarray | None  # None for remove, or for an add whose Unit was since deleted


class _RWLock:
    """Writer-preferring readers-writer lock (not reentrant), fair to readers between writes:
    the readers queued when a writer leaves go before the next writer. Without that, a writer
    taking the lock again at once (a bulk import's chunked adds) could hold searches off for
    its whole run."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._readers = 0
        self._writer = False
        self._waiting = 0  # writers waiting
        self._queued = 0  # readers waiting
        self._turn = 0  # readers still to admit before the next writer

    @contextmanager
    def read(self) -> Iterator[None]:
        with self._cond:
            self._queued += 1
            while self._writer or (self._waiting and not self._turn):
                self._cond.wait()
            self._queued -= 1
            if self._turn:
                self._turn -= 1
            self._readers += 1
        try:
            yield
        finally:
            with self._cond:
                self._readers -= 1
                if not self._readers:
                    self._cond.notify_all()

    @contextmanager
    def write(self) -> Iterator[None]:
        with self._cond:
            self._waiting += 1
            while self._writer or self._readers or self._turn:
                self._cond.wait()
            self._waiting -= 1
            self._writer = True
        try:
            yield
        finally:
            with self._cond:
                self._writer = False
                self._turn = self._queued
                self._cond.notify_all()


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _normalize(vectors: np.ndarray) -> np.ndarray:
    v = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(v, axis=-1, keepdims=True)
    return v / np.where(norms == 0.0, 1.0, norms)


def _f32_cosine(rows: np.ndarray, q: np.ndarray, block: int = 1024) -> np.ndarray:
    """Cosine of f16 ``rows`` with the unit f32 ``q``, upcasting ``block`` rows at a time."""
    out = np.empty(len(rows), dtype=np.float32)
    for s in range(0, len(rows), block):
        b = rows[s : s + block].astype(np.float32)
        norms = np.sqrt(np.einsum("ij,ij->i", b, b))
        out[s : s + block] = (b @ q) / np.where(norms == 0.0, 1.0, norms)
    return out


class VectorStore:
    def __init__(
        self,
        index_dir: Path,
        dim: int,
        model_id: str,
        *,
        connectivity: int = 16,
        expansion_add: int = 128,
        expansion_search: int = 64,
        min_fetch: int = 256,
    ) -> None:
        self.index_dir = Path(index_dir)
        self.dim, self.model_id = dim, model_id
        self.connectivity, self.expansion_add = connectivity, expansion_add
        self.expansion_search = expansion_search
        self.min_fetch = min_fetch  # HNSW fetch floor: count > ef raises the effective ef
        self._mutex = threading.Lock()
        self._rw = _RWLock()
        self._ix: dict[str, Index] = {p: self._new_index() for p in PLANES}
        self._applied = dict.fromkeys(PLANES, 0)
        self._durable = dict.fromkeys(PLANES, 0)
        self._changed = dict.fromkeys(PLANES, False)
        self._tombstones = dict.fromkeys(PLANES, 0)
        # f16 rows by key for the exact scans (vector_rows.py); None: the plane's keys do not
        # fit a direct-address table, rows are copied out of the index instead.
        self._rows: dict[str, RowMirror | None] = {p: RowMirror(dim) for p in PLANES}
        self.last_plan: Plan | None = None  # best effort under concurrency; see search_planned

    # ------------------------------------------------------------------ helpers
    def _new_index(self) -> Index:
        return Index(
            ndim=self.dim,
            metric=MetricKind.Cos,
            dtype=ScalarKind.F16,
            connectivity=self.connectivity,
            expansion_add=self.expansion_add,
            expansion_search=self.expansion_search,
        )

    def _mirror(self, index: Index) -> RowMirror | None:
        """A row mirror of ``index`` (keys in order, so the key table grows with the rows)."""
        keys = np.sort(np.asarray(index.keys, dtype=np.uint64))
        mirror = RowMirror(self.dim, capacity=len(keys))
        for s in range(0, len(keys), _BUILD_BATCH):
            block = keys[s : s + _BUILD_BATCH]
            if not mirror.put(block, self._fetch(index, block)):
                return None
        return mirror

    def _check_plane(self, plane: str) -> None:
        if plane not in PLANES:
            raise ValueError(f"unknown plane {plane!r}")

    def _meta(self) -> dict[str, Any]:
        return {"model_id": self.model_id, "dim": self.dim, "metric": METRIC, "dtype": DTYPE}

    def _ensure_meta(self) -> None:
        self.index_dir.mkdir(parents=True, exist_ok=True)
        path = self.index_dir / "meta.json"
        want = self._meta()
        if path.exists():
            try:
                have = json.loads(path.read_text())
            except (OSError, ValueError) as exc:
                raise UnavailableError(
                    f"vector index meta {path} is unreadable ({exc}); run `superchargedb reindex`"
                ) from exc
            diff = {k: (have.get(k), v) for k, v in want.items() if have.get(k) != v}
            if diff:
                raise UnavailableError(
                    f"vector index in {self.index_dir} was built for a different embedding model "
                    f"{diff} (found, expected); run `superchargedb reindex`",
                    mismatch={k: list(v) for k, v in diff.items()},
                )
            return
        tmp = path.with_suffix(".tmp")
        with open(tmp, "w") as fh:
            json.dump({**want, "normalized": True}, fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
        _fsync_dir(self.index_dir)

    def _files(self, plane: str) -> list[tuple[int, Path]]:
        """This plane's checkpoint files, newest (highest seq) first."""
        out = []
        for p in self.index_dir.iterdir():
            m = _FILE_RE.match(p.name)
            if m and m["plane"] == plane:
                out.append((int(m["seq"]), p))
        return sorted(out, reverse=True)

    def _restore(self, path: Path) -> tuple[Index, int]:
        meta = Index.metadata(str(path))  # raises ValueError on a truncated header
        if not meta:
            raise ValueError("no usearch header")
        if (meta["dimensions"], meta["kind_metric"], meta["kind_scalar"]) != (
            self.dim,
            MetricKind.Cos,
            ScalarKind.F16,
        ):
            raise UnavailableError(
                f"{path.name} holds {meta['dimensions']}-d {meta['kind_metric']} "
                f"{meta['kind_scalar']} vectors, expected {self.dim}-d cos f16; "
                "run `superchargedb reindex`"
            )
        index = self._new_index()
        index.load(str(path))  # raises RuntimeError when the body is truncated
        return index, int(meta["count_deleted"])

    # ------------------------------------------------------------------ lifecycle
    def load(self) -> dict[str, int]:
        """Load each plane's newest valid checkpoint; return the durable watermarks.

        A file that fails to restore is renamed to ``*.corrupt`` and the previous one is tried; a
        plane with no valid file starts empty at watermark 0 (the caller rebuilds or replays).
        """
        with self._mutex:
            self._ensure_meta()
            for plane in PLANES:
                (self.index_dir / f"{plane}.tmp").unlink(missing_ok=True)
                index, seq, tomb = self._new_index(), 0, 0
                for file_seq, path in self._files(plane):
                    try:
                        index, tomb = self._restore(path)
                        seq = file_seq
                        break
                    except (ValueError, RuntimeError, OSError, KeyError) as exc:
                        log.warning("vector checkpoint %s is invalid (%s); falling back", path, exc)
                        os.replace(path, path.with_name(path.name + ".corrupt"))
                faults.point("vectors.load.after_restore")
                mirror = self._mirror(index)
                with self._rw.write():
                    self._ix[plane], self._rows[plane] = index, mirror
                self._applied[plane] = self._durable[plane] = seq
                self._changed[plane] = False
                self._tombstones[plane] = tomb
            return dict(self._durable)

    def apply(self, ops: Sequence[VectorOp], *, through: int | None = None) -> None:
        """Apply outbox ops idempotently, in seq order.

        ``through``: the caller asserts every outbox op with ``seq <= through`` (all planes) has
        now been passed, so every plane's applied seq advances to it (lets idle planes' watermarks
        and thus outbox GC move forward).
        """
        ordered = sorted(ops, key=lambda o: o.seq)
        for o in ordered:
            self._check_plane(o.plane)
            if o.op not in ("add", "remove") or not 0 <= o.key < 2**64:
                raise ValueError(f"bad vector op {o.op!r} key {o.key} (seq {o.seq})")
            if o.op == "add" and o.vector is not None and np.shape(o.vector) != (self.dim,):
                raise ValueError(f"op {o.seq}: vector shape {np.shape(o.vector)} != ({self.dim},)")
        with self._mutex:
            i = 0
            while i < len(ordered):
                o = ordered[i]
                j = i + 1
                while o.op == "add" and j < len(ordered) and ordered[j].op == "add":
                    if ordered[j].plane != o.plane:  # batch a run of adds to one plane
                        break
                    j += 1
                todo = [x for x in ordered[i:j] if x.seq > self._applied[o.plane]]
                self._apply_run(o.plane, todo)
                i = j
            if through is not None:
                for plane in PLANES:
                    self._applied[plane] = max(self._applied[plane], through)

    def _apply_run(self, plane: str, run: list[VectorOp]) -> None:
        if not run:
            return
        index = self._ix[plane]
        if run[0].op == "remove":
            faults.point("vectors.apply.before_remove")
            with self._rw.write():
                removed = index.remove(np.uint64(run[0].key))  # missing key -> 0, no error
                mirror = self._rows[plane]
                if mirror is not None:
                    mirror.drop(run[0].key)
            faults.point("vectors.apply.after_remove")
            self._tombstones[plane] += int(removed)
            self._changed[plane] = True
        else:
            new: dict[int, np.ndarray] = {}
            for o in run:
                if o.vector is not None and o.key not in new and not index.contains(o.key):
                    new[o.key] = o.vector
            if new:
                keys = np.fromiter(new.keys(), dtype=np.uint64, count=len(new))
                vecs = _normalize(np.stack(list(new.values())))
                faults.point("vectors.apply.before_add")
                # In chunks, each under its own write lock: a bulk import's 20,000-vector add held
                # it for seconds, and every search waited. A search between two chunks sees part
                # of the run, as one between the whole add and the watermark's move always could
                # (the re-checks hold ids to the watermark); a replay skips the keys added.
                for lo in range(0, len(keys), ADD_CHUNK):
                    k, v = keys[lo : lo + ADD_CHUNK], vecs[lo : lo + ADD_CHUNK]
                    with self._rw.write():
                        index.add(k, v)
                        # The index's own f16 rows, not a rounding of ``v`` of our own.
                        mirror = self._rows[plane]
                        if mirror is not None and not mirror.put(k, self._fetch(index, k)):
                            self._rows[plane] = None
                faults.point("vectors.apply.after_add")
                self._changed[plane] = True
        self._applied[plane] = run[-1].seq

    def checkpoint(self, plane: str | None = None) -> None:
        """Persist dirty planes: tmp file, fsync, rename to ``{plane}.{seq}.usearch``, fsync dir."""
        planes = PLANES if plane is None else (plane,)
        with self._mutex:
            self._ensure_meta()
            for p in planes:
                self._check_plane(p)
                seq = self._applied[p]
                if not self._changed[p] and seq == self._durable[p]:
                    continue
                final = self.index_dir / f"{p}.{seq}.usearch"
                old = self.index_dir / f"{p}.{self._durable[p]}.usearch"
                if not self._changed[p] and old.exists():  # only the watermark moved
                    os.replace(old, final)
                else:
                    faults.point("vectors.checkpoint.before_save")
                    tmp = self.index_dir / f"{p}.tmp"
                    with self._rw.read():  # searches continue; writers are held by _mutex
                        self._ix[p].save(str(tmp))
                    faults.point("vectors.checkpoint.mid_save")
                    fd = os.open(tmp, os.O_RDONLY)
                    try:
                        os.fsync(fd)
                    finally:
                        os.close(fd)
                    faults.point("vectors.checkpoint.after_fsync")
                    os.replace(tmp, final)
                _fsync_dir(self.index_dir)
                faults.point("vectors.checkpoint.after_rename")
                self._durable[p], self._changed[p] = seq, False
                faults.point("vectors.checkpoint.before_cleanup")
                for _, path in self._files(p):
                    if path != final:
                        path.unlink(missing_ok=True)

    def _build(self, items: Iterable[tuple[int, np.ndarray]], *, normalized: bool) -> Index:
        index = self._new_index()
        batch: list[tuple[int, np.ndarray]] = []

        def flush() -> None:
            keys = np.array([k for k, _ in batch], dtype=np.uint64)
            keys, first = np.unique(keys, return_index=True)
            vecs = np.stack([batch[i][1] for i in first])
            keep = ~np.asarray(index.contains(keys), dtype=bool)
            if keep.any():
                index.add(keys[keep], vecs[keep] if normalized else _normalize(vecs[keep]))
            batch.clear()

        for key, vec in items:
            if np.shape(vec) != (self.dim,):
                raise ValueError(f"key {key}: vector shape {np.shape(vec)} != ({self.dim},)")
            batch.append((int(key), vec))
            if len(batch) >= _BUILD_BATCH:
                flush()
        if batch:
            flush()
        return index

    def rebuild(self, plane: str, items: Iterable[tuple[int, np.ndarray]], seq: int) -> None:
        """Replace the plane with a fresh index of ``items``, the catalog's state as of ``seq``."""
        self._check_plane(plane)
        with self._mutex:
            index = self._build(items, normalized=False)
            mirror = self._mirror(index)
            faults.point("vectors.rebuild.mid")
            with self._rw.write():
                self._ix[plane], self._rows[plane] = index, mirror
            self._applied[plane], self._changed[plane], self._tombstones[plane] = seq, True, 0

    def compact(self, plane: str) -> None:
        """Rebuild the plane from its live vectors, dropping tombstones (USearch issue #726)."""
        self._check_plane(plane)
        with self._mutex:
            old = self._ix[plane]
            keys = np.asarray(old.keys, dtype=np.uint64)

            def live() -> Iterator[tuple[int, np.ndarray]]:
                for s in range(0, len(keys), _BUILD_BATCH):
                    block = keys[s : s + _BUILD_BATCH]
                    yield from zip(block.tolist(), self._fetch(old, block), strict=True)

            index = self._build(live(), normalized=True)
            mirror = self._mirror(index)
            faults.point("vectors.compact.before_swap")
            with self._rw.write():
                self._ix[plane], self._rows[plane] = index, mirror
            self._changed[plane], self._tombstones[plane] = True, 0
            faults.point("vectors.compact.after_swap")

    # ------------------------------------------------------------------ introspection
    def applied_seq(self, plane: str) -> int:
        self._check_plane(plane)
        return self._applied[plane]

    def durable_seq(self, plane: str) -> int:
        self._check_plane(plane)
        return self._durable[plane]

    def count(self, plane: str) -> int:
        self._check_plane(plane)
        return len(self._ix[plane])

    def rows_nbytes(self) -> int:
        """Bytes held by the planes' row mirrors (vector_rows.py)."""
        return sum(m.nbytes for m in self._rows.values() if m is not None)

    def tombstones(self, plane: str) -> int:
        self._check_plane(plane)
        return self._tombstones[plane]

    def needs_compaction(self, plane: str) -> bool:
        tomb = self.tombstones(plane)
        return tomb > 0.2 * (tomb + self.count(plane))

    def keys(self, plane: str) -> np.ndarray:
        """Sorted uint64 array of the plane's live keys."""
        self._check_plane(plane)
        with self._rw.read():
            return np.sort(np.asarray(self._ix[plane].keys, dtype=np.uint64))

    def contains(self, plane: str, key: int) -> bool:
        self._check_plane(plane)
        with self._rw.read():
            return bool(self._ix[plane].contains(int(key)))

    @staticmethod
    def _fetch(index: Index, keys: np.ndarray) -> np.ndarray:
        """f16 (n, dim) rows of ``keys`` (all present), copied out of the index.

        ``_compiled.get_many`` skips ``Index.get``'s per-row ``view`` (51 -> 22 ms at 20k keys);
        joining the row buffers beats ``np.concatenate``/``vstack`` (8 vs 15/40 ms).
        """
        if len(keys) == 0:
            return np.empty((0, index.ndim), dtype=np.float16)
        compiled = getattr(index, "_compiled", None)
        if compiled is not None and hasattr(compiled, "get_many"):
            rows = compiled.get_many(keys, ScalarKind.F16)
        else:  # pragma: no cover - future usearch without the private handle
            rows = cast(tuple[np.ndarray, ...], index.get(keys))
        flat = np.frombuffer(b"".join(rows), dtype=np.float16)
        return flat.reshape(len(keys), index.ndim)

    def get(self, plane: str, keys: Sequence[int] | np.ndarray) -> np.ndarray:
        """float32 (n, dim) rows of ``keys``; raises KeyError if any key is absent."""
        self._check_plane(plane)
        ks = np.asarray(keys, dtype=np.uint64).reshape(-1)
        with self._rw.read():
            got, rows = self._present(plane, ks)
            if len(got) != len(ks):
                absent = np.setdiff1d(ks, got)
                raise KeyError(f"keys not in plane {plane!r}: {absent[:10].tolist()}")
            return rows.astype(np.float32)

    def _present(self, plane: str, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The keys of ``keys`` the plane holds (in order) and their f16 rows; read lock held."""
        mirror = self._rows[plane]
        if mirror is not None:
            return mirror.present(keys)
        index = self._ix[plane]
        got = keys[np.asarray(index.contains(keys), dtype=bool).reshape(-1)]
        return got, self._fetch(index, got)

    # ------------------------------------------------------------------ search
    def search(
        self,
        plane: str,
        query: np.ndarray,
        k: int,
        candidates: np.ndarray | None = None,
        *,
        exact_max: int = 20000,
        exact_fraction: float = 0.05,
    ) -> list[tuple[int, float]]:
        hits, self.last_plan = self.search_planned(
            plane, query, k, candidates, exact_max=exact_max, exact_fraction=exact_fraction
        )
        return hits

    def search_planned(
        self,
        plane: str,
        query: np.ndarray,
        k: int,
        candidates: np.ndarray | None = None,
        *,
        exact_max: int = 20000,
        exact_fraction: float = 0.05,
    ) -> tuple[list[tuple[int, float]], Plan]:
        """Top-k ``(key, cosine)`` sorted by score desc, key asc, restricted to ``candidates``.

        Small candidate sets (``<= exact_max`` or ``<= exact_fraction`` of the plane) get an exact
        scan (recall 1.0); larger ones HNSW with over-fetch + post-filter, doubling the fetch until
        k hits survive or the whole plane was fetched; if HNSW still falls short, exact scan.
        """
        self._check_plane(plane)
        q = np.asarray(query, dtype=np.float32).reshape(-1)
        if q.shape != (self.dim,):
            raise ValueError(f"query shape {np.shape(query)} != ({self.dim},)")
        norm = float(np.linalg.norm(q))
        if k <= 0 or norm == 0.0 or not np.isfinite(norm):
            return [], "exact"
        q = q / norm
        cand = None if candidates is None else np.asarray(candidates, dtype=np.uint64)
        if cand is not None and len(cand) > 1 and not bool(np.all(cand[1:] > cand[:-1])):
            # Callers mostly pass sorted unique ids already: np.unique (a hash pass in numpy 2)
            # costs ~400 ms at 100k candidates, the check 0.1 ms.
            cand = np.unique(cand)
        with self._rw.read():
            index = self._ix[plane]
            n = len(index)
            if cand is not None and (len(cand) <= exact_max or len(cand) <= exact_fraction * n):
                return self._exact(plane, q, k, cand), "exact"
            hits = self._hnsw(index, q, k, cand, n)
            if hits is None:
                assert cand is not None
                return self._exact(plane, q, k, cand), "exact"
            return hits, "hnsw"

    def _exact(
        self, plane: str, q: np.ndarray, k: int, cand: np.ndarray
    ) -> list[tuple[int, float]]:
        """Exact top-k over ``cand``: NumKong's f16 SIMD kernel (USearch's own dependency)
        scores every row (the query rounded to f16, error <= 5e-4), then every row within
        ``_SHORTLIST_MARGIN`` of the k-th is rescored in f32, so the result equals an f32 brute
        force, ties by key included.

        ``cdist`` over the rows is 3x USearch's exact ``search`` (10,000 rows: ~1 vs ~3.5 ms):
        that one also sorts every row into its result.
        """
        if len(cand) == 0:
            return []
        keys, rows = self._present(plane, cand)
        if len(keys) == 0:
            return []
        rows = np.ascontiguousarray(rows)
        dist = nk.cdist(q.astype(np.float16).reshape(1, -1), rows, "angular")
        approx = (1.0 - np.asarray(dist).reshape(-1)).astype(np.float32)
        kth = np.partition(approx, -k)[-k] if len(keys) > k else -np.inf
        short = np.flatnonzero(approx >= kth - _SHORTLIST_MARGIN)
        scores = _f32_cosine(rows[short], q)
        if len(short) and np.max(np.abs(scores - approx[short])) > _SHORTLIST_MARGIN / 4:
            # a SIMD kernel that accumulates in f16 would be this imprecise: score all in f32
            short, scores = np.arange(len(keys)), _f32_cosine(rows, q)
        return self._top(keys[short], scores, k)

    def _hnsw(
        self, index: Index, q: np.ndarray, k: int, cand: np.ndarray | None, n: int
    ) -> list[tuple[int, float]] | None:
        if n == 0:
            return []
        selectivity = 1.0 if cand is None else max(len(cand) / n, 1.0 / n)
        factor = FETCH_FACTOR if cand is None else FILTERED_FETCH_FACTOR
        fetch = max(self.min_fetch, int(np.ceil(factor * k / selectivity)))
        while True:
            fetch = min(fetch, n)
            m = index.search(q, fetch)
            keys, scores = np.asarray(m.keys, dtype=np.uint64), 1.0 - np.asarray(m.distances)
            if cand is not None:
                pos = np.minimum(np.searchsorted(cand, keys), len(cand) - 1)
                ok = cand[pos] == keys
                keys, scores = keys[ok], scores[ok]
            if len(keys) >= k or fetch >= n:
                break
            fetch *= 2
        if len(keys) < k and cand is not None and len(keys) < len(cand):
            return None  # the graph did not surface enough candidates: caller scans exactly
        return self._top(keys, scores.astype(np.float32), k)

    @staticmethod
    def _top(keys: np.ndarray, scores: np.ndarray, k: int) -> list[tuple[int, float]]:
        scores = np.clip(scores, -1.0, 1.0)
        order = np.lexsort((keys, -scores))[:k]
        return [(int(keys[i]), float(scores[i])) for i in order]
