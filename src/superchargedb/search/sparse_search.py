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
from ..storage.sparse_segment import K1, B, Segment

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
    def topk(
        self, tids: Sequence[int | None], mask: np.ndarray, k: int, *, exhaustive: bool = False
    ) -> list[int]:
        """Catalog ids of the ``k`` best documents within ``mask``; read lock held.

        MaxScore: phrases are taken in decreasing order of their score bound; once the bounds of
        the phrases left sum below the k-th best partial score so far, no unseen document can
        reach the top k, and the phrases left are only looked up for the candidates that still
        can. Final scores are then summed phrase by phrase *in query order*, as FTS5 does, so
        they are FTS5's to the last bit. ``exhaustive`` scores every posting (for comparison).
        """
        ix = self.ix
        n_rows = ix.n_docs
        if k <= 0 or n_rows <= 0:
            return []
        avgdl = ix.total / n_rows
        dl = ix.dl
        segs = [*ix.segments, *ix.delta]
        phrases: list[tuple[float, float, list[tuple[Segment, int]]]] = []  # idf, bound, where
        for tid in tids:
            if tid is None or int(ix.df[tid]) <= 0:
                continue  # FTS5 adds 0.0 for a phrase that matches nothing
            n_hit = int(ix.df[tid])
            idf = math.log((n_rows - n_hit + 0.5) / (n_hit + 0.5))
            if idf <= 0.0:
                idf = 1e-6
            locs = [(seg, pos) for seg in segs if (pos := seg.term(tid)) >= 0]
            if locs:
                scale = max(
                    float(seg.t_ub[pos]) * max(1.0, avgdl / float(seg.a_build[0]))
                    for seg, pos in locs
                )
                phrases.append((idf, idf * scale * (1 + 1e-6), locs))
        if not phrases:
            return []

        def weight(docs: np.ndarray, tf: np.ndarray, idf: float) -> np.ndarray:
            f = tf.astype(np.float64)
            d = dl[docs].astype(np.float64)
            return idf * ((f * (K1 + 1.0)) / (f + K1 * (1 - B + B * d / avgdl)))

        order = sorted(range(len(phrases)), key=lambda j: -phrases[j][1])
        acc = np.zeros(len(mask))
        seen = np.zeros(len(mask), dtype=bool)
        parts: list[list[tuple[np.ndarray, np.ndarray]]] = [[] for _ in phrases]
        split, theta = len(order), -math.inf
        for step, j in enumerate(order):
            if step and not exhaustive:
                rest = sum(phrases[x][1] for x in order[step:])
                cand = np.flatnonzero(seen)
                if len(cand) >= k:
                    theta = float(np.partition(acc[cand], len(cand) - k)[len(cand) - k])
                    if rest < theta:
                        split = step
                        break
            idf, _, locs = phrases[j]
            for seg, pos in locs:
                docs, tf = seg.postings_at(pos)
                sel = mask[docs]
                docs = docs[sel]
                if len(docs):
                    w = weight(docs, tf[sel], idf)
                    acc[docs] += w  # a document is in one segment, once per term
                    seen[docs] = True
                    parts[j].append((docs, w))
        cand = np.flatnonzero(seen)
        if split < len(order):
            rest = sum(phrases[x][1] for x in order[split:])
            cand = cand[acc[cand] + rest >= theta]
            for j in order[split:]:
                idf, _, locs = phrases[j]
                for seg, pos in locs:
                    docs, tf = seg.postings_at(pos)
                    at = np.minimum(np.searchsorted(docs, cand), len(docs) - 1)
                    hit = docs[at] == cand
                    if hit.any():
                        parts[j].append((cand[hit], weight(cand[hit], tf[at[hit]], idf)))
        n = len(cand)
        if n == 0:
            return []
        score = np.zeros(n)
        for j in range(len(phrases)):  # query order: FTS5's summation order
            col = np.zeros(n)
            for docs, w in parts[j]:
                at = np.minimum(np.searchsorted(cand, docs), n - 1)
                ok = cand[at] == docs
                col[at[ok]] = w[ok]
            score = score + col
        if n > k:
            kth = np.partition(score, n - k)[n - k]
            keep = score >= kth
            cand, score = cand[keep], score[keep]
        top = np.lexsort((cand, -score))[:k]
        return [int(x) for x in cand[top]]
