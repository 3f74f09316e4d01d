"""Keeps the derived vector index in lockstep with the catalog through the outbox (D-44).

Outbox rows are written in each Unit's transaction; the owner applies them in memory before the
acknowledgement, checkpoints index files whose name carries the watermark, and on start replays
everything after each plane's durable watermark (or rebuilds a plane from the catalog's f16
embeddings when its file is gone and the outbox was already compacted). The derived lexical
index (``sparse.py``, when that backend is on) follows the same ops and watermark rules; outbox
rows are compacted only once both indexes made them durable.
"""

from __future__ import annotations

import logging
import threading
from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np

from ... import faults
from ...types import PLANES
from ..vectors import VectorOp, VectorStore
from .catalog import Catalog
from .sparse import SparseIndex

log = logging.getLogger(__name__)


class IndexSync:
    def __init__(
        self,
        catalog: Catalog,
        store: VectorStore,
        checkpoint_every: int,
        lexical: SparseIndex | None = None,
    ) -> None:
        self.catalog = catalog
        self.store = store
        self.lexical = lexical
        self.checkpoint_every = checkpoint_every
        self.applied_seq = 0  # every outbox op up to here is applied in memory
        self._since_checkpoint = 0
        self._lock = threading.Lock()
        self.ready = False
        self._gc_done: dict[str, int] = {}
        # Bulk import only: the HNSW add of one batch (C++, GIL released) runs in this thread
        # while the importer writes the next batch; ``_vec_top`` is the seq it will reach.
        self._vec_pool: ThreadPoolExecutor | None = None
        self._vec_pending: Future[None] | None = None
        self._vec_top = 0

    def startup(self) -> None:
        """Load index files, rebuild planes whose history was compacted away, replay the rest."""
        watermarks = self.store.load()
        conn = self.catalog.reader()
        for plane in PLANES:
            gc_seq = int(self.catalog.kv_get(f"outbox_gc:{plane}") or 0)
            self._gc_done[plane] = gc_seq
            if watermarks.get(plane, 0) < gc_seq:
                log.warning("rebuilding %s index from the catalog", plane)
                rows = conn.execute(
                    "SELECT id, embedding FROM units WHERE plane = ? ORDER BY id", (plane,)
                )
                items = (
                    (int(r[0]), np.frombuffer(r[1], dtype=np.float16).astype(np.float32))
                    for r in rows
                )
                self.store.rebuild(plane, items, gc_seq)
        replay_from = min(self.store.durable_seq(p) for p in PLANES)
        if self.lexical is not None:
            lex_seq = self.lexical.load()
            gc_max = max(self._gc_done.values(), default=0)
            if lex_seq < gc_max:
                log.warning("rebuilding the lexical index from the catalog")
                self.lexical.rebuild(conn, gc_max)
            replay_from = min(replay_from, self.lexical.applied)
        faults.point("sync.replay.before")
        with self.catalog.locked():
            self._apply_after(replay_from)
        faults.point("sync.replay.after")
        self.checkpoint()
        self.ready = True

    def apply_pending(self, checkpoint: bool = True, *, background: bool = False) -> None:
        """Apply every outbox op not yet applied; call with the catalog write lock held.

        ``checkpoint=False`` (bulk import) leaves the checkpoint to the caller. ``background``
        (bulk import) returns before the vector index has added these ops: ``applied_seq`` moves
        only when they are in, which the next apply, checkpoint or ``wait_vectors`` waits for."""
        self._apply_after(self.applied_seq, background=background)
        if checkpoint and self._since_checkpoint >= self.checkpoint_every:
            try:
                self.checkpoint()
            except (OSError, RuntimeError) as exc:
                # The caller's write is committed and applied; the outbox still holds every op
                # a checkpoint would persist, so a failed save (disk full) must not fail it.
                log.error("index checkpoint failed (retried later): %s", exc)
                self._since_checkpoint = 0

    def wait_vectors(self) -> None:
        """Wait for a background vector add (re-raising its error); then advance ``applied_seq``."""
        fut, self._vec_pending = self._vec_pending, None
        if fut is not None:
            fut.result()
            faults.point("sync.after_apply")
            self.applied_seq = max(self.applied_seq, self._vec_top)

    def outbox_head(self) -> int:
        """The newest committed outbox seq (by this process or another): ``outbox_head() -
        applied_seq`` is the lag, and a worker's commits are pending while it is positive."""
        row = (
            self.catalog.reader()
            .execute("SELECT seq FROM sqlite_sequence WHERE name = 'outbox'")
            .fetchone()
        )
        return int(row[0]) if row else 0

    def close(self) -> None:
        try:
            self.wait_vectors()
        finally:
            if self._vec_pool is not None:
                self._vec_pool.shutdown(wait=True)
                self._vec_pool = None

    def _apply_after(self, after: int, background: bool = False) -> None:
        self.wait_vectors()
        after = max(after, self.applied_seq)
        conn = self.catalog.reader()
        ops_rows = conn.execute(
            "SELECT seq, op, plane, key FROM outbox WHERE seq > ? ORDER BY seq", (after,)
        ).fetchall()
        if not ops_rows:
            # Nothing pending: every committed op (compacted ones included) is applied.
            top = conn.execute("SELECT seq FROM sqlite_sequence WHERE name = 'outbox'").fetchone()
            self.applied_seq = max(self.applied_seq, int(top[0]) if top else 0, after)
            if self.lexical is not None:
                self.lexical.advance(self.applied_seq)
            return
        add_keys = [r["key"] for r in ops_rows if r["op"] == "add"]
        vecs: dict[int, np.ndarray] = {}
        for i in range(0, len(add_keys), 500):
            part = add_keys[i : i + 500]
            marks = ",".join("?" * len(part))
            for r in conn.execute(f"SELECT id, embedding FROM units WHERE id IN ({marks})", part):
                vecs[int(r[0])] = np.frombuffer(r[1], dtype=np.float16).astype(np.float32)
        ops = [
            VectorOp(
                seq=int(r["seq"]),
                op=r["op"],
                plane=r["plane"],
                key=int(r["key"]),
                vector=vecs.get(int(r["key"])) if r["op"] == "add" else None,
            )
            for r in ops_rows
        ]
        faults.point("sync.before_apply")
        top = conn.execute("SELECT seq FROM sqlite_sequence WHERE name = 'outbox'").fetchone()
        new_top = max(self.applied_seq, ops[-1].seq, int(top[0]) if top else 0)
        if background:
            if self._vec_pool is None:
                self._vec_pool = ThreadPoolExecutor(1, thread_name_prefix="scdb-vec-apply")
            self._vec_top = new_top
            self._vec_pending = self._vec_pool.submit(self.store.apply, ops)
        else:
            self.store.apply(ops)
        if self.lexical is not None:
            self.lexical.apply(conn, [(o.seq, o.op, o.key) for o in ops])
        if not background:
            faults.point("sync.after_apply")
            self.applied_seq = new_top
        self._since_checkpoint += len(ops)

    def checkpoint(self) -> None:
        """Persist dirty planes, then drop outbox rows every plane has made durable."""
        self.wait_vectors()
        for plane in PLANES:
            if self.store.needs_compaction(plane):  # usearch never reclaims tombstones
                self.store.compact(plane)
        self.store.checkpoint()
        if self.lexical is not None:
            self.lexical.checkpoint()
        faults.point("sync.after_checkpoint")
        self._since_checkpoint = 0
        durable: dict[str, int] = {p: self.store.durable_seq(p) for p in PLANES}
        if self.lexical is not None:
            durable = {p: min(s, self.lexical.durable) for p, s in durable.items()}
        if durable == self._gc_done:
            return
        with self.catalog.write() as conn:
            for name, seq in durable.items():
                conn.execute("DELETE FROM outbox WHERE plane = ? AND seq <= ?", (name, seq))
                self.catalog.kv_set(conn, f"outbox_gc:{name}", str(seq))
        faults.point("sync.after_gc")
        self._gc_done = durable
