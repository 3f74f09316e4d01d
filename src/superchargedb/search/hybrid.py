"""``POST /v1/search``: embed -> vectorize (filtered ANN) -> d1_fts (BM25) -> rrf -> rerank ->
hydrate (hit objects and snippets).

Every leg filters by the same visibility predicate (auth/acl.py) before ranking, so a Unit the
caller cannot read never takes part in any stage, and nothing in the trace counts it.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..models.query_cache import Lru
from ..query_terms import query_terms
from ..readfilter import ReadFilter
from ..schemas import AegisQuery
from ..storage.sqlite import units as units_sql
from ..storage.sqlite.candidates import CandidateCache, Candidates, readable_ids
from ..storage.sqlite.filter_sql import where_sql
from ..storage.sqlite.lexical_leg import LexicalLeg
from ..types import Stage, Trace
from .fusion import rrf
from .hits import build_hits, fetch_hit_rows, hit_unit_id
from .hits import snippet as snippet  # re-exported: callers import it from here
from .rerank import rerank_stage

if TYPE_CHECKING:
    from ..models.embedder import Embedder
    from ..settings import Settings
    from ..storage.sqlite.catalog import Catalog
    from ..storage.sqlite.index_sync import IndexSync
    from ..storage.vectors import VectorStore
    from .rerank import Reranker


_TOKEN_CACHE = 4096  # query texts whose token count is kept


class _Timer:
    def __init__(self) -> None:
        self.t0 = time.perf_counter()

    def ms(self) -> float:
        return (time.perf_counter() - self.t0) * 1000


class Searcher:
    """The search pipeline over the components it reads (given by the wiring, never the
    service facade)."""

    def __init__(
        self,
        settings: Settings,
        catalog: Catalog,
        sync: IndexSync,
        store: VectorStore,
        embedder: Embedder,
        reranker: Reranker | None,
    ) -> None:
        self.settings = settings
        self.catalog = catalog
        self.sync = sync
        self.store = store
        self.embedder = embedder
        self.reranker = reranker
        self.candidates = CandidateCache(settings.candidate_cache_max_bytes)
        self.lexical = LexicalLeg(settings.lexical_backend, sync.lexical, lambda: sync.ready)
        self._tokens: Lru[tuple[str, str], int] = Lru(_TOKEN_CACHE)

    def run(self, q: AegisQuery, rf: ReadFilter, trace: Trace) -> list[dict[str, Any]]:
        """Hits for ``q`` among the Units ``rf`` admits, each stage in ``trace``."""
        s = self.settings
        depth = max(s.leg_depth, q.top_k)
        conn = self.catalog.reader()
        seq = self.sync.applied_seq
        where, params = where_sql(rf, seq)
        planes = rf.planes
        dense: list[int] = []
        lexical: list[int] = []
        if q.mode in ("hybrid", "dense"):
            t = _Timer()
            vec = self.embedder.embed_query(q.q)
            tokens = self._query_tokens(q.q)
            trace.stages.append(Stage("embed", t.ms(), tokens=tokens))
            t = _Timer()
            # ACL changes bump scope generations without new outbox ops: key on both.
            gens = tuple(sorted(units_sql.read_generations(conn, rf.scopes).items()))
            # The lexical index's visibility mask gives the readable ids in milliseconds where
            # the catalog scan takes seconds at 1M Units; its answers are re-checked in SQL.
            dense, plans = self._dense(
                conn,
                vec,
                where,
                params,
                planes,
                depth,
                gens,
                lambda plane: self.lexical.readable_ids(rf, plane),
                epoch=seq,
            )
            trace.stages.append(Stage("vectorize", t.ms(), detail="+".join(planes) + plans))
        else:
            trace.stages.append(Stage("embed", 0.0, skipped="mode=lexical"))
            trace.stages.append(Stage("vectorize", 0.0, skipped="mode=lexical"))
        terms = query_terms(q.q)
        # In hybrid mode the fused prefix is re-checked below, both legs' ids at once.
        unchecked = q.mode == "hybrid" and self.lexical.backend == "sparse"
        if q.mode in ("hybrid", "lexical"):
            t = _Timer()
            lexical, backend = self.lexical.search(
                conn, rf, terms, where, params, depth, unchecked=unchecked
            )
            trace.stages.append(Stage("d1_fts", t.ms(), detail=f"{len(terms)} terms, {backend}"))
        else:
            trace.stages.append(Stage("d1_fts", 0.0, skipped="mode=dense"))
        t = _Timer()
        fused = rrf([dense, lexical], k=s.rrf_k)
        rows: dict[int, tuple[Any, ...]] = {}
        if unchecked or (dense and self.lexical.backend == "sparse"):
            # Both legs' ids may come from the lexical index (the dense candidates from its
            # mask, the lexical top unchecked): the exact predicate has the last word on every
            # hit that leaves this function (an ACL change committed but not yet applied never
            # shows). The check fetches the hit rows too (one query where a re-check then a
            # hydration took two).
            need = max(q.top_k, s.rerank_depth if q.rerank else 0)
            fused, rows = self._recheck_prefix(conn, fused, need, where, params)
        trace.stages.append(Stage("rrf", t.ms(), detail=f"k={s.rrf_k}"))
        rr_rank: dict[int, int] = {}
        if q.rerank:
            fused, stage, rr_rank = rerank_stage(
                self.reranker,
                q.q,
                fused,
                lambda keys: {k: r["text"] for k, r in units_sql.fetch_rows(conn, keys).items()},
                s.rerank_depth,
                s.rerank_timeout_s,
            )
            trace.stages.append(stage)
        t = _Timer()
        top = fused[: q.top_k]
        missing = [k for k, _ in top if k not in rows]
        if missing:
            rows.update(fetch_hit_rows(conn, missing))
        if not rr_rank:
            # Ties in RRF are broken by unit_id (D-27); a reranked order is kept as is.
            top.sort(key=lambda kv: (-kv[1], hit_unit_id(rows[kv[0]]) if kv[0] in rows else ""))
        hits = build_hits(rows, top, dense, lexical, terms, rr_rank, q.snippets)
        trace.stages.append(Stage("hydrate", t.ms(), detail=f"{len(hits)} hits"))
        return hits

    def _query_tokens(self, text: str) -> int:
        """The query's token count for the trace, cached per model and text like its vector
        (tokenizing it again cost 0.18 ms a search)."""
        emb = self.embedder
        return self._tokens.get_or((emb.model_id, text), lambda: emb.count_tokens(text))

    @staticmethod
    def _recheck_prefix(
        conn: sqlite3.Connection,
        fused: list[tuple[int, float]],
        need: int,
        where: str,
        params: list[object],
    ) -> tuple[list[tuple[int, float]], dict[int, tuple[Any, ...]]]:
        """``fused`` with unreadable ids dropped from its first ``need`` entries (refilled), and
        the hit rows of the readable ones (:func:`fetch_hit_rows` under ``where``)."""
        kept: list[tuple[int, float]] = []
        rows: dict[int, tuple[Any, ...]] = {}
        i = 0
        while len(kept) < need and i < len(fused):
            chunk = fused[i : i + need]
            i += need
            got = fetch_hit_rows(conn, [k for k, _ in chunk], where, params)
            rows.update(got)
            kept += [kv for kv in chunk if kv[0] in got]
        return kept + fused[i:], rows

    def _dense(
        self,
        conn: sqlite3.Connection,
        vec: np.ndarray,
        where: str,
        params: list[object],
        planes: Sequence[str],
        depth: int,
        gens: tuple[tuple[str, int], ...] = (),
        index_ids: Callable[[str], np.ndarray | None] | None = None,
        epoch: int = 0,
    ) -> tuple[list[int], str]:
        """Filtered ANN per plane, merged by cosine into one list (D-27).

        ``index_ids(plane)``: the readable ids from the lexical index (None: ask the catalog).
        """
        s = self.settings
        store = self.store
        scored: list[tuple[float, int]] = []
        plans = []
        for plane in planes:
            n = store.count(plane)
            if n == 0:
                continue
            ck = (plane, where, tuple(params), gens)
            cand = self.candidates.get(ck)
            if cand is None:
                ids = None if index_ids is None else index_ids(plane)
                cand = Candidates(readable_ids(conn, where, params, plane) if ids is None else ids)
                self.candidates.put(ck, cand, epoch)
            if cand.ids.size == 0:
                continue
            # Small sets: the store's exact scan of its f16 row mirror (a gather, then one SIMD
            # pass that widens to f32 as it goes). It replaced a cached f32 matrix per predicate:
            # as fast warm, 2x faster cold (no matrix to build), and no 15 MB per 10 % scope.
            hits, plan = store.search_planned(
                plane,
                vec,
                depth,
                cand.ids,
                exact_max=s.exact_scan_max,
                exact_fraction=s.exact_scan_fraction,
            )
            plans.append(plan)
            scored += [(sim, key) for key, sim in hits]
        scored.sort(key=lambda x: (-x[0], x[1]))
        detail = f" ({','.join(sorted(set(plans)))})" if plans else ""
        return [k for _, k in scored[:depth]], detail
