"""Derived lexical index: BM25 postings in numpy, kept in lockstep with the catalog (D-25).

FTS5 stays the catalog's index (triggers, snippets, ``doctor``); this index is derived from the
catalog exactly like the vector index (D-44): the owner applies the same outbox rows
under the writer lock before the acknowledgement (``add`` reads the Unit's text, context and ACL
from the catalog, and on a key it already holds refreshes the ACL, which is how an ACL update
reaches it; ``remove`` retires the document). A checkpoint writes new segments and a state file
``state.<seq>.npz`` whose ``seq`` is the durable watermark; on start the newest valid state is
loaded, later outbox rows are replayed, or the whole index is rebuilt from the catalog.

Documents are addressed by catalog id (ids are never reused), so per-document arrays (``live``,
``dl``, ``sig``) are indexed by id. Tokens are FTS5's own (``fts5_tokens``), and the statistics
are FTS5's: ``N`` rows, ``dl`` = tokens of text + context + acl, document frequency over
text + context; so ``bm25()`` is reproduced to the last bit (``sparse_search.py``).
A document's visibility attributes (scope, plane, modality, owner, groups) are one
*signature* id, so a query's scope/ACL predicate is evaluated once per distinct signature.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import sqlite3
import threading
import zipfile
from collections.abc import Iterable, Iterator, Mapping, Sequence
from itertools import chain, count
from pathlib import Path
from typing import Any

import numpy as np

from ... import faults
from ..vectors import _fsync_dir, _RWLock
from . import sparse_segment as segmod
from .fts5_tokens import TOKENIZE, Fts5Tokenizer
from .sparse_segment import Segment

log = logging.getLogger(__name__)

FORMAT = 1
_STATE_RE = re.compile(r"^state\.(?P<seq>\d+)\.npz$")
_ROW_SQL = "SELECT id, text, context, acl, scope, plane, modality, acl_owner, acl_groups FROM units"
Signature = tuple[str, str, str, str, tuple[str, ...]]  # scope, plane, modality, owner, groups
_EPOCHS = count()


class SparseIndex:
    def __init__(
        self,
        directory: Path,
        tokenizer: Fts5Tokenizer | None = None,
        *,
        delta_max: int = 50_000,
        max_segments: int = 12,
    ) -> None:
        self.dir = Path(directory)
        self.tok = tokenizer or Fts5Tokenizer()
        self.delta_max = delta_max
        self.max_segments = max_segments
        self._mutex = threading.Lock()  # writers (apply, checkpoint, rebuild)
        self.rw = _RWLock()  # searches read; in-memory mutations write
        self._reset()

    def _reset(self) -> None:
        # A new epoch per reset: query-side caches key on (epoch, version), and a reset index
        # starts its version (and its signature ids) again from 0.
        self.epoch = next(_EPOCHS)
        self.terms: dict[str, int] = {}
        self.term_list: list[str] = []
        self.df = np.zeros(1024, np.int64)
        self.live = np.zeros(1024, bool)
        self.dl = np.zeros(1024, np.int32)
        self.sig = np.full(1024, -1, np.int32)
        self.sigs: list[Signature] = []
        self._sig_ids: dict[Signature, int] = {}
        self.n_docs = 0
        self.total = 0  # tokens over all live rows and columns (FTS5's xColumnTotalSize(-1))
        self.segments: list[Segment] = []  # saved, memory-mapped (or awaiting a checkpoint)
        self.delta: list[Segment] = []  # one small in-memory segment per recent apply
        self._delta_docs = 0
        self.dead = 0  # removed documents whose postings a merge has not dropped yet
        self._pieces: dict[str, tuple[int, ...]] = {}  # text piece -> its term ids
        self._acl_lens: dict[str, int] = {}
        self._saved: set[str] = set()
        self._n_seg = 0
        self.applied = 0
        self.durable = 0
        self._terms_durable = 0
        self._terms_nbytes = 0  # bytes of terms.txt that the durable state covers
        self.version = 0  # bumped by every in-memory change: keys the query-side caches

    # ------------------------------------------------------------------ growth helpers
    def _ensure_docs(self, top: int) -> None:
        if top < len(self.live):
            return
        cap = max(top + 1, 2 * len(self.live))
        with self.rw.write():
            for name, fill in (("live", False), ("dl", 0), ("sig", -1)):
                old = getattr(self, name)
                new = np.full(cap, fill, old.dtype)
                new[: len(old)] = old
                setattr(self, name, new)

    def _learn(self, pieces: Iterable[str]) -> None:
        """Term ids of pieces never seen (FTS5 tokenizes each once; new terms get new ids)."""
        new = [p for p in dict.fromkeys(pieces) if p not in self._pieces]
        terms, term_list = self.terms, self.term_list
        for piece, toks in zip(new, self.tok.piece_tokens(new), strict=True):
            ids = []
            for t in toks:
                i = terms.get(t)
                if i is None:
                    i = terms[t] = len(term_list)
                    term_list.append(t)
                ids.append(i)
            self._pieces[piece] = tuple(ids)
        if len(term_list) > len(self.df):
            df = np.zeros(2 * len(term_list), np.int64)
            df[: len(self.df)] = self.df
            with self.rw.write():
                self.df = df

    def _sig_id(self, s: Signature) -> int:
        i = self._sig_ids.get(s)
        if i is None:
            i = self._sig_ids[s] = len(self.sigs)
            self.sigs.append(s)
        return i

    @staticmethod
    def signature(row: Any) -> Signature:
        return (
            row["scope"],
            row["plane"],
            row["modality"],
            row["acl_owner"],
            tuple(json.loads(row["acl_groups"])),
        )

    def _acl_len(self, acl: str) -> int:
        n = self._acl_lens.get(acl)
        if n is None:
            n = self._acl_lens[acl] = len(self.tok.tokens(acl))
            if len(self._acl_lens) > 100_000:
                self._acl_lens.clear()
        return n

    # ------------------------------------------------------------------ analysis
    def _analyze(self, rows: Sequence[Any]) -> tuple[Segment, np.ndarray, np.ndarray] | None:
        """A segment of ``rows`` (FTS5's tokens of text + context), their ``dl`` and signatures.

        Text is cut into pieces by a C regex and each piece maps to its term ids through a dict,
        so the per-token work stays in C (``map``/``chain``) after the vocabulary is learned.
        """
        if not rows:
            return None
        split = [self.tok.pieces(f"{r['text']}\n{r['context']}") for r in rows]
        get = self._pieces.__getitem__
        try:
            per_doc = [list(chain.from_iterable(map(get, ps))) for ps in split]
        except KeyError:
            self._learn(chain.from_iterable(split))
            per_doc = [list(chain.from_iterable(map(get, ps))) for ps in split]
        n = len(rows)
        lens = np.fromiter(map(len, per_doc), dtype=np.int64, count=n)
        flat = np.fromiter(chain.from_iterable(per_doc), dtype=np.int64, count=int(lens.sum()))
        owner = np.repeat(np.arange(n, dtype=np.int64), lens)
        keys, counts = np.unique((owner << 32) | flat, return_counts=True)
        distinct = np.bincount(keys >> 32, minlength=n)
        f_tid = (keys & 0xFFFFFFFF).astype(np.uint32)
        f_tf = np.minimum(counts, segmod.TF_MAX).astype(np.uint16)
        ids = np.fromiter((int(r["id"]) for r in rows), dtype=np.int64, count=n)
        dl = lens + np.fromiter((self._acl_len(r["acl"]) for r in rows), np.int64, count=n)
        sig = np.fromiter((self._sig_id(self.signature(r)) for r in rows), dtype=np.int32, count=n)
        order = np.argsort(ids, kind="stable")
        seg = segmod.from_forward(self._new_name(), ids, distinct, f_tid, f_tf)
        return seg, dl[order], sig[order]

    # ------------------------------------------------------------------ mutation (mutex held)
    def _add(self, analyzed: tuple[Segment, np.ndarray, np.ndarray] | None) -> None:
        if analyzed is None:
            return
        seg, dl, sig = analyzed
        docs = seg.docs.astype(np.int64)
        self._ensure_docs(int(docs[-1]))
        tf_df = np.bincount(seg.f_tid, minlength=len(self.term_list))
        with self.rw.write():
            self.live[docs] = True
            self.dl[docs] = dl
            self.sig[docs] = sig
            self.df[: len(tf_df)] += tf_df
            self.n_docs += len(docs)
            self.total += int(dl.sum())
            self.delta.append(seg)
            self._delta_docs += len(docs)
            self.version += 1

    def _forward(self, doc: int) -> tuple[np.ndarray, np.ndarray] | None:
        for s in (*self.delta, *self.segments):
            f = s.forward(doc)
            if f is not None:
                return f
        return None

    def _remove(self, doc: int) -> None:
        if doc >= len(self.live) or not self.live[doc]:
            return  # idempotent: never added, or already removed
        fwd = self._forward(doc)
        with self.rw.write():
            if fwd is not None:
                self.df[fwd[0].astype(np.int64)] -= 1
            self.live[doc] = False  # its postings stay (masked) until a merge drops them
            self.dead += 1
            self.n_docs -= 1
            self.total -= int(self.dl[doc])
            self.version += 1

    def _refresh(self, row: Any) -> None:
        """An ``add`` for a document already held: the ACL may have changed (text cannot)."""
        doc = int(row["id"])
        sig = self._sig_id(self.signature(row))
        old_acl = int(self.dl[doc]) - self._text_len(doc)
        new_acl = len(self.tok.tokens(row["acl"]))
        if sig == int(self.sig[doc]) and old_acl == new_acl:
            return
        with self.rw.write():
            self.sig[doc] = sig
            self.dl[doc] += new_acl - old_acl
            self.total += new_acl - old_acl
            self.version += 1

    def _text_len(self, doc: int) -> int:
        fwd = self._forward(doc)
        return 0 if fwd is None else int(fwd[1].sum(dtype=np.int64))

    def apply(self, conn: sqlite3.Connection, ops: Sequence[tuple[int, str, int]]) -> None:
        """Apply outbox ops ``(seq, op, key)`` idempotently in seq order; skips applied seqs."""
        with self._mutex:
            todo = sorted((o for o in ops if o[0] > self.applied), key=lambda o: o[0])
            if not todo:
                return
            adds = sorted({k for _, op, k in todo if op == "add"})
            rows: dict[int, Any] = {}
            for i in range(0, len(adds), 500):
                part = adds[i : i + 500]
                marks = ",".join("?" * len(part))
                for r in conn.execute(f"{_ROW_SQL} WHERE id IN ({marks})", part):
                    rows[int(r["id"])] = r
            faults.point("sparse.apply.before")
            self._apply_ops([(op, key) for _, op, key in todo], rows)
            self.applied = todo[-1][0]
            if self._delta_docs >= self.delta_max:
                self._flush_delta()
            faults.point("sparse.apply.after")

    def apply_rows(self, ops: Sequence[tuple[str, int]], rows: Mapping[int, Any]) -> None:
        """Apply ``(op, key)`` in order with the Units' current ``rows`` (an ``add`` whose key
        has no row was deleted since, and is skipped). Idempotent, whatever was applied
        before: the PostgreSQL backend's tail re-reads a window of ops (``lexical_tail.py``)."""
        with self._mutex:
            self._apply_ops(ops, rows)
            if self._delta_docs >= self.delta_max:
                self._flush_delta()

    def _apply_ops(self, ops: Sequence[tuple[str, int]], rows: Mapping[int, Any]) -> None:
        i = 0
        while i < len(ops):
            op, key = ops[i]
            if op == "remove":
                self._remove(key)
                i += 1
                continue
            j = i
            fresh: dict[int, Any] = {}
            while j < len(ops) and ops[j][0] == "add":
                k = ops[j][1]
                r = rows.get(k)
                if r is not None:
                    if k < len(self.live) and self.live[k]:
                        self._refresh(r)
                    else:
                        fresh.setdefault(k, r)
                j += 1
            self._add(self._analyze(list(fresh.values())))
            i = j

    def advance(self, seq: int) -> None:
        """Every outbox op up to ``seq`` is known to be applied (none were pending)."""
        with self._mutex:
            self.applied = max(self.applied, seq)

    # ------------------------------------------------------------------ segments
    def _new_name(self) -> str:
        self._n_seg += 1
        return f"seg-{self._n_seg:06d}"

    def _flush_delta(self) -> None:
        """The in-memory segments of recent applies become one segment (dead documents dropped);
        more than ``max_segments`` segments are merged, smallest first."""
        if not self.delta:
            return
        seg = (
            self.delta[0]
            if len(self.delta) == 1
            else segmod.merge(self._new_name(), self.delta, self.live)
        )
        with self.rw.write():
            self.segments.append(seg)
            self.delta = []
            self._delta_docs = 0
            self.version += 1
        while len(self.segments) > self.max_segments:
            a, b = sorted(self.segments, key=lambda s: s.n_docs)[:2]
            merged = segmod.merge(self._new_name(), [a, b], self.live)
            with self.rw.write():
                self.segments = [s for s in self.segments if s is not a and s is not b]
                self.segments.append(merged)
                self.version += 1
        self._count_dead()

    def _count_dead(self) -> None:
        dead = sum(
            int(np.count_nonzero(~self.live[s.docs.astype(np.int64)]))
            for s in (*self.segments, *self.delta)
        )
        with self.rw.write():
            self.dead = dead
            self.version += 1

    # ------------------------------------------------------------------ persistence
    def _states(self) -> list[tuple[int, Path]]:
        if not self.dir.is_dir():
            return []
        out = []
        for p in self.dir.iterdir():
            m = _STATE_RE.match(p.name)
            if m:
                out.append((int(m["seq"]), p))
        return sorted(out, reverse=True)

    def _meta(self) -> dict[str, Any]:
        return {"format": FORMAT, "tokenize": TOKENIZE}

    def checkpoint(self) -> None:
        """Flush, save new segments and terms, then ``state.<seq>.npz`` (tmp, fsync, rename)."""
        with self._mutex:
            if self.applied == self.durable and not self.delta and self._all_saved():
                return
            self.dir.mkdir(parents=True, exist_ok=True)
            meta = self.dir / "meta.json"
            if not meta.exists():
                meta.write_text(json.dumps(self._meta()))
            self._flush_delta()
            faults.point("sparse.checkpoint.before_segments")
            for i, s in enumerate(list(self.segments)):
                if s.name not in self._saved:
                    segmod.save(s, self.dir)
                    loaded = segmod.load(self.dir, s.name)  # memory-mapped from now on
                    with self.rw.write():
                        self.segments[i] = loaded
                    self._saved.add(s.name)
            with open(self.dir / "terms.txt", "a", encoding="utf-8") as fh:
                fh.seek(0, os.SEEK_END)
                fh.truncate(self._terms_nbytes)  # drop what a crash left past the state
                new = "".join(t + "\n" for t in self.term_list[self._terms_durable :])
                fh.write(new)
                fh.flush()
                os.fsync(fh.fileno())
            self._terms_durable = len(self.term_list)
            self._terms_nbytes += len(new.encode("utf-8"))
            seq = self.applied
            top = len(self.live)
            tmp = self.dir / "state.tmp"
            with open(tmp, "wb") as fh:
                np.savez(
                    fh,
                    live=self.live[:top],
                    dl=self.dl[:top],
                    sig=self.sig[:top],
                    df=self.df[: len(self.term_list)],
                    info=np.array(
                        json.dumps(
                            {
                                "seq": seq,
                                "n_terms": len(self.term_list),
                                "n_docs": self.n_docs,
                                "total": self.total,
                                "segments": [s.name for s in self.segments],
                                "n_seg": self._n_seg,
                                "sigs": self.sigs,
                            }
                        )
                    ),
                )
                fh.flush()
                os.fsync(fh.fileno())
            faults.point("sparse.checkpoint.mid_save")
            os.replace(tmp, self.dir / f"state.{seq}.npz")
            _fsync_dir(self.dir)
            faults.point("sparse.checkpoint.after_rename")
            self.durable = seq
            self._cleanup(seq)

    def _all_saved(self) -> bool:
        return all(s.name in self._saved for s in self.segments)

    def _cleanup(self, seq: int) -> None:
        keep = {s.name for s in self.segments}
        for s, p in self._states():
            if s != seq:
                p.unlink(missing_ok=True)
        for p in self.dir.iterdir():
            if p.is_dir() and p.name.startswith("seg-") and p.name not in keep:
                shutil.rmtree(p, ignore_errors=True)

    def load(self) -> int:
        """Load the newest valid state; returns its watermark (0 when none: rebuild or replay)."""
        with self._mutex:
            self._reset()
            if not self.dir.is_dir():
                return 0
            (self.dir / "state.tmp").unlink(missing_ok=True)
            meta = self.dir / "meta.json"
            try:
                fmt = json.loads(meta.read_text()).get("format") if meta.exists() else FORMAT
            except (OSError, ValueError):
                fmt = None
            if fmt != FORMAT:  # another layout: start empty (the caller rebuilds or replays)
                log.warning("lexical index format %s != %s: rebuilding", fmt, FORMAT)
                for _, p in self._states():
                    p.unlink(missing_ok=True)
                meta.unlink(missing_ok=True)
                return 0
            for seq, path in self._states():
                try:
                    self._load_state(path)
                    self.applied = self.durable = seq
                    return seq
                except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as exc:
                    log.warning("lexical index state %s is invalid (%s); falling back", path, exc)
                    os.replace(path, path.with_name(path.name + ".corrupt"))
                    self._reset()
            return 0

    def _load_state(self, path: Path) -> None:
        with np.load(path, allow_pickle=False) as z:
            info = json.loads(str(z["info"]))
            live, dl, sig, df = z["live"], z["dl"], z["sig"], z["df"]
        with open(self.dir / "terms.txt", encoding="utf-8") as fh:
            terms = fh.read().split("\n")[: info["n_terms"]]
        if len(terms) != info["n_terms"] or len(df) != info["n_terms"]:
            raise ValueError("terms file shorter than the state")
        segs = [segmod.load(self.dir, n) for n in info["segments"]]
        if int(live.sum()) != info["n_docs"]:
            raise ValueError("live count differs from the recorded document count")
        self.term_list = terms
        self.terms = {t: i for i, t in enumerate(terms)}
        self.df = np.array(df, np.int64)
        self.live, self.dl, self.sig = np.array(live), np.array(dl), np.array(sig)
        self.sigs = [(a, b, c, d, tuple(e)) for a, b, c, d, e in info["sigs"]]
        self._sig_ids = {s: i for i, s in enumerate(self.sigs)}
        self.n_docs, self.total = int(info["n_docs"]), int(info["total"])
        self.segments = segs
        self._saved = {s.name for s in segs}
        self._n_seg = int(info["n_seg"])
        self._terms_durable = len(terms)
        self._terms_nbytes = sum(len(t.encode("utf-8")) + 1 for t in terms)
        self._n_seg = max(self._n_seg, self._max_seg_on_disk())
        self._count_dead()

    def rebuild(self, conn: sqlite3.Connection, seq: int, batch: int = 20_000) -> None:
        """Replace the index with the catalog's current Units, as of outbox ``seq``."""

        def batches() -> Iterator[Sequence[Any]]:
            last = 0
            while True:
                rows = conn.execute(
                    f"{_ROW_SQL} WHERE id > ? ORDER BY id LIMIT ?", (last, batch)
                ).fetchall()
                if not rows:
                    return
                yield rows
                last = int(rows[-1]["id"])

        with self._mutex:
            self._load(batches())
            self.applied = seq
            self.durable = 0
            # Old files describe another state: the next checkpoint writes a fresh set.
            if self.dir.is_dir():
                (self.dir / "terms.txt").unlink(missing_ok=True)
                for _, p in self._states():
                    p.unlink(missing_ok=True)

    def load_rows(self, batches: Iterable[Sequence[Any]]) -> None:
        """Replace the index with the Units of ``batches`` (rows in ascending id order, with
        the columns of ``_ROW_SQL``): how another store's process builds it (no checkpoint)."""
        with self._mutex:
            self._load(batches)

    def _load(self, batches: Iterable[Sequence[Any]]) -> None:
        self._reset()
        self._n_seg = self._max_seg_on_disk()  # never reuse a name an old file may hold
        for rows in batches:
            self._add(self._analyze(rows))
            if self._delta_docs >= self.delta_max:
                self._flush_delta()
            faults.point("sparse.rebuild.batch")

    def _max_seg_on_disk(self) -> int:
        best = 0
        if self.dir.is_dir():
            for p in self.dir.iterdir():
                if p.name.startswith("seg-") and p.name[4:10].isdigit():
                    best = max(best, int(p.name[4:10]))
        return best

    # ------------------------------------------------------------------ introspection
    def keys(self) -> np.ndarray:
        return np.flatnonzero(self.live).astype(np.uint64)

    def stats(self) -> dict[str, Any]:
        return {
            "docs": self.n_docs,
            "terms": len(self.term_list),
            "segments": len(self.segments),
            "delta_docs": self._delta_docs,
            "postings": sum(s.n_postings for s in self.segments),
            "applied_seq": self.applied,
            "durable_seq": self.durable,
        }

    def all_terms(self) -> Iterable[str]:
        return iter(self.term_list)
