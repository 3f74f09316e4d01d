"""``POST /v1/search``: embed -> vectorize (filtered ANN) -> d1_fts (BM25) -> rrf -> rerank.

Every leg filters by the same visibility predicate (auth/acl.py) before ranking, so a Unit the
caller cannot read never takes part in any stage, and nothing in the trace counts it.
"""

from __future__ import annotations

import html
import re
import sqlite3
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..auth.acl import visible_sql
from ..schemas import AegisQuery
from ..storage import units as units_sql
from ..types import Locator, Principal, Stage, Trace
from .fusion import rrf
from .lexical import fts_match, lexical_search, query_terms
from .rerank import rerank_stage

if TYPE_CHECKING:
    from ..service import Service


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


def snippet(text: str, terms: Sequence[str], width: int = 240) -> str:
    """An HTML-escaped window around the first query term, terms wrapped in ``<mark>``."""
    low = text.lower()
    pos = min((i for t in terms if (i := low.find(t)) >= 0), default=0)
    start = max(0, pos - width // 3)
    end = min(len(text), start + width)
    window = html.escape(text[start:end])
    if terms:
        pat = re.compile(
            r"\b(" + "|".join(re.escape(html.escape(t)) for t in terms) + r")\w*", re.IGNORECASE
        )
        window = pat.sub(lambda m: f"<mark>{m.group(0)}</mark>", window)
    return ("…" if start > 0 else "") + window + ("…" if end < len(text) else "")


class CandidateCache:
    """Readable-id arrays per (plane, visibility predicate, parameters).

    The parameters include the applied outbox watermark, so any write makes old entries
    unreachable (they age out of the LRU); between writes a repeated scope/ACL combination skips
    the catalog scan that otherwise dominates the dense leg's cost.
    """

    def __init__(self, max_ids: int = 4_000_000) -> None:
        self.max_ids = max_ids
        self._data: OrderedDict[tuple[Any, ...], np.ndarray] = OrderedDict()
        self._size = 0
        self._lock = threading.Lock()

    def get(self, key: tuple[Any, ...]) -> np.ndarray | None:
        with self._lock:
            arr = self._data.get(key)
            if arr is not None:
                self._data.move_to_end(key)
            return arr

    def put(self, key: tuple[Any, ...], arr: np.ndarray) -> None:
        if arr.size > self.max_ids // 4:
            return
        with self._lock:
            old = self._data.pop(key, None)
            if old is not None:
                self._size -= old.size
            self._data[key] = arr
            self._size += arr.size
            while self._size > self.max_ids and self._data:
                _, ev = self._data.popitem(last=False)
                self._size -= ev.size


class Searcher:
    def __init__(self, svc: Service) -> None:
        self.svc = svc
        self.candidates = CandidateCache()

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
        where, params = filter_sql(q, planes, scopes, principal, self.svc.sync.applied_seq)
        dense: list[int] = []
        lexical: list[int] = []
        if q.mode in ("hybrid", "dense"):
            t = _Timer()
            vec = self.svc.embedder.embed_query(q.q)
            trace.stages.append(Stage("embed", t.ms(), tokens=self.svc.embedder.count_tokens(q.q)))
            t = _Timer()
            # ACL changes bump scope generations without new outbox ops: key on both.
            gens = tuple(sorted(units_sql.read_generations(conn, scopes).items()))
            dense, plans = self._dense(conn, vec, where, params, planes, depth, gens)
            trace.stages.append(Stage("vectorize", t.ms(), detail="+".join(planes) + plans))
        else:
            trace.stages.append(Stage("embed", 0.0, skipped="mode=lexical"))
            trace.stages.append(Stage("vectorize", 0.0, skipped="mode=lexical"))
        terms = query_terms(q.q)
        if q.mode in ("hybrid", "lexical"):
            t = _Timer()
            match = fts_match(terms, scopes, principal.name, principal.groups)
            if match is not None:
                lexical = lexical_search(conn, match, where, params, depth)
            trace.stages.append(Stage("d1_fts", t.ms(), detail=f"{len(terms)} terms"))
        else:
            trace.stages.append(Stage("d1_fts", 0.0, skipped="mode=dense"))
        t = _Timer()
        fused = rrf([dense, lexical], k=s.rrf_k)
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
        top = fused[: q.top_k]
        rows = units_sql.fetch_rows(conn, [k for k, _ in top])
        if not rr_rank:
            # Ties in RRF are broken by unit_id (DECISIONS 27); a reranked order is kept as is.
            top.sort(key=lambda kv: (-kv[1], rows[kv[0]]["unit_id"] if kv[0] in rows else ""))
        d_rank = {k: i for i, k in enumerate(dense, 1)}
        l_rank = {k: i for i, k in enumerate(lexical, 1)}
        hits = []
        for key, score in top:
            r = rows.get(key)
            if r is None:  # deleted between ranking and hydration
                continue
            loc = Locator.from_row(r)
            hits.append(
                {
                    "unit_id": r["unit_id"],
                    "score": round(score, 6),
                    "plane": r["plane"],
                    "modality": r["modality"],
                    "doc_id": r["doc_id"],
                    "scope": r["scope"],
                    "source_uri": r["source_uri"],
                    "mime": r["mime"],
                    "text": r["text"],
                    "snippet": snippet(r["text"], terms),
                    "locator": loc.to_dict() if loc else None,
                    "link": units_sql.unit_link(r),
                    "ranks": {"dense": d_rank.get(key), "lexical": l_rank.get(key)}
                    | ({"rerank": rr_rank.get(key)} if rr_rank else {}),
                }
            )
        return hits

    def _dense(
        self,
        conn: sqlite3.Connection,
        vec: np.ndarray,
        where: str,
        params: list[object],
        planes: Sequence[str],
        depth: int,
        gens: tuple[tuple[str, int], ...] = (),
    ) -> tuple[list[int], str]:
        """Filtered ANN per plane, merged by cosine into one list (DECISIONS 27)."""
        s = self.svc.settings
        store = self.svc.store
        scored: list[tuple[float, int]] = []
        plans = []
        for plane in planes:
            if store.count(plane) == 0:
                continue
            key = (plane, where, tuple(params), gens)
            cand = self.candidates.get(key)
            if cand is None:
                cand = np.fromiter(
                    (
                        r[0]
                        for r in conn.execute(
                            f"SELECT u.id FROM units u WHERE {where} AND u.plane = ?",
                            (*params, plane),
                        )
                    ),
                    dtype=np.uint64,
                )
                self.candidates.put(key, cand)
            if cand.size == 0:
                continue
            hits, plan = store.search_planned(
                plane,
                vec,
                depth,
                cand,
                exact_max=s.exact_scan_max,
                exact_fraction=s.exact_scan_fraction,
            )
            plans.append(plan)
            scored += [(sim, key) for key, sim in hits]
        scored.sort(key=lambda x: (-x[0], x[1]))
        detail = f" ({','.join(sorted(set(plans)))})" if plans else ""
        return [k for _, k in scored[:depth]], detail
