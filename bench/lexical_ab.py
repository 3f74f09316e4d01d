"""In-process A/B of the lexical top-k alone at scale: an older commit's SparseSearcher against
this tree's, on the same loaded index, with an exactness check against the exhaustive scorer.

Opens only the derived lexical index of a ``bench/scale.py`` data dir (no Service, no vectors),
loads ``storage/sqlite/sparse_search.py`` (``search/`` before the storage seam) of ``--old`` beside
this tree's, and runs each query's BM25 top-k (k = ``--k``, the hybrid leg depth) on both, the
order alternating per query, under a 100 % / 10 % / 1 % scope mask. Reports wall and CPU
p50/p95 per arm and the paired ratio; every query's new top-k is also compared with
``topk(exhaustive=True)`` (all postings scored, no pruning): any difference is an error.

    .venv/bin/python -m bench.lexical_ab --data /tmp/scale4/scale-1000000 --old main
"""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType

import numpy as np

from bench import scale_data as SD
from bench.common import evaldir
from bench.common.data import filter_scope
from bench.search_ab import report_pairs

REPO = Path(__file__).resolve().parent.parent


def load_old(commit: str, tmp: Path) -> ModuleType:
    # The module moved from search/ to storage/ with the storage seam: older commits have it there.
    for where in ("storage", "search"):
        got = subprocess.run(
            ["git", "show", f"{commit}:src/superchargedb/{where}/sparse_search.py"],
            cwd=REPO,
            capture_output=True,
            text=True,
        )
        if got.returncode == 0:
            break
    got.check_returncode()
    src = got.stdout
    path = tmp / "sparse_search_old.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location("superchargedb.storage.sparse_search_old", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--data", type=Path, required=True, help="a bench/scale.py data dir")
    ap.add_argument("--old", required=True, help="the commit to compare against")
    ap.add_argument("--levels", default="100%,10%,1%")
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--k", type=int, default=100)
    evaldir.add_argument(ap)
    args = ap.parse_args(argv)

    from superchargedb.query_terms import query_terms
    from superchargedb.storage.sqlite import sparse_search as new
    from superchargedb.storage.sqlite.sparse import SparseIndex

    old = load_old(args.old, Path(tempfile.mkdtemp(prefix="lexical-ab-")))
    ix = SparseIndex(args.data / "lexical")
    ix.load()
    arms = {"old": old.SparseSearcher(ix), "new": new.SparseSearcher(ix)}
    queries = SD.ScaleData.load(args.eval_dir, progress=False).queries()
    queries = queries[:: max(1, len(queries) // args.queries)][: args.queries]
    qs = []
    for q in queries:
        ph = arms["new"].term_ids_many(query_terms(q.text))
        if not any(len(p) > 1 for p in ph):  # phrases go to FTS5 in the service
            qs.append(([p[0] if p else None for p in ph], q))
    print(f"{ix.n_docs} documents, {len(ix.segments)} segments, {len(qs)} queries, k={args.k}")

    def mask_for(level: str, bucket: int) -> tuple[np.ndarray, bool]:
        if level == "100%":
            return ix.live.copy(), True
        pre = filter_scope(level, bucket)
        ok = [s[0] == pre or s[0].startswith(pre + "/") for s in ix.sigs]
        return np.append(np.array(ok, bool), False).take(ix.sig) & ix.live, False

    errors = 0
    for level in args.levels.split(","):
        res: dict[str, list[tuple[float, float]]] = {"old": [], "new": []}
        masks: dict[int, tuple[np.ndarray, bool]] = {}
        for r in range(args.rounds):
            for i, (tids, q) in enumerate(qs):
                b = q.bucket if level == "1%" else (q.bucket // 10) * 10
                if b not in masks:
                    masks[b] = mask_for(level, b)
                m, full = masks[b]
                got = {}
                for arm in ("old", "new") if (i + r) % 2 == 0 else ("new", "old"):
                    t0, c0 = time.perf_counter(), time.process_time()
                    got[arm] = arms[arm].topk(tids, m, args.k, full=full)
                    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
                    res[arm].append((wall * 1000, cpu * 1000))
                if r == 0:
                    want = arms["new"].topk(tids, m, args.k, exhaustive=True)
                    errors += got["new"] != want or got["old"] != want
        report_pairs(level, res)
    print(f"top-k differing from the exhaustive ranking: {errors}")
    return 1 if errors else 0


if __name__ == "__main__":
    raise SystemExit(main())
