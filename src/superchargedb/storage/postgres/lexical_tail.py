"""The lexical leg from a derived index in each API process, tailing the outbox (D-267).

BM25 in SQL from the postings table reads every posting of every query term and joins each to
its Unit: 86 / 155 / 220 ms p50 at 1 % / 10 % / no filter over 100k Units, where the embedded
backend's numpy index with MaxScore pruning takes a few. So each process holds that same index
(``storage/sqlite/sparse.py``, scored by ``sparse_search.py``: FTS5's ``bm25()`` to the last bit,
the statistics its own, never lagging), built from ``units`` and kept current from the outbox.

Reading the outbox by sequence number would miss a row whose transaction drew a lower number but
committed later, so it is read by transaction id: every row carries ``pg_current_xact_id()``,
and one REPEATABLE READ snapshot gives both the rows and that snapshot's ``xmin``. A transaction
below ``xmin`` had ended when the rows were read, so its rows (if it committed) were among
them; the next catch-up reads ``xid >= xmin`` again. Applying is idempotent (an ``add`` reads the
Unit's current row, a ``remove`` of a key not held does nothing), so rows read twice are
harmless. Applied rows stay ``outbox.RETAIN_S``; ``lex_stats.pruned_xid`` is the newest
transaction pruned, and a process whose ``xmin`` it reaches missed rows and rebuilds.

Every search catches up first (one short statement when nothing changed), so a Unit committed
before the search began is a candidate of both legs in every process. The index is a candidate
generator: its keys go through the exact SQL filter (with row-level security) before they are
returned. It reads as the process (``acting.as_system``): it holds every tenant's Units.
A query word FTS5 reads as a phrase (positions), doc-id or time filters, or an index still
building are answered in SQL (``lexical.py``).
"""

from __future__ import annotations

import json
import logging
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import psycopg

from ... import acting
from ...readfilter import ReadFilter
from ..sqlite.acl_tokens import acl_tokens
from ..sqlite.sparse import SparseIndex
from ..sqlite.sparse_search import SparseSearcher
from ..sqlite.visibility import Visibility
from .filter_sql import where_sql
from .lexical import tokenizer

log = logging.getLogger(__name__)

Conn = Callable[[], AbstractContextManager[psycopg.Connection[Any]]]
_ROWS = "SELECT id, text, context, scope, plane, modality, acl_owner, acl_groups FROM units"
BATCH = 20_000
INLINE_MAX = 5_000  # a store with fewer Units builds in the first search (~0.5 s at most)


def _row(r: tuple[Any, ...]) -> dict[str, Any]:
    """A ``units`` row in the form the derived index reads (the embedded catalog's columns)."""
    key, text, context, scope, plane, modality, owner, groups = r
    return {
        "id": int(key),
        "text": text,
        "context": context or "",
        "acl": acl_tokens(scope, owner, groups),
        "scope": scope,
        "plane": plane,
        "modality": modality,
        "acl_owner": owner,
        "acl_groups": json.dumps(sorted(groups)),
    }


class LexicalTail:
    """One process's derived lexical index over a PostgreSQL store."""

    def __init__(self, conn: Conn) -> None:
        self.conn = conn
        # Made on the first build: a process that never searches leaves nothing on disk.
        self.dir: Path | None = None
        self.index = SparseIndex(Path(), tokenizer())
        self.searcher = SparseSearcher(self.index)
        self._lock = threading.Lock()
        self._xmin: str | None = None  # None: not built
        self.rebuilds = 0
        self.applied_ops = 0
        self._builder: threading.Thread | None = None
        self._closed = False
        self.failed = False  # the background build raised: SQL answers
        self._seen: set[int] = set()  # outbox seqs applied that the next catch-up reads again

    @property
    def ready(self) -> bool:
        return self._xmin is not None

    def start(self) -> None:
        """Build the index, once: at once when the store is small (under a second), else in the
        background (searches use SQL until it is ready). A process that never searches or asks
        ``/readyz`` (a media worker, the CLI) never builds it."""
        if self.ready or self._builder is not None or self.failed:
            return
        with acting.as_system(), self.conn() as conn:
            row = conn.execute(
                "SELECT count(*) FROM (SELECT 1 FROM units LIMIT %s) s", (INLINE_MAX,)
            ).fetchone()
        if row is not None and int(row[0]) < INLINE_MAX:
            self._first()
            return
        with self._lock:
            if self._builder is not None or self._closed:
                return
            self._builder = threading.Thread(target=self._first, name="scdb-lexical", daemon=True)
            self._builder.start()

    def _first(self) -> None:
        try:
            self.catch_up()
        except Exception:  # the store went away (closing): searches keep using SQL
            self.failed = True
            log.warning("the derived lexical index could not be built", exc_info=True)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            builder = self._builder
        if builder is not None:
            builder.join(timeout=60)
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)

    # -- keeping up ------------------------------------------------------------------------
    def catch_up(self) -> None:
        """Apply what committed since the last catch-up, or build the index (first call, or
        rows this process needed were pruned)."""
        with self._lock, acting.as_system(), self.conn() as conn, conn.transaction():
            if self._closed:
                return
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            row = conn.execute(
                "SELECT pg_snapshot_xmin(pg_current_snapshot())::text,"
                " (SELECT pruned_xid FROM lex_stats WHERE id = 1) >= %s::xid8",
                (self._xmin or "0",),
            ).fetchone()
            assert row is not None
            xmin, missed = str(row[0]), bool(row[1])
            if self._xmin is None or missed:
                self._build(conn)
                self._seen = set()
            else:
                self._apply(conn, self._xmin, int(xmin))
            self._xmin = xmin

    def _build(self, conn: psycopg.Connection[Any]) -> None:
        def batches() -> Iterator[list[dict[str, Any]]]:
            last = 0
            while True:
                rows = conn.execute(
                    f"{_ROWS} WHERE id > %s ORDER BY id LIMIT %s", (last, BATCH)
                ).fetchall()
                if not rows:
                    return
                yield [_row(r) for r in rows]
                last = int(rows[-1][0])

        if self._xmin is not None:
            log.warning("the outbox was pruned past this process's lexical index: rebuilding")
        if self.dir is None:
            self.dir = self.index.dir = Path(tempfile.mkdtemp(prefix="scdb-lexical-"))
        self.index.load_rows(batches())
        self.rebuilds += 1

    def _apply(self, conn: psycopg.Connection[Any], since: str, xmin: int) -> None:
        window = conn.execute(
            "SELECT seq, op, unit, xid::text FROM outbox WHERE xid >= %s::xid8 ORDER BY seq",
            (since,),
        ).fetchall()
        ops = [(str(op), int(unit)) for seq, op, unit, _ in window if int(seq) not in self._seen]
        # The rows read again next time (a transaction at or above this snapshot's xmin, held
        # open by a long one such as a backup's snapshot) are not applied twice.
        self._seen = {int(seq) for seq, _, _, x in window if int(x) >= xmin}
        if not ops:
            return
        adds = sorted({k for op, k in ops if op == "add"})
        rows = {}
        if adds:
            found = conn.execute(f"{_ROWS} WHERE id = ANY(%s)", (adds,)).fetchall()
            rows = {int(r[0]): _row(r) for r in found}
        self.index.apply_rows(ops, rows)
        self.applied_ops += len(ops)

    # -- searching -------------------------------------------------------------------------
    def candidates(self, terms: Sequence[str], k: int, rf: ReadFilter) -> list[int] | None:
        """The BM25 top ``k`` keys under ``rf``'s signature filters, unchecked, or None where
        this index cannot answer (the caller asks SQL)."""
        if not terms or not self.ready or not rf.index_only:
            return None
        phrases = self.searcher.term_ids_many(terms)
        if any(len(p) > 1 for p in phrases):
            return None  # FTS5 reads a word as a phrase: positions, which this index lacks
        vis = Visibility.of(rf)
        with self.index.rw.read():
            mask, full = self.searcher.mask(vis.key, vis)
            return self.searcher.topk([p[0] if p else None for p in phrases], mask, k, full=full)

    def search(
        self, conn: psycopg.Connection[Any], terms: Sequence[str], k: int, rf: ReadFilter,
        *, checked: bool,
    ) -> list[int] | None:  # fmt: skip
        """The top ``k`` keys; ``checked``: only keys the exact SQL filter admits now (fetching
        deeper while it drops some). None: answer in SQL."""
        where, params = where_sql(rf)
        fetch = k
        while True:
            top = self.candidates(terms, fetch, rf)
            if top is None or not checked or not top:
                return top
            ok = {
                int(r[0])
                for r in conn.execute(
                    f"SELECT u.id FROM units u WHERE u.id = ANY(%s) AND {where}".encode(),
                    [top, *params],
                )
            }
            kept = [i for i in top if i in ok]
            if len(kept) >= k or len(top) < fetch or fetch >= 16 * k:
                return kept[:k]
            fetch *= 4
