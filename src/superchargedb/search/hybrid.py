"""``POST /v1/search``: embed -> vectorize (filtered ANN) -> d1_fts (BM25) -> rrf -> rerank ->
hydrate (hit objects and snippets).

Every leg filters by the same visibility predicate (auth/acl.py) before ranking, so a Unit the
caller cannot read never takes part in any stage, and nothing in the trace counts it.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from contextvars import copy_context
from typing import TYPE_CHECKING, Any

from ..models.query_cache import Lru
from ..query_terms import query_terms
from ..readfilter import ReadFilter
from ..schemas import AegisQuery
from ..storage.protocols_search import HitRow, Leg, SearchStore, SearchView, UnitKey
from ..types import Stage, Trace
from .fusion import rrf
from .hits import build_hits
from .hits import snippet as snippet  # re-exported: callers import it from here
from .rerank import rerank_stage

if TYPE_CHECKING:
    from ..models.embedder import Embedder
    from ..settings import Settings
    from .rerank import Reranker


_TOKEN_CACHE = 4096  # query texts whose token count is kept


_LEG_THREADS = 8  # lexical legs in flight beside their searches' dense legs (overlap_legs)
_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _legs() -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(_LEG_THREADS, thread_name_prefix="scdb-lexical")
        return _pool


def _timed_lexical(
    view: SearchView, terms: list[str], depth: int, defer: bool
) -> tuple[Leg, float]:
    t = _Timer()
    leg = view.lexical(terms, depth, defer_check=defer)
    return leg, t.ms()


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
        store: SearchStore,
        embedder: Embedder,
        reranker: Reranker | None,
    ) -> None:
        self.settings = settings
        self.store = store
        self.embedder = embedder
        self.reranker = reranker
        self._tokens: Lru[tuple[str, str], int] = Lru(_TOKEN_CACHE)

    def run(self, q: AegisQuery, rf: ReadFilter, trace: Trace) -> list[dict[str, Any]]:
        """Hits for ``q`` among the Units ``rf`` admits, each stage in ``trace``."""
        s = self.settings
        depth = max(s.leg_depth, q.top_k)
        view = self.store.view(rf)
        dense: list[UnitKey] = []
        lexical: list[UnitKey] = []
        checked = True
        terms = query_terms(q.q)
        # In hybrid mode the fused prefix is re-checked below, both legs' keys at once.
        defer = q.mode == "hybrid"
        early: Future[tuple[Leg, float]] | None = None
        if defer and self.store.overlap_legs:
            # The lexical leg's round trips run while the query is embedded and the dense leg
            # scans; its own context (the acting tenants, the read-after position) goes along.
            early = _legs().submit(copy_context().run, _timed_lexical, view, terms, depth, defer)
        if q.mode in ("hybrid", "dense"):
            t = _Timer()
            vec = self.embedder.embed_query(q.q)
            tokens = self._query_tokens(q.q)
            trace.stages.append(Stage("embed", t.ms(), tokens=tokens))
            t = _Timer()
            leg = view.dense(vec, depth)
            dense, checked = leg.keys, leg.checked or not leg.keys
            trace.stages.append(Stage("vectorize", t.ms(), detail=leg.detail, fresh=leg.fresh))
        else:
            trace.stages.append(Stage("embed", 0.0, skipped="mode=lexical"))
            trace.stages.append(Stage("vectorize", 0.0, skipped="mode=lexical"))
        if q.mode in ("hybrid", "lexical"):
            leg, ms = (
                early.result() if early is not None else _timed_lexical(view, terms, depth, defer)
            )
            lexical, checked = leg.keys, checked and (leg.checked or not leg.keys)
            trace.stages.append(Stage("d1_fts", ms, detail=f"{len(terms)} terms, {leg.detail}"))
        else:
            trace.stages.append(Stage("d1_fts", 0.0, skipped="mode=dense"))
        t = _Timer()
        fused = rrf([dense, lexical], k=s.rrf_k)
        rows: dict[UnitKey, HitRow] = {}
        if not checked:
            # A leg answered from a derived index that may trail the catalog: the exact filter
            # has the last word on every hit that leaves this function (an ACL change
            # committed but not yet applied never shows).
            need = max(q.top_k, s.rerank_depth if q.rerank else 0)
            fused, got = view.recheck(fused, need)
            rows.update(got)
        trace.stages.append(Stage("rrf", t.ms(), detail=f"k={s.rrf_k}"))
        rr_rank: dict[UnitKey, int] = {}
        if q.rerank:
            fused, stage, rr_rank = rerank_stage(
                self.reranker, q.q, fused, view.texts, s.rerank_depth, s.rerank_timeout_s
            )
            trace.stages.append(stage)
        t = _Timer()
        top = fused[: q.top_k]
        missing = [k for k, _ in top if k not in rows]
        if missing:
            rows.update(view.hits(missing))
        if not rr_rank:
            # Ties in RRF are broken by unit_id (D-27); a reranked order is kept as is.
            top.sort(key=lambda kv: (-kv[1], rows[kv[0]].unit_id if kv[0] in rows else ""))
        hits = build_hits(rows, top, dense, lexical, terms, rr_rank, q.snippets)
        trace.stages.append(Stage("hydrate", t.ms(), detail=f"{len(hits)} hits"))
        return hits

    def _query_tokens(self, text: str) -> int:
        """The query's token count for the trace, cached per model and text like its vector
        (tokenizing it again cost 0.18 ms a search)."""
        emb = self.embedder
        return self._tokens.get_or((emb.model_id, text), lambda: emb.count_tokens(text))
