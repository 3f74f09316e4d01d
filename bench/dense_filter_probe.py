"""The dense leg at a 10 % ACL filter on a ``bench/scale.py`` data dir: what each plan costs and
what it recalls, per query (the measurements behind ``bench/results/scale_1m_lexical.md``).

For each query, with the readable candidates of an ACL-10 % reader (from the lexical index's
visibility mask, as the Searcher takes them): the store's exact plan (rows fetched from USearch
per query), an exact scan of rows already in memory (USearch's f16 SIMD and an f32 BLAS
mat-vec), and HNSW with the planner's over-fetch (4 k / selectivity) and smaller ones, with
recall@k against the exact top k.

    .venv/bin/python -m bench.dense_filter_probe --data /tmp/scale4/scale-1000000 --queries 20
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import onnxruntime  # noqa: F401  (before usearch, D-101)
from usearch.index import MetricKind
from usearch.index import search as usearch_search

from bench import scale as S
from bench import scale_data as SD
from bench.common import evaldir
from bench.common.data import BASE_SCOPE
from bench.common.embedcache import open_cache
from bench.common.paths import CACHE_DIR
from bench.common.service import embedded


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--data", type=Path, required=True, help="a bench/scale.py data dir")
    ap.add_argument("--queries", type=int, default=20)
    ap.add_argument("--k", type=int, default=100)
    ap.add_argument("--plane", default="text")
    evaldir.add_argument(ap)
    args = ap.parse_args(argv)

    queries = SD.ScaleData.load(args.eval_dir, progress=False).queries()
    queries = queries[:: max(1, len(queries) // args.queries)][: args.queries]
    svc, _, _ = S.open_service(args.data, open_cache("scale_pool", CACHE_DIR), "sparse")
    readers = S.add_readers(svc)
    store, lex, k = embedded(svc).sync.store, svc.searcher.store.lexical, args.k
    index = store._ix[args.plane]
    n = len(index)
    plain = SimpleNamespace(filters=None, modalities=None)
    try:
        for q in queries:
            who = readers[("10%", (q.bucket // 10) * 10)]
            key, pred = lex._predicate(plain, [BASE_SCOPE], who, [args.plane])
            with lex._searcher.ix.rw.read():
                mask, _ = lex._searcher.mask(key, pred)
            cand = np.flatnonzero(mask).astype(np.uint64)
            vec = svc.embedder.embed_query(q.text)
            qn = (vec / np.linalg.norm(vec)).astype(np.float32)
            t0 = time.perf_counter()
            exact = {key for key, _ in store._exact(index, qn, k, cand)}
            t_exact = (time.perf_counter() - t0) * 1000
            rows = store._fetch(index, cand)
            t0 = time.perf_counter()
            usearch_search(
                rows, qn.astype(np.float16), 2 * k, MetricKind.Cos, exact=True, threads=1
            )
            t_f16 = (time.perf_counter() - t0) * 1000
            rows32 = rows.astype(np.float32)
            t0 = time.perf_counter()
            scores = rows32 @ qn
            np.partition(scores, -k)[-k]
            t_f32 = (time.perf_counter() - t0) * 1000
            out = [
                f"{len(cand)} candidates: exact (fetch) {t_exact:.1f} ms, in memory f16 "
                f"{t_f16:.1f} / f32 {t_f32:.1f} ms"
            ]
            for mult in (4.0, 2.0, 1.5):
                fetch = int(np.ceil(mult * k / (len(cand) / n)))
                t0 = time.perf_counter()
                m = index.search(qn, fetch)
                t_h = (time.perf_counter() - t0) * 1000
                keys = np.asarray(m.keys, dtype=np.uint64)
                pos = np.minimum(np.searchsorted(cand, keys), len(cand) - 1)
                got = keys[cand[pos] == keys][:k]
                recall = len(exact & set(got.tolist())) / k
                out.append(f"HNSW x{mult:g} (fetch {fetch}) {t_h:.1f} ms recall {recall:.2f}")
            print(" | ".join(out), flush=True)
    finally:
        svc.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
