"""BM25 top-k over the derived lexical index, equal to FTS5's ``bm25()`` ranking.

FTS5 scores a row as ``sum_i idf_i * f_i * (k1 + 1) / (f_i + k1 * (1 - b + b * D / avgdl))``
over the query's phrases ``i`` (k1 = 1.2, b = 0.75), with ``idf = log((N - n + 0.5) / (n + 0.5))``
clamped to 1e-6, ``f`` the phrase count weighted by column (text 1, context 1, acl 0), ``D`` the
row's tokens in all columns and ``avgdl`` over all rows; ties go to the lower rowid. The same
double-precision expression is evaluated here, phrase by phrase in query order, over the postings
of the documents the caller may read, so the ranking (ties included) is FTS5's.

Visibility is a boolean mask over catalog ids: the caller's predicate is evaluated once per
distinct value of each *signature* field (scope, plane, modality, owner, groups; visibility.py),
combined per signature and gathered per document with numpy; masks are cached per predicate and
index version.
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence

import numpy as np

from .sparse import Signature, SparseIndex
from .sparse_segment import K1, B, Segment
from .visibility import SigColumns, Visibility

Phrase = tuple[float, float, list[tuple[Segment, int]], int]  # idf, score bound, where, term id
# Cached visibility masks, 1 byte per catalog id each: 64 MiB holds 640 predicates at 100k ids,
# 64 at 1M. A count of 16 thrashed as soon as callers used more distinct scopes or ACL groups
# than that (rebuilding one was 4 % of a 1 %-filter search at 100k).
_MASK_BYTES = 64 * 2**20
# Candidate selection sums float32 weights (half the memory traffic of float64). Each weight is
# within ~6 roundings (< 4e-7) of its double, a sum of up to 64 positive terms within 64 more
# (< 4e-6): every selection bound below is widened by EPS = 1e-5 relative, so no document that
# the exact double-precision ranking puts in the top k is ever left out.
EPS = 1e-5
# Exact scores read term frequencies from the query's postings up to this many (phrase, segment)
# lookups, from the shortlisted documents' forward lists beyond (_shortlist_tfs).
_POSTING_LOOKUPS = 64


class SparseSearcher:
    def __init__(self, index: SparseIndex) -> None:
        self.ix = index
        self._lock = threading.Lock()
        self._cols = SigColumns()  # the signatures as columns (visibility.py)
        self._masks: OrderedDict[tuple[Hashable, int, int], tuple[np.ndarray, bool]] = OrderedDict()
        self._mask_bytes = 0
        self._kd: tuple[tuple[int, int, int], np.ndarray] | None = None
        self._local = threading.local()  # per-thread score buffers, reused across queries

    def term_id(self, token: str) -> int | None:
        return self.ix.terms.get(token)

    def term_ids(self, word: str) -> tuple[int | None, ...]:
        """The index's term ids of FTS5's tokens of ``word`` (None: a token no Unit has); one
        per token, so a length above 1 means FTS5 reads ``word`` as a phrase. Words seen in the
        indexed text resolve through the index's own piece map, without asking FTS5."""
        known = self.ix._pieces.get(word)
        if known is not None:
            return known
        return tuple(self.ix.terms.get(t) for t in self.ix.tok.tokens(word))

    def term_ids_many(self, words: Sequence[str]) -> list[tuple[int | None, ...]]:
        """:meth:`term_ids` of each word, with every word the index has not seen tokenized by
        one FTS5 oracle run (one per word cost ~1 ms each: a query's unseen words were a third
        of a cold 1 %-filter search)."""
        known = self.ix._pieces
        out: list[tuple[int | None, ...] | None] = [known.get(w) for w in words]
        todo = [i for i, got in enumerate(out) if got is None]
        if todo:
            tok = self.ix.tok
            split = [tok.pieces(words[i]) for i in todo]
            flat = tok.piece_tokens([p for ps in split for p in ps])
            terms = self.ix.terms
            at = 0
            for i, ps in zip(todo, split, strict=True):
                toks = [t for pt in flat[at : at + len(ps)] for t in pt]
                at += len(ps)
                out[i] = tuple(terms.get(t) for t in toks)
        return [x if x is not None else () for x in out]

    # ------------------------------------------------------------------ visibility
    def mask(self, key: Hashable, pred: Callable[[Signature], bool]) -> tuple[np.ndarray, bool]:
        """Readable live documents under predicate ``pred`` (named ``key``), and whether that is
        every document the postings hold (then postings need no per-entry check); read lock
        held. A :class:`~.visibility.Visibility` is evaluated per distinct field value and
        gathered with numpy; any other callable, signature by signature."""
        ix = self.ix
        # The epoch: a reset index restarts its version at 0, and its signature list anew.
        ck = (key, ix.epoch, ix.version)
        with self._lock:
            hit = self._masks.get(ck)
            if hit is not None:
                self._masks.move_to_end(ck)
                return hit
            n = len(ix.sigs)
            if isinstance(pred, Visibility):
                self._cols.sync(ix.sigs, ix.epoch, n)
                ok = pred.over(self._cols)
            else:
                ok = np.fromiter((pred(s) for s in ix.sigs[:n]), dtype=bool, count=n)
        # sig -1 (no document) indexes the trailing False. ``take`` gathers at twice the speed
        # of ``[]`` (0.29 vs 0.56 ms at 160k ids): a mask is built per new predicate.
        m = np.append(ok, False).take(ix.sig)
        m &= ix.live
        full = ix.dead == 0 and int(np.count_nonzero(m)) == ix.n_docs
        with self._lock:
            if ck not in self._masks:
                self._mask_bytes += m.nbytes
            self._masks[ck] = (m, full)
            while self._mask_bytes > _MASK_BYTES and len(self._masks) > 1:
                self._mask_bytes -= self._masks.popitem(last=False)[1][0].nbytes
        return m, full

    def drop_masks(self) -> None:
        """Forget every cached mask (benchmarks measure the cold path with this)."""
        with self._lock:
            self._masks.clear()
            self._mask_bytes = 0

    def in_plane(self, docs: np.ndarray, plane: str) -> np.ndarray:
        """The documents of ``docs`` (readable, so with a signature) whose plane is ``plane``;
        read lock held. The plane is decided per signature (cached) and gathered at ``docs``
        only, where a mask of its own gathers over every document."""
        ix = self.ix
        with self._lock:
            cols = self._cols
            cols.sync(ix.sigs, ix.epoch, len(ix.sigs))
            ok = cols.part(("plane", plane), lambda: cols.cols[1].ok(lambda v: v == plane))
        return docs[ok[ix.sig[docs]]]

    def _k_doc(self, avgdl: float) -> np.ndarray:
        """``k1 * (1 - b + b * D / avgdl)`` per document, as float32 (candidate selection)."""
        ix = self.ix
        key = (ix.version, ix.total, ix.n_docs)
        got = self._kd
        if got is not None and got[0] == key:
            return got[1]
        kd = (K1 * (1 - B + B * ix.dl.astype(np.float64) / avgdl)).astype(np.float32)
        self._kd = (key, kd)
        return kd

    # ------------------------------------------------------------------ scoring
    def topk(
        self,
        tids: Sequence[int | None],
        mask: np.ndarray,
        k: int,
        *,
        full: bool = False,
        exhaustive: bool = False,
        stats: dict[str, int] | None = None,
    ) -> list[int]:
        """Catalog ids of the ``k`` best documents within ``mask``; read lock held.

        MaxScore: phrases are taken in decreasing order of their score bound; once the bounds of
        the phrases left sum below the k-th best partial score so far, no unseen document can
        reach the top k, and the phrases left are only looked up for the candidates that still
        can. Final scores are then summed phrase by phrase *in query order*, as FTS5 does, so
        they are FTS5's to the last bit. The phrases left are taken one at a time, and before
        each the candidates are pruned again against theta, raised to the k-th best partial
        among them after each (the candidate set shrinks from ~10^5 to ~10^2 in a few steps at
        1M documents, and with it the lookups). ``full``: the mask admits every document in the
        postings (skip the per-entry check). ``exhaustive`` scores every posting (comparison);
        ``stats`` receives the postings scored in full and in all.
        """
        ix = self.ix
        n_rows = ix.n_docs
        if k <= 0 or n_rows <= 0:
            return []
        avgdl = ix.total / n_rows
        segs = [*ix.segments, *ix.delta]
        # FTS5 adds 0.0 for a phrase that matches nothing: only phrases with postings count.
        live_tids = [t for t in tids if t is not None and int(ix.df[t]) > 0]
        if not live_tids:
            return []
        qt = np.asarray(live_tids, dtype=np.uint32)
        found: list[list[tuple[Segment, int]]] = [[] for _ in live_tids]
        for seg in segs:  # one vectorized dictionary lookup per segment
            pos = np.searchsorted(seg.t_ids, qt)
            ok = pos < len(seg.t_ids)
            ok[ok] = seg.t_ids[pos[ok]] == qt[ok]
            for j in np.flatnonzero(ok):
                found[j].append((seg, int(pos[j])))
        phrases: list[Phrase] = []
        for tid, locs in zip(live_tids, found, strict=True):
            n_hit = int(ix.df[tid])
            idf = math.log((n_rows - n_hit + 0.5) / (n_hit + 0.5))
            if idf <= 0.0:
                idf = 1e-6
            if locs:
                scale = max(
                    float(seg.t_ub[pos]) * max(1.0, avgdl / float(seg.a_build[0]))
                    for seg, pos in locs
                )
                phrases.append((idf, idf * scale * (1 + 1e-6), locs, tid))
        if not phrases:
            return []

        kd = self._k_doc(avgdl)

        def fast(docs: np.ndarray, tf: np.ndarray, idf: float) -> np.ndarray:
            # (f * idf(k1+1)) / (f + kd) in place: two temporaries instead of five, and within
            # the same few roundings of the double expression (EPS above).
            f = tf.astype(np.float32)
            den = kd.take(docs)
            den += f
            f *= np.float32(idf * (K1 + 1.0))
            f /= den
            return f

        order = sorted(range(len(phrases)), key=lambda j: -phrases[j][1])
        # Partial sums (any order): only used to choose the candidates, whose exact scores are
        # computed at the end. The buffers are zero outside this call (reset before returning).
        acc, seen = self._buffers(len(mask))
        try:
            return self._topk(
                phrases, order, acc, seen, mask, k, full, exhaustive, stats, fast, avgdl
            )
        finally:
            # Clearing whole buffers (memset, ~0.3 ms at 1M ids) beats finding the touched
            # entries (flatnonzero over 1M ids is 1-3 ms) and scattering zeros to them.
            acc.fill(0.0)
            seen.fill(False)

    def _shortlist_tfs(self, cand: np.ndarray, phrases: list[Phrase]) -> np.ndarray:
        """Term frequency of each phrase (columns) in each shortlisted document (rows).

        A document lives in one segment (catalog ids are never reused, texts never change), so
        either source gives the same counts: the phrases' own postings, one binary search of the
        shortlist per phrase and segment (a few hundred ids into sorted postings), or the
        documents' forward lists, a few gathers per segment but over every term of every
        shortlisted document (~150 each: 2/5 of a 1 %-filter top-k). Postings unless the query
        has many phrase x segment pairs.
        """
        if sum(len(p[2]) for p in phrases) <= _POSTING_LOOKUPS:
            out = np.zeros((len(cand), len(phrases)), dtype=np.uint16)
            c32 = cand.astype(np.uint32)  # the postings' dtype: no conversion of the postings
            for j, (_, _, locs, _) in enumerate(phrases):
                for seg, pos in locs:
                    docs, tf = seg.postings_at(pos)
                    if not len(docs):
                        continue
                    at = np.searchsorted(docs, c32)
                    at[at == len(docs)] = 0  # past the end: compared below, never equal there
                    hit = docs[at] == c32
                    out[hit, j] = tf[at[hit]]
            return out
        return self._forward_tfs(cand, phrases)

    def _forward_tfs(self, cand: np.ndarray, phrases: list[Phrase]) -> np.ndarray:
        """:meth:`_shortlist_tfs` from the documents' forward lists."""
        ix = self.ix
        tids = np.asarray([p[3] for p in phrases], dtype=np.uint32)
        uq, col_of = np.unique(tids, return_inverse=True)
        out = np.zeros((len(cand), len(uq)), dtype=np.uint16)
        for seg in (*ix.segments, *ix.delta):
            pos = np.searchsorted(seg.docs, cand)
            inseg = pos < len(seg.docs)
            inseg[inseg] = seg.docs[pos[inseg]] == cand[inseg]
            rows = np.flatnonzero(inseg)
            if not len(rows):
                continue
            starts = seg.f_off[pos[rows]]
            lens = seg.f_off[pos[rows] + 1] - starts
            first = np.cumsum(lens) - lens
            idx = np.repeat(starts - first, lens) + np.arange(int(lens.sum()))
            ft = seg.f_tid[idx]
            at = np.searchsorted(uq, ft)
            hit = at < len(uq)
            hit[hit] = uq[at[hit]] == ft[hit]
            out[np.repeat(rows, lens)[hit], at[hit]] = seg.f_tf[idx][hit]
        return out[:, col_of]

    def _buffers(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        bufs = getattr(self._local, "bufs", None)
        if bufs is None or len(bufs[0]) < n:
            size = max(n, 1024)
            bufs = (np.zeros(size, dtype=np.float32), np.zeros(size, dtype=bool))
            self._local.bufs = bufs
        return bufs[0][:n], bufs[1][:n]

    @staticmethod
    def _raise(theta: float, acc: np.ndarray, cand: np.ndarray, k: int) -> float:
        """``theta`` raised to the k-th best partial score among ``cand`` (distinct documents;
        scores only grow, so that stays a lower bound of the k-th best final score)."""
        if len(cand) <= k:
            return theta
        kth = float(np.partition(acc[cand], len(cand) - k)[len(cand) - k])
        return max(theta, kth * (1 - EPS))

    def _topk(
        self,
        phrases: list[Phrase],
        order: list[int],
        acc: np.ndarray,
        seen: np.ndarray,
        mask: np.ndarray,
        k: int,
        full: bool,
        exhaustive: bool,
        stats: dict[str, int] | None,
        fast: Callable[[np.ndarray, np.ndarray, float], np.ndarray],
        avgdl: float,
    ) -> list[int]:
        rest_after = [sum(phrases[x][1] for x in order[i:]) for i in range(len(order) + 1)]
        split, theta = len(order), -math.inf
        for step, j in enumerate(order):
            if step and not exhaustive and rest_after[step] < theta:
                split = step  # no document outside `seen` can reach the top k any more
                break
            idf, _, locs, _ = phrases[j]
            parts = []
            for seg, pos in locs:
                docs, tf = seg.postings_at(pos)
                if not full:
                    sel = mask.take(docs)  # take: twice the speed of [] here
                    docs, tf = docs[sel], tf[sel]
                # Fancy indexing converts uint32 indices to intp on every use: convert once.
                docs = docs.astype(np.intp)
                if len(docs):
                    # One segment per doc, once per term: the new partials are kept for theta.
                    part = acc[docs]
                    part += fast(docs, tf, idf)
                    acc[docs] = part
                    seen[docs] = True
                    parts.append(part)
            if not exhaustive and parts:
                part = np.concatenate(parts) if len(parts) > 1 else parts[0]
                if len(part) >= k:
                    # The k-th best partial among this phrase's documents: a lower bound of the
                    # k-th best final score (scores only grow), so pruning against it is safe.
                    part.partition(len(part) - k)
                    theta = max(theta, float(part[len(part) - k]) * (1 - EPS))
        if stats is not None:
            sizes = [sum(len(s.postings_at(p)[0]) for s, p in ph[2]) for ph in phrases]
            stats["postings"] = sum(sizes)
            stats["scored"] = sum(sizes[j] for j in order[:split])
            stats["phrases"], stats["essential"] = len(order), split
        cand = np.flatnonzero(seen)
        if split < len(order):
            cand = cand[acc[cand] * (1 + EPS) + rest_after[split] >= theta]
            theta = self._raise(theta, acc, cand, k)
            member: np.ndarray | None = None
            for step in range(split, len(order)):
                # A candidate whose partial score plus the bounds of the phrases left stays
                # below theta cannot reach the top k; theta rises as the partials grow.
                cand = cand[acc[cand] * (1 + EPS) + rest_after[step] >= theta]
                idf, _, locs, _ = phrases[order[step]]
                for seg, pos in locs:
                    docs, tf = seg.postings_at(pos)
                    if 16 * len(cand) < len(docs):
                        # In the postings' dtype: searchsorted would otherwise convert (copy)
                        # the whole postings list to the candidates' int64 on every call.
                        c32 = cand.astype(np.uint32)
                        at = np.minimum(np.searchsorted(docs, c32), len(docs) - 1)
                        hit = docs[at] == c32
                        d, f = cand[hit], tf[at[hit]]
                    else:
                        # Membership in a superset of the candidates: the first time ``seen``
                        # itself (no array to build), afterwards the candidates as a mask. A
                        # pruned document may gain a partial here; it is never read again.
                        if member is None:
                            member = seen
                        elif member is seen:
                            member = np.zeros(len(mask), dtype=bool)
                            member[cand] = True
                        sel = member.take(docs)
                        d, f = docs[sel].astype(np.intp), tf[sel]
                    if len(d):
                        acc[d] += fast(d, f, idf)
                theta = self._raise(theta, acc, cand, k)
        if len(cand) == 0:
            return []
        approx = acc[cand]
        if len(cand) > k:
            kth = float(np.partition(approx, len(cand) - k)[len(cand) - k])
            # approx is within EPS of the exact score: keep everything that could be in the top k.
            cand = cand[approx >= kth * (1 - 4 * EPS)]
        # Exact scores: FTS5's expression on the same doubles, one column per phrase, summed
        # left to right (cumsum is sequential) = FTS5's order; a tf of 0 adds exactly 0.0.
        f = self._shortlist_tfs(cand, phrases).astype(np.float64)
        idfs = np.array([p[0] for p in phrases])
        kx = K1 * (1 - B + B * self.ix.dl[cand].astype(np.float64) / avgdl)
        w = idfs[None, :] * ((f * (K1 + 1.0)) / (f + kx[:, None]))
        exact = np.cumsum(w, axis=1)[:, -1]
        top = np.lexsort((cand, -exact))[:k]
        return [int(x) for x in cand[top]]
