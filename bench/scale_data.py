"""Deterministic synthetic-but-real scale data: N Units and a query set, for 10k to 1M benchmarks.

* **Text** comes from the real corpora of the eval folder (``SCDB_EVAL_DIR``: SciFact abstracts,
  Cranfield, ADI, XQuAD paragraphs): each Unit is a window of 2-6 consecutive sentences of one
  source document, sometimes led by its title and sometimes followed by one sentence of another
  document, so term statistics and document lengths are those of real text.
* **Vectors** come from a pool of real embeddings: every source document (its title and first
  sentences, up to 400 characters) is embedded once with our default model and cached under
  ``bench/results/cache/scale_pool.npz`` (git-ignored). A Unit's vector is its source document's
  embedding (plus 0.3 x the other document's when it borrowed a sentence) plus gaussian noise,
  normalized and stored as float16, so the index sees clusters of near neighbours as real data
  does, never exact duplicates.
* **Scopes and groups** give filters of 100 %, 10 % and 1 % selectivity: a Unit's scope is
  ``acme/alpha/bench/t<b//10>/u<b>`` for a stable bucket ``b`` of its ``doc_id`` (the scheme of
  bench/common/data.py), and its one ACL group ``bench-g<g>`` uses an independent bucket ``g``. A
  query scoped to ``.../t3`` sees ~10 % of the Units, ``.../t3/u35`` ~1 %; a principal in 10 of
  the 100 groups (and not the owner) reads ~10 %.
* **Queries** are real: SciFact test claims, Cranfield and ADI queries, XQuAD questions, with
  their real embeddings (cached the same way) and a filter bucket each.

Unit ``i`` depends only on ``(seed, i)`` (generated in fixed blocks of 10,000), so the 10k set is a
prefix of the 100k set, which is a prefix of the 1M set, whatever the batch size.

    .venv/bin/python -m bench.scale_data --n 100000 --out /tmp/scale100k   # units.jsonl,
        vectors.npy, queries.jsonl, query_vectors.npy  (then: superchargedb import ...)

Library use (bench.scale, bench.peers)::

    data = ScaleData.load()                 # embeds the pool once, then reads the cache
    for records, vectors in data.batches(n, batch=50_000): ...
    qs = data.queries()                     # list[ScaleQuery]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bench.common import evaldir
from bench.common.data import bucket, doc_scope, filter_scope
from bench.common.embedcache import live_embedder, open_cache
from bench.common.paths import CACHE_DIR

BLOCK = 10_000  # units per independently seeded block
DEFAULT_SEED = 20240607
NOISE_SIGMA = 0.026  # per dimension: ||noise|| ~ 0.5, cosine to the source ~ 0.89
MIX = 0.3  # weight of the borrowed sentence's document in the vector
OWNER = "alice"  # the demo principal granted acme/alpha; bench principals read by group
SOURCES = ("scifact", "classic-cranfield", "classic-adi", "xquad-en")
FILTERS = ("100%", "10%", "1%")
POOL_CHARS = 400
_SENT = re.compile(r"(?<=[.!?])\s+(?=\S)")


@dataclass(frozen=True)
class ScaleQuery:
    qid: str
    source: str
    text: str
    vector: np.ndarray  # float32, unit length
    bucket: int  # 0..99: picks the 10 % and 1 % filter (scope and groups)

    def scope(self, level: str) -> str:
        return filter_scope(level, self.bucket)

    def groups(self, level: str) -> list[str]:
        return acl_groups_for(level, self.bucket)


def scope_bucket(doc_id: str) -> int:
    return bucket(doc_id)


def group_bucket(doc_id: str) -> int:
    return zlib.crc32(b"acl\0" + doc_id.encode("utf-8")) % 100


def group_name(g: int) -> str:
    return f"bench-g{g:02d}"


def acl_groups_for(level: str, u: int) -> list[str]:
    """The groups a principal needs to read ~``level`` of the Units (not being their owner)."""
    if level == "100%":
        return [group_name(g) for g in range(100)]
    if level == "10%":
        return [group_name(g) for g in range(10 * (u // 10), 10 * (u // 10) + 10)]
    if level == "1%":
        return [group_name(u)]
    raise ValueError(level)


def _pool_text(title: str, sents: list[str]) -> str:
    """What is embedded for a source document: its title and first sentences (~80 tokens, which
    keeps the one-off pool embedding cheap on a small machine)."""
    text = " ".join(sents[:3])[:POOL_CHARS]
    return f"{title}\n{text}" if title else text


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENT.split(text) if s.strip()]


class ScaleData:
    """Source documents (sentences + pooled embedding) and the query set."""

    def __init__(
        self,
        titles: list[str],
        sentences: list[list[str]],
        pool: np.ndarray,
        queries: list[ScaleQuery],
        model_id: str,
        seed: int = DEFAULT_SEED,
    ) -> None:
        self.titles = titles
        self.sentences = sentences
        self.pool = pool.astype(np.float32)
        self._queries = queries
        self.model_id = model_id
        self.seed = seed

    # ------------------------------------------------------------------ loading
    @classmethod
    def load(
        cls,
        eval_dir: Path | None = None,
        cache_dir: Path = CACHE_DIR,
        seed: int = DEFAULT_SEED,
        progress: bool = True,
        max_docs: int | None = None,
        max_queries: int | None = None,
    ) -> ScaleData:
        """``max_docs`` / ``max_queries`` (smoke runs) take that many from the sources, evenly.
        ``eval_dir``: the evaluation data (default ``$SCDB_EVAL_DIR``; stops if unset)."""
        eval_dir = evaldir.eval_dir(eval_dir)
        titles: list[str] = []
        sentences: list[list[str]] = []
        pool_texts: list[str] = []
        for name in SOURCES:
            path = eval_dir / name / "corpus.jsonl"
            per_source = None if max_docs is None else max(1, max_docs // len(SOURCES))
            with open(path, encoding="utf-8") as fh:
                for k, line in enumerate(fh):
                    if per_source is not None and k >= per_source:
                        break
                    doc = json.loads(line)
                    sents = _sentences(doc.get("text") or "")
                    if len(sents) < 1:
                        continue
                    titles.append((doc.get("title") or "").strip())
                    sentences.append(sents)
                    pool_texts.append(_pool_text(titles[-1], sents))
        qtexts = _query_texts(eval_dir)
        if max_queries is not None:
            qtexts = qtexts[:: max(1, len(qtexts) // max_queries)][:max_queries]
        cache = open_cache("scale_pool", cache_dir)
        pool = _embed_cached(cache, pool_texts, "embed pool", progress)
        qvecs = _embed_cached(cache, [t for _, _, t in qtexts], "embed queries", progress)
        cache.save()
        queries = [
            ScaleQuery(qid, src, text, qvecs[i], (i * 37) % 100)
            for i, (src, qid, text) in enumerate(qtexts)
        ]
        assert cache.model_id is not None
        return cls(titles, sentences, pool, queries, cache.model_id, seed)

    @property
    def dim(self) -> int:
        return int(self.pool.shape[1])

    def queries(self, sources: tuple[str, ...] | None = None) -> list[ScaleQuery]:
        return [q for q in self._queries if sources is None or q.source in sources]

    # ------------------------------------------------------------------ generation
    def block(self, b: int) -> tuple[list[dict[str, Any]], np.ndarray]:
        """Units ``b*BLOCK .. (b+1)*BLOCK-1``: import records and float16 unit vectors."""
        rng = np.random.default_rng([self.seed, b])
        n_docs = len(self.sentences)
        base = rng.integers(0, n_docs, BLOCK)
        other = rng.integers(0, n_docs, BLOCK)
        borrow = rng.random(BLOCK) < 0.25
        with_title = rng.random(BLOCK) < 0.3
        length = rng.integers(2, 7, BLOCK)
        start_u = rng.random(BLOCK)
        pick_u = rng.random(BLOCK)
        noise = rng.standard_normal((BLOCK, self.dim), dtype=np.float32) * NOISE_SIGMA
        vecs = self.pool[base] + noise
        vecs[borrow] += MIX * self.pool[other[borrow]]
        vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
        records: list[dict[str, Any]] = []
        for j in range(BLOCK):
            i = b * BLOCK + j
            sents = self.sentences[base[j]]
            n = min(int(length[j]), len(sents))
            s0 = int(start_u[j] * (len(sents) - n + 1))
            parts = sents[s0 : s0 + n]
            if with_title[j] and self.titles[base[j]]:
                parts = [self.titles[base[j]], *parts]
            if borrow[j]:
                o = self.sentences[other[j]]
                parts = [*parts, o[int(pick_u[j] * len(o))]]
            doc_id = f"s{i:07d}"
            records.append(
                {
                    "doc_id": doc_id,
                    "text": " ".join(parts),
                    "scope": doc_scope(doc_id),
                    "acl_owner": OWNER,
                    "acl_groups": [group_name(group_bucket(doc_id))],
                }
            )
        return records, vecs.astype(np.float16)

    def batches(
        self, n: int, batch: int = 50_000
    ) -> Iterator[tuple[list[dict[str, Any]], np.ndarray]]:
        """The first ``n`` Units in batches of about ``batch`` (whole blocks, last one cut)."""
        per = max(1, batch // BLOCK)
        recs: list[dict[str, Any]] = []
        vecs: list[np.ndarray] = []
        done = 0
        for b in range((n + BLOCK - 1) // BLOCK):
            r, v = self.block(b)
            take = min(BLOCK, n - b * BLOCK)
            recs += r[:take]
            vecs.append(v[:take])
            if len(vecs) == per or b * BLOCK + take >= n:
                yield recs, np.concatenate(vecs)
                done += len(recs)
                recs, vecs = [], []

    def write(self, n: int, out: Path) -> dict[str, Any]:
        """``units.jsonl`` + ``vectors.npy`` (``superchargedb import`` input) and the queries."""
        out.mkdir(parents=True, exist_ok=True)
        vec_path = out / "vectors.npy"
        mm = np.lib.format.open_memmap(vec_path, mode="w+", dtype=np.float16, shape=(n, self.dim))
        row = 0
        with open(out / "units.jsonl", "w", encoding="utf-8") as fh:
            for recs, vecs in self.batches(n):
                for r in recs:
                    fh.write(json.dumps(r, ensure_ascii=False) + "\n")
                mm[row : row + len(recs)] = vecs
                row += len(recs)
        mm.flush()
        del mm
        qs = self.queries()
        with open(out / "queries.jsonl", "w", encoding="utf-8") as fh:
            for q in qs:
                fh.write(
                    json.dumps(
                        {"qid": q.qid, "source": q.source, "text": q.text, "bucket": q.bucket}
                    )
                    + "\n"
                )
        np.save(out / "query_vectors.npy", np.stack([q.vector for q in qs]).astype(np.float32))
        return {"units": n, "queries": len(qs), "dir": str(out), "model_id": self.model_id}


def _query_texts(eval_dir: Path) -> list[tuple[str, str, str]]:
    """(source, qid, text) of every real query: SciFact test, Cranfield, ADI, XQuAD (first 240)."""
    out: list[tuple[str, str, str]] = []
    for name in SOURCES:
        d = eval_dir / name
        qids: set[str] | None = None
        if name == "scifact":
            with open(d / "qrels" / "test.tsv", encoding="utf-8") as fh:
                qids = {ln.split("\t")[0] for ln in fh if ln.strip() and not ln.startswith("query")}
        taken = 0
        with open(d / "queries.jsonl", encoding="utf-8") as fh:
            for line in fh:
                q = json.loads(line)
                if qids is not None and q["_id"] not in qids:
                    continue
                if name == "xquad-en" and taken >= 240:
                    break
                out.append((name, str(q["_id"]), q["text"]))
                taken += 1
    return out


def _embed_cached(cache: Any, texts: list[str], desc: str, progress: bool) -> np.ndarray:
    """Rows of ``texts`` from the cache, embedding (once, with the live model) what is missing."""
    missing = [t for t in dict.fromkeys(texts) if cache.get(t) is None]
    if missing:
        from tqdm import tqdm

        emb = live_embedder()
        with tqdm(total=len(missing), desc=desc, unit="text", disable=not progress) as bar:
            for i in range(0, len(missing), 64):
                part = missing[i : i + 64]
                for t, v in zip(part, emb.embed(part), strict=True):
                    cache.put(t, v)
                bar.update(len(part))
                if i % 1024 == 0:
                    cache.save()
        cache.save()
    out = np.stack([cache.get(t) for t in texts]).astype(np.float32)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--n", type=int, required=True, help="number of Units")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--seed", type=int, default=DEFAULT_SEED)
    evaldir.add_argument(ap)
    args = ap.parse_args(argv)
    data = ScaleData.load(args.eval_dir, seed=args.seed)
    print(json.dumps(data.write(args.n, args.out)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
