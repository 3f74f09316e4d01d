"""In-process A/B of the search path at scale: an older commit's Searcher against this tree's.

One Service is opened on a ``bench/scale.py`` data dir (e.g. ``/tmp/scdb-scale/scale-100000``);
the search modules of ``--old`` (``MODULES``) are read
with ``git show`` and loaded beside this tree's under ``*_old`` names, so both Searchers share the
Service, its catalog and its indexes but keep their own caches. Each query runs on both, the order
alternating, which is the fairest pairing a shared, loaded machine allows (``bench/search_profile
--ab`` pairs rounds of two processes instead). Hybrid, top_k=100, SciFact claims as queries with
cached vectors; reports wall (query embedding excluded) and CPU time per cell, and checks that
both return the same hits. ``--cold`` drops each arm's per-predicate caches before every query:
bench.peers' filtered cells are cold, each query having a scope of its own.

    .venv/bin/python -m bench.search_ab --data /tmp/scdb-scale/scale-100000 --old 2175712

Changes outside those modules (service.py, the catalog's connections) are in both arms.
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
from typing import Any

import numpy as np

from bench import scale as S
from bench import scale_data as SD
from bench.common import evaldir
from bench.common.embedcache import open_cache
from bench.common.paths import CACHE_DIR
from bench.common.service import embedded

REPO = Path(__file__).resolve().parent.parent
MODULES = ("visibility", "fusion", "hits", "sparse_search", "lexical", "hybrid")  # deps first


def old_searcher(mod: ModuleType, svc: Any) -> Any:
    """The old commit's Searcher on this Service's parts, whichever constructor it has: the
    facade (before the wiring), the catalog's parts (before the search store), or the store."""
    import inspect

    params = list(inspect.signature(mod.Searcher).parameters)
    if params == ["svc"]:
        return mod.Searcher(svc)
    new = svc.searcher
    if "catalog" in params:
        b = embedded(svc)
        return mod.Searcher(
            svc.settings, b.catalog, b.sync, b.sync.store, new.embedder, new.reranker
        )
    return mod.Searcher(svc.settings, new.store, new.embedder, new.reranker)


def _caches_of(searcher: Any) -> Any:
    """What holds an arm's per-predicate caches: the Searcher itself before the search store,
    the store after."""
    return searcher if hasattr(searcher, "candidates") else searcher.store


def load_old(commit: str, tmp: Path) -> ModuleType:
    """The old ``hybrid`` module, its imports of the other ``MODULES`` renamed ``*_old``."""
    mods: dict[str, ModuleType] = {}
    srcs: dict[str, str] = {}
    for name in MODULES:
        got = subprocess.run(
            ["git", "show", f"{commit}:src/superchargedb/search/{name}.py"],
            cwd=REPO,
            capture_output=True,
            text=True,
        )
        if got.returncode == 0:  # a module the commit does not have stays this tree's
            srcs[name] = got.stdout
    for name, src in srcs.items():
        for other in srcs:
            src = src.replace(f"from .{other} import", f"from .{other}_old import")
        path = tmp / f"{name}_old.py"
        path.write_text(src)
        spec = importlib.util.spec_from_file_location(f"superchargedb.search.{name}_old", path)
        assert spec is not None and spec.loader is not None
        mod = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = mod
        spec.loader.exec_module(mod)
        mods[name] = mod
    return mods["hybrid"]


def report_pairs(level: str, res: dict[str, list[tuple[float, float]]]) -> None:
    """Print each arm's wall/CPU p50 and p95 and the paired new/old ratios (ms pairs)."""
    a = {k: np.array(v) for k, v in res.items()}
    for arm in ("old", "new"):
        w, c = a[arm][:, 0], a[arm][:, 1]
        print(
            f"{level} {arm}: wall p50 {np.median(w):.2f} p95 {np.percentile(w, 95):.2f}"
            f" | cpu p50 {np.median(c):.2f} p95 {np.percentile(c, 95):.2f} ms"
        )
    ratio = np.median(a["new"][:, 0] / a["old"][:, 0])
    cpu = np.median(a["new"][:, 1]) / np.median(a["old"][:, 1])
    print(f"{level} new/old: paired wall ratio p50 {ratio:.3f}, cpu p50 ratio {cpu:.3f}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, required=True, help="a bench/scale.py data dir")
    ap.add_argument("--old", required=True, help="the commit to compare against")
    ap.add_argument("--levels", default="1%,10%", help="scope filters (1%%, 10%%, 100%%)")
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument(
        "--cold",
        action="store_true",
        help="drop each arm's per-predicate caches (masks, candidate sets) before every query:"
        " bench.peers' filtered cells, where each query has its own scope",
    )
    evaldir.add_argument(ap)
    args = ap.parse_args(argv)

    import superchargedb.search  # noqa: F401  (the package the old modules load into)

    tmp = Path(tempfile.mkdtemp(prefix="search-ab-"))
    hybrid_old = load_old(args.old, tmp)
    queries = SD.ScaleData.load(args.eval_dir, progress=False).queries()
    queries = queries[:: max(1, len(queries) // args.queries)][: args.queries]
    cache = open_cache("scale_pool", CACHE_DIR)
    svc, alice, _ = S.open_service(args.data, cache, "sparse")
    arms = {"new": svc.searcher, "old": old_searcher(hybrid_old, svc)}

    def drop_caches(searcher: Any) -> None:
        from superchargedb.storage.sqlite.candidates import CandidateCache

        holder = _caches_of(searcher)
        holder.candidates = CandidateCache(svc.settings.candidate_cache_max_bytes)
        sp = getattr(holder.lexical, "_searcher", None)
        if sp is not None:
            sp.drop_masks()

    def one(arm: str, q: Any, level: str) -> tuple[float, float, list[Any]]:
        svc.searcher = arms[arm]
        if args.cold:
            drop_caches(arms[arm])
        body = {"q": q.text, "mode": "hybrid", "top_k": 100}
        t0, c0 = time.perf_counter(), time.process_time()
        out = svc.search(alice, body, query_scope=q.scope(level))
        wall, cpu = (time.perf_counter() - t0) * 1000, (time.process_time() - c0) * 1000
        emb = next(s["ms"] for s in out["trace"]["stages"] if s["stage"] == "embed")
        hits = [(h["unit_id"], h["snippet"], h["score"], h["ranks"]) for h in out["hits"]]
        return wall - emb, cpu, hits

    differ = 0
    try:
        for level in args.levels.split(","):
            res: dict[str, list[tuple[float, float]]] = {"old": [], "new": []}
            for q in queries:  # warm-up: masks, candidate sets, statement caches
                one("old", q, level)
                one("new", q, level)
            for r in range(args.rounds):
                for i, q in enumerate(queries):
                    got = {}
                    for arm in ("old", "new") if (i + r) % 2 == 0 else ("new", "old"):
                        wall, cpu, got[arm] = one(arm, q, level)
                        res[arm].append((wall, cpu))
                    differ += got["old"] != got["new"]
            report_pairs(level, res)
        print(f"queries whose hits differ: {differ}")
    finally:
        svc.close()
    return 1 if differ else 0


if __name__ == "__main__":
    raise SystemExit(main())
