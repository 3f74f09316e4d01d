"""The lexical leg: BM25 over the caller's readable Units (D-23, D-24; D-25).

Two backends give the same ranking (``SCDB_LEXICAL_BACKEND``):

* ``fts5``: FTS5 over the catalog. User text never reaches FTS5 syntax: the query is an OR of
  double-quoted ``\\w+`` tokens minus the Lucene stopwords, AND-ed with the caller's hashed ACL
  tokens in the weight-0 ``acl`` column.
* ``sparse`` (default): the derived index of ``storage/sqlite/sparse.py`` scored in numpy
  (``sparse_search.py``) over a visibility mask, the same OR of the same terms with FTS5's own
  tokens and FTS5's ``bm25()``. A query term that FTS5 reads as a multi-token phrase (``err_7731``
  is the phrase "err 7731") needs token positions, which the derived index does not keep: such a
  query, and any search while the index is not ready, is answered by FTS5.

Either way the exact visibility predicate is re-stated in SQL on what is returned (defence in
depth, plus the filters the index does not hold: time, doc ids, applied watermark).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Hashable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ...readfilter import ReadFilter
from .acl_tokens import group_token, owner_token, scope_token
from .visibility import Visibility

if TYPE_CHECKING:
    from .sparse import SparseIndex
    from .sparse_search import SparseSearcher

BACKENDS = ("sparse", "fts5")


def fts_match(
    terms: Sequence[str], scopes: Iterable[str], owner: str, groups: Iterable[str]
) -> str | None:
    """The MATCH expression, or None when the query has no searchable term."""
    if not terms:
        return None
    quoted = " OR ".join('"' + t.replace('"', '""') + '"' for t in terms)
    scope_part = " OR ".join(scope_token(s) for s in scopes)
    who = [owner_token(owner)] + [group_token(g) for g in sorted(groups)]
    acl_part = " OR ".join(who)
    return f"acl : ({scope_part}) AND acl : ({acl_part}) AND {{text context}} : ({quoted})"


def lexical_search(
    conn: sqlite3.Connection,
    match: str,
    visible_sql: str,
    params: Sequence[object],
    limit: int,
) -> list[int]:
    """Catalog rowids ranked by BM25 (text and context weight 1, acl 0), best first.

    ``visible_sql`` re-states the exact visibility predicate on ``u`` (defence in depth against
    token collisions, plus plane/modality/time/doc filters the FTS index does not hold).
    """
    sql = (
        "SELECT f.rowid FROM units_fts f JOIN units u ON u.id = f.rowid"
        f" WHERE units_fts MATCH ? AND {visible_sql}"
        " ORDER BY bm25(units_fts, 1.0, 1.0, 0.0), f.rowid LIMIT ?"
    )
    return [r[0] for r in conn.execute(sql, (match, *params, limit))]


class LexicalLeg:
    """The lexical leg of a search, on the configured backend."""

    def __init__(self, backend: str, index: SparseIndex | None, ready: Any = None) -> None:
        if backend not in BACKENDS:
            raise ValueError(f"unknown lexical backend {backend!r}; choose from {BACKENDS}")
        self.backend = backend if index is not None else "fts5"
        self.index = index
        self._ready = ready  # callable: False while the derived index is rebuilt or replayed
        self._searcher: SparseSearcher | None = None
        if index is not None:
            from .sparse_search import SparseSearcher

            self._searcher = SparseSearcher(index)

    def search(
        self,
        conn: sqlite3.Connection,
        rf: ReadFilter,
        terms: Sequence[str],
        where: str,
        params: Sequence[object],
        limit: int,
        *,
        unchecked: bool = False,
    ) -> tuple[list[int], str]:
        """Catalog rowids best first, and the backend that answered (for the trace).

        ``unchecked``: the caller re-checks every id it keeps against the exact predicate
        (hybrid's fused prefix), so the derived index's top is returned without its own SQL
        re-check (a tenth of a cold 1 %-filter search). The dense leg's ids come from the same
        index unchecked; between them, the one re-check covers both legs.
        """
        if not terms:
            return [], self.backend
        sp = self._searcher
        if sp is None or (self._ready is not None and not self._ready()):
            return self._fts(conn, terms, rf, where, params, limit), "fts5"
        phrases = sp.term_ids_many(terms)
        if any(len(p) > 1 for p in phrases):
            return self._fts(conn, terms, rf, where, params, limit), "fts5 (phrase)"
        return self._sparse(sp, conn, rf, phrases, where, params, limit, unchecked)

    @staticmethod
    def _fts(
        conn: sqlite3.Connection,
        terms: Sequence[str],
        rf: ReadFilter,
        where: str,
        params: Sequence[object],
        limit: int,
    ) -> list[int]:
        match = fts_match(terms, rf.scopes, rf.principal, rf.groups)
        return [] if match is None else lexical_search(conn, match, where, params, limit)

    @staticmethod
    def _predicate(rf: ReadFilter, planes: Sequence[str]) -> tuple[Hashable, Visibility]:
        """The visibility predicate of ``rf`` over signatures (over ``planes``), and its cache
        key (everything but doc ids and time, which the index does not hold)."""
        vis = Visibility.of(rf, planes)
        return vis.key, vis

    def readable_ids(self, rf: ReadFilter, plane: str) -> np.ndarray | None:
        """Sorted uint64 ids the caller may read in ``plane``, from the index's signature mask
        (milliseconds at 1M Units, where the catalog scan takes seconds), or None when the
        index cannot answer (not the sparse backend, not ready, doc-id or time filters). The
        caller re-checks what it returns with :func:`recheck`.

        The mask is taken over every plane the filter reads, the one the lexical leg uses
        (cached: built once per search, not once per leg), then narrowed to ``plane`` at the
        readable ids only.
        """
        sp = self._searcher
        if sp is None or (self._ready is not None and not self._ready()):
            return None
        if not rf.index_only:
            return None
        over = list(rf.planes) or [plane]
        key, pred = self._predicate(rf, over)
        with sp.ix.rw.read():
            mask, _ = sp.mask(key, pred)
            ids = np.flatnonzero(mask)
            if set(over) != {plane}:
                ids = sp.in_plane(ids, plane)
        return ids.astype(np.uint64)

    def _sparse(
        self,
        sp: SparseSearcher,
        conn: sqlite3.Connection,
        rf: ReadFilter,
        phrases: list[tuple[int | None, ...]],
        where: str,
        params: Sequence[object],
        limit: int,
        unchecked: bool = False,
    ) -> tuple[list[int], str]:
        key, pred = self._predicate(rf, rf.planes)
        detail = "sparse"
        only: np.ndarray | None = None
        if not rf.index_only:
            # Filters the index does not hold (doc ids, time): the catalog's readable ids.
            rows = conn.execute(f"SELECT u.id FROM units u WHERE {where}", params)
            only = np.fromiter((r[0] for r in rows), dtype=np.int64)
            detail = "sparse (catalog filter)"
        fetch = limit
        while True:
            with sp.ix.rw.read():
                mask, full = sp.mask(key, pred)
                if only is not None:
                    allowed = np.zeros(len(mask), dtype=bool)
                    allowed[only[only < len(mask)]] = True
                    mask, full = mask & allowed, False
                tids = [p[0] if p else None for p in phrases]
                top = sp.topk(tids, mask, fetch, full=full)
            if not top:
                return [], detail
            if unchecked:
                return top[:limit], detail
            kept = recheck(conn, top, where, params)
            # Something in the index was newer than the caller's watermark, or stale: fetch more.
            if len(kept) >= limit or len(top) < fetch or fetch >= 16 * limit:
                return kept[:limit], detail
            fetch *= 4


def recheck(
    conn: sqlite3.Connection, ids: Sequence[int], where: str, params: Sequence[object]
) -> list[int]:
    """``ids`` (in order) that satisfy the exact SQL predicate ``where`` on alias ``u``."""
    if not ids:
        return []
    marks = ",".join("?" * len(ids))
    # NOT INDEXED keeps rowid lookups but stops the planner from preferring a scope or plane
    # index range (a scan of the caller's whole scope: 25 ms at 10k Units vs 2).
    cur = conn.cursor()
    cur.row_factory = None  # plain tuples: no Row object per id
    ok = {
        r[0]
        for r in cur.execute(
            f"SELECT u.id FROM units u NOT INDEXED WHERE u.id IN ({marks}) AND {where}",
            (*ids, *params),
        )
    }
    return [i for i in ids if i in ok]
