"""BM25 top-k over the derived lexical index, equal to FTS5's ``bm25()`` ranking.

FTS5 scores a row as ``sum_i idf_i * f_i * (k1 + 1) / (f_i + k1 * (1 - b + b * D / avgdl))``
over the query's phrases ``i`` (k1 = 1.2, b = 0.75), with ``idf = log((N - n + 0.5) / (n + 0.5))``
clamped to 1e-6, ``f`` the phrase count weighted by column (text 1, context 1, acl 0), ``D`` the
row's tokens in all columns and ``avgdl`` over all rows; ties go to the lower rowid. The same
double-precision expression is evaluated here, phrase by phrase in query order, over the postings
of the documents the caller may read, so the ranking (ties included) is FTS5's.

Visibility is a boolean mask over catalog ids: the caller's predicate is evaluated once per
distinct *signature* (scope, plane, modality, owner, groups) and gathered per document; masks are
cached per predicate and index version.
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence

import numpy as np

from ..storage.sparse import Signature, SparseIndex

K1, B = 1.2, 0.75
_MASKS = 16  # cached visibility masks (1 byte per catalog id each)


class SparseSearcher:
    def __init__(self, index: SparseIndex) -> None:
        self.ix = index
        self._lock = threading.Lock()
        self._sig_ok: dict[Hashable, np.ndarray] = {}
        self._masks: OrderedDict[tuple[Hashable, int], np.ndarray] = OrderedDict()

    def term_id(self, token: str) -> int | None:
        return self.ix.terms.get(token)

    # ------------------------------------------------------------------ visibility
    def mask(self, key: Hashable, pred: Callable[[Signature], bool]) -> np.ndarray:
        """Readable live documents under predicate ``pred`` (named ``key``); read lock held."""
        ix = self.ix
        ck = (key, ix.version)
        with self._lock:
            m = self._masks.get(ck)
            if m is not None:
                self._masks.move_to_end(ck)
                return m
            ok = self._sig_ok.get(key)
            n = len(ix.sigs)
            if ok is None or len(ok) < n:
                # Signatures are append-only: evaluate only the new ones.
                done = 0 if ok is None else len(ok)
                more = np.fromiter((pred(s) for s in ix.sigs[done:n]), dtype=bool, count=n - done)
                ok = more if ok is None else np.concatenate([ok, more])
                if len(self._sig_ok) > 4 * _MASKS:
                    self._sig_ok.clear()
                self._sig_ok[key] = ok
        # sig -1 (no document) indexes the trailing False.
        m = np.append(ok[:n], False)[ix.sig] & ix.live
        with self._lock:
            self._masks[ck] = m
            while len(self._masks) > _MASKS:
                self._masks.popitem(last=False)
        return m

    # ------------------------------------------------------------------ scoring
    def topk(self, tids: Sequence[int | None], mask: np.ndarray, k: int) -> list[int]:
        """Catalog ids of the ``k`` best documents within ``mask``; read lock held."""
        ix = self.ix
        n_rows = ix.n_docs
        if k <= 0 or n_rows <= 0:
            return []
        avgdl = ix.total / n_rows
        segs = list(ix.segments)
        delta = ix.delta_segment()
        if delta is not None:
            segs.append(delta)
        dl = ix.dl
        parts_d: list[np.ndarray] = []
        parts_w: list[np.ndarray] = []
        for tid in tids:
            if tid is None:
                continue
            n_hit = int(ix.df[tid])
            if n_hit <= 0:
                continue
            idf = math.log((n_rows - n_hit + 0.5) / (n_hit + 0.5))
            if idf <= 0.0:
                idf = 1e-6
            for seg in segs:
                p = seg.postings(tid)
                if p is None:
                    continue
                docs, tf = p
                sel = mask[docs]
                docs = docs[sel]
                if not len(docs):
                    continue
                f = tf[sel].astype(np.float64)
                d = dl[docs].astype(np.float64)
                parts_d.append(docs)
                parts_w.append(idf * ((f * (K1 + 1.0)) / (f + K1 * (1 - B + B * d / avgdl))))
        if not parts_d:
            return []
        docs = np.concatenate(parts_d)
        acc = np.bincount(docs, weights=np.concatenate(parts_w))
        cand = np.flatnonzero(acc)
        scores = acc[cand]
        if len(cand) > k:
            kth = np.partition(scores, len(scores) - k)[len(scores) - k]
            keep = scores >= kth
            cand, scores = cand[keep], scores[keep]
        order = np.lexsort((cand, -scores))[:k]
        return [int(x) for x in cand[order]]
