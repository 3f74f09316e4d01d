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

from ..auth.acl import visible_sql
from ..models.query_cache import Lru
from ..schemas import AegisQuery
from ..storage import units as units_sql
from ..types import Principal, Stage, Trace
from .candidates import CandidateCache, Candidates, readable_ids
from .fusion import rrf
from .hits import build_hits, fetch_hit_rows, hit_unit_id
from .hits import snippet as snippet  # re-exported: callers import it from here
from .lexical import LexicalLeg, query_terms
from .rerank import rerank_stage

if TYPE_CHECKING:
    from ..service import Service


_TOKEN_CACHE = 4096  # query texts whose token count is kept


class _Timer:
    def __init__(self) -> None:
        self.t0 = time.perf_counter()

    def ms(self) -> float:
        return (time.perf_counter() - self.t0) * 1000


def filter_sql(
    q: AegisQuery,
    planes: Sequence[str],
    scopes: Sequence[str],
    principal: Principal,
    applied_seq: int,
) -> tuple[str, list[object]]:
    """The full WHERE clause on alias ``u``: visibility, planes, filters, applied watermark."""
    vis, params = visible_sql("u", scopes, principal.name, principal.groups)
    parts = [vis, f"u.plane IN ({','.join('?' * len(planes))})", "u.seq <= ?"]
    params += [*planes, applied_seq]
    f = q.filters
    mods = q.modalities or []
    if f is not None and f.modalities():
        mods = [m for m in f.modalities() or [] if not q.modalities or m in q.modalities] or ["\0"]
    if mods:
        parts.append(f"u.modality IN ({','.join('?' * len(mods))})")
        params += mods
    if f is not None:
        docs = f.doc_ids()
        if docs:
            parts.append(f"u.doc_id IN ({','.join('?' * len(docs))})")
            params += docs
        if f.time is not None:
            lo, hi = f.time.bounds_ms()
            if lo is not None:
                parts.append("u.t_bucket >= ? AND u.event_at >= ?")
                params += [lo // 3_600_000, lo]
            if hi is not None:
                parts.append("u.t_bucket <= ? AND u.event_at < ?")
                params += [hi // 3_600_000, hi]
        if f.acl is not None:
            if f.acl.owner is not None:
                parts.append("u.acl_owner = ?")
                params.append(f.acl.owner)
            if f.acl.groups:
                marks = ",".join("?" * len(f.acl.groups))
                parts.append(
                    f"EXISTS (SELECT 1 FROM unit_groups g2 WHERE g2.unit = u.id"
                    f" AND g2.grp IN ({marks}))"
                )
                params += f.acl.groups
    return " AND ".join(parts), params


class Searcher:
    def __init__(self, svc: Service) -> None:
        self.svc = svc
        self.candidates = CandidateCache(svc.settings.candidate_cache_max_bytes)
        self.lexical = LexicalLeg(svc.settings.lexical_backend, svc.sync.lexical, lambda: svc.ready)
        self._tokens: Lru[tuple[str, str], int] = Lru(_TOKEN_CACHE)

    def run(
        self,
        principal: Principal,
        q: AegisQuery,
        scopes: list[str],
        planes: list[str],
        trace: Trace,
    ) -> list[dict[str, Any]]:
        s = self.svc.settings
        depth = max(s.leg_depth, q.top_k)
        conn = self.svc.catalog.reader()
        seq = self.svc.sync.applied_seq
        where, params = filter_sql(q, planes, scopes, principal, seq)
        dense: list[int] = []
        lexical: list[int] = []
        if q.mode in ("hybrid", "dense"):
            t = _Timer()
            vec = self.svc.embedder.embed_query(q.q)
            tokens = self._query_tokens(q.q)
            trace.stages.append(Stage("embed", t.ms(), tokens=tokens))
            t = _Timer()
            # ACL changes bump scope generations without new outbox ops: key on both.
            gens = tuple(sorted(units_sql.read_generations(conn, scopes).items()))
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
                lambda plane: self.lexical.readable_ids(q, scopes, principal, plane, planes),
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
                conn, q, terms, scopes, principal, planes, where, params, depth, unchecked=unchecked
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
                self.svc.reranker,
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
        emb = self.svc.embedder
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
        s = self.svc.settings
        store = self.svc.store
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
