"""Immutable segments of the derived lexical index: postings and forward lists as numpy arrays.

A segment holds a set of documents (catalog ids, ascending) twice:

* inverted: for each term id present (``t_ids``, ascending) a slice ``t_off[i]:t_off[i+1]`` of
  ``p_doc`` (ascending ids) and ``p_tf`` (term frequency in text + context);
* forward: for each document a slice ``f_off[j]:f_off[j+1]`` of ``f_tid`` / ``f_tf``, which is what
  a delete needs to take the document's terms out of the live document frequencies;
* ``t_ub``: per term, an upper bound of its BM25 term-frequency factor in any of its documents,
  computed with each document's text tokens + 1 as its length (a document's true FTS5 length is
  at least that: its ACL column holds an owner token, and text never changes) and the average
  ``a_build`` of those lengths; at another average ``A`` the bound scales by ``max(1, A /
  a_build)``. Query-time pruning (MaxScore) relies on it.

Files are plain ``.npy`` in one directory, written to ``<name>.tmp`` with every file fsynced and
then renamed, and opened memory-mapped, so a large index pages in on demand.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ARRAYS = ("docs", "f_off", "f_tid", "f_tf", "t_ids", "t_off", "p_doc", "p_tf", "t_ub", "a_build")
K1, B = 1.2, 0.75  # FTS5's bm25() constants
TF_MAX = np.iinfo(np.uint16).max  # a term repeated > 65,535 times in one Unit saturates BM25 anyway


@dataclass(frozen=True)
class Segment:
    name: str
    docs: np.ndarray  # uint32 (n_docs,)
    f_off: np.ndarray  # int64 (n_docs + 1,)
    f_tid: np.ndarray  # uint32
    f_tf: np.ndarray  # uint16
    t_ids: np.ndarray  # uint32 (n_terms,)
    t_off: np.ndarray  # int64 (n_terms + 1,)
    p_doc: np.ndarray  # uint32
    p_tf: np.ndarray  # uint16
    t_ub: np.ndarray  # float32 (n_terms,)
    a_build: np.ndarray  # float64 (1,)

    @property
    def n_docs(self) -> int:
        return int(self.docs.shape[0])

    @property
    def n_postings(self) -> int:
        return int(self.p_doc.shape[0])

    def term(self, tid: int) -> int:
        """The position of term ``tid`` in this segment, or -1."""
        i = int(np.searchsorted(self.t_ids, tid))
        return i if i < len(self.t_ids) and int(self.t_ids[i]) == tid else -1

    def postings_at(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        a, b = int(self.t_off[i]), int(self.t_off[i + 1])
        return self.p_doc[a:b], self.p_tf[a:b]

    def postings(self, tid: int) -> tuple[np.ndarray, np.ndarray] | None:
        i = self.term(tid)
        return None if i < 0 else self.postings_at(i)

    def forward(self, doc: int) -> tuple[np.ndarray, np.ndarray] | None:
        j = int(np.searchsorted(self.docs, doc))
        if j >= len(self.docs) or int(self.docs[j]) != doc:
            return None
        a, b = int(self.f_off[j]), int(self.f_off[j + 1])
        return self.f_tid[a:b], self.f_tf[a:b]


def build(
    name: str, docs: np.ndarray, f_off: np.ndarray, f_tid: np.ndarray, f_tf: np.ndarray
) -> Segment:
    """A segment from forward lists; ``docs`` must be ascending and unique."""
    docs = np.ascontiguousarray(docs, dtype=np.uint32)
    f_off = np.ascontiguousarray(f_off, dtype=np.int64)
    f_tid = np.ascontiguousarray(f_tid, dtype=np.uint32)
    f_tf = np.ascontiguousarray(f_tf, dtype=np.uint16)
    lengths = np.diff(f_off)
    owner = np.repeat(docs, lengths)
    # A stable sort by term keeps each term's documents in ascending id order.
    order = np.argsort(f_tid, kind="stable")
    p_tid = f_tid[order]
    p_doc = owner[order]
    p_tf = f_tf[order]
    csum = np.concatenate(([0], np.cumsum(f_tf, dtype=np.int64)))
    dl_low = (csum[f_off[1:]] - csum[f_off[:-1]] + 1).astype(np.float64)
    a_build = float(dl_low.mean()) if len(dl_low) else 1.0
    if len(p_tid):
        starts = np.flatnonzero(np.concatenate(([True], p_tid[1:] != p_tid[:-1])))
        t_ids = p_tid[starts]
        t_off = np.append(starts, len(p_tid)).astype(np.int64)
        tf = p_tf.astype(np.float64)
        d = np.repeat(dl_low, lengths)[order]
        imp = (tf * (K1 + 1.0)) / (tf + K1 * (1 - B + B * d / a_build))
        t_ub = np.maximum.reduceat(imp, starts).astype(np.float32)
    else:
        t_ids = np.empty(0, np.uint32)
        t_off = np.zeros(1, np.int64)
        t_ub = np.empty(0, np.float32)
    a = np.array([a_build], np.float64)
    return Segment(name, docs, f_off, f_tid, f_tf, t_ids, t_off, p_doc, p_tf, t_ub, a)


def sorted_forward(
    docs: np.ndarray, lengths: np.ndarray, f_tid: np.ndarray, f_tf: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Forward lists reordered so that ``docs`` ascend (no copy when they already do)."""
    order = np.argsort(docs, kind="stable")
    if len(order) < 2 or np.all(order[1:] > order[:-1]):
        return docs, lengths, f_tid, f_tf
    starts = np.zeros(len(docs) + 1, np.int64)
    np.cumsum(lengths, out=starts[1:])
    new_len = lengths[order]
    new_off = np.zeros(len(docs) + 1, np.int64)
    np.cumsum(new_len, out=new_off[1:])
    idx = np.repeat(starts[:-1][order] - new_off[:-1], new_len) + np.arange(new_off[-1])
    return docs[order], new_len, f_tid[idx], f_tf[idx]


def from_forward(
    name: str, docs: np.ndarray, lengths: np.ndarray, f_tid: np.ndarray, f_tf: np.ndarray
) -> Segment:
    """A segment from forward lists in any document order (``docs`` unique)."""
    docs, lengths, f_tid, f_tf = sorted_forward(
        np.asarray(docs, np.uint32), np.asarray(lengths, np.int64), f_tid, f_tf
    )
    f_off = np.zeros(len(docs) + 1, np.int64)
    np.cumsum(lengths, out=f_off[1:])
    return build(name, docs, f_off, f_tid, f_tf)


def merge(name: str, segs: list[Segment], live: np.ndarray) -> Segment:
    """One segment with the live documents of ``segs`` (dead ones are dropped here)."""
    docs_l, len_l, tid_l, tf_l = [], [], [], []
    for s in segs:
        keep = live[s.docs.astype(np.int64)]
        lengths = np.diff(s.f_off)
        entry_keep = np.repeat(keep, lengths)
        docs_l.append(s.docs[keep])
        len_l.append(lengths[keep])
        tid_l.append(s.f_tid[entry_keep])
        tf_l.append(s.f_tf[entry_keep])
    return from_forward(
        name,
        np.concatenate(docs_l),
        np.concatenate(len_l),
        np.concatenate(tid_l),
        np.concatenate(tf_l),
    )


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def save(seg: Segment, parent: Path) -> None:
    """Write ``parent/<name>/`` atomically (tmp dir, fsync every file, rename, fsync parent)."""
    final = parent / seg.name
    if final.exists():  # an orphan a crash left before its state was written: never referenced
        shutil.rmtree(final)
    tmp = parent / f"{seg.name}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    for a in ARRAYS:
        np.save(tmp / f"{a}.npy", getattr(seg, a))
        _fsync(tmp / f"{a}.npy")
    _fsync(tmp)
    os.replace(tmp, final)
    _fsync(parent)


def load(parent: Path, name: str) -> Segment:
    """Open a saved segment memory-mapped; raises OSError/ValueError when it is damaged."""
    d = parent / name
    # Plain ndarray views of the maps: slicing a np.memmap runs Python code per slice.
    arrs = {
        a: np.load(d / f"{a}.npy", mmap_mode="r", allow_pickle=False).view(np.ndarray)
        for a in ARRAYS
    }
    seg = Segment(name, **arrs)
    n = seg.n_docs
    if (
        len(seg.f_off) != n + 1
        or int(seg.f_off[-1]) != len(seg.f_tid)
        or len(seg.f_tf) != len(seg.f_tid)
        or len(seg.t_off) != len(seg.t_ids) + 1
        or int(seg.t_off[-1]) != len(seg.p_doc)
        or len(seg.p_tf) != len(seg.p_doc)
        or len(seg.p_doc) != len(seg.f_tid)
        or len(seg.t_ub) != len(seg.t_ids)
        or len(seg.a_build) != 1
    ):
        raise ValueError(f"segment {name} is inconsistent")
    return seg
