"""A system's child process: one JSON command per line on stdin, one reply per line on the
protocol's stdout; everything else a library prints goes to stderr (the child's log)."""

from __future__ import annotations

import gc
import importlib
import json
import os
import sys
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from bench.peers.units import Queries, peak_rss_mb, rss_now_mb

# Imported in the child only, so that a peer's child never loads another system (or ours).
ADAPTERS = {
    "ours": "bench.peers.ours:Ours",
    "lancedb": "bench.peers.lancedb_peer:Lance",
    "txtai": "bench.peers.txtai_peer:Txtai",
}


def adapter(system: str) -> Any:
    mod, _, cls = ADAPTERS[system].partition(":")
    return getattr(importlib.import_module(mod), cls)


def child_main(system: str, work: Path) -> int:
    # The protocol owns the real stdout; anything a library prints goes to stderr (the log).
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr

    def reply(obj: dict[str, Any]) -> None:
        proto.write(json.dumps(obj) + "\n")
        proto.flush()

    t0 = time.perf_counter()
    try:
        sysobj = adapter(system)(work)
    except Exception as e:  # the extra is not installed, or the import fails
        reply({"ok": False, "error": f"{type(e).__name__}: {e}", "fatal": True})
        return 1
    reply(
        {
            "ok": True,
            "version": sysobj.version,
            "import_s": time.perf_counter() - t0,
            "rss_mb": rss_now_mb(),
        }
    )
    q: Queries | None = None
    for line in sys.stdin:
        msg = json.loads(line)
        cmd = msg["cmd"]
        try:
            if cmd == "load":
                out = sysobj.load(msg)
                q = Queries(work)
                # As `superchargedb serve` does once open, for every system alike: what the
                # load left alive is kept out of the cyclic collector's full walks (a 74-90 ms
                # pause each at 100k Units for ours, unfrozen).
                out["gc_frozen_objects"] = freeze_heap()
                out["rss_after_load_mb"] = rss_now_mb()
                out["peak_rss_mb"] = peak_rss_mb()
                out["config"] = sysobj.config()
                reply({"ok": True, **out})
            elif cmd == "search":
                assert q is not None
                reply({"ok": True, **run_cell(sysobj, q, msg)})
            elif cmd == "http":
                assert q is not None
                reply({"ok": True, **sysobj.http(q, msg["qidx"], msg["top_k"])})
            elif cmd == "snippets":
                assert q is not None
                reply({"ok": True, **sysobj.snippets(q, msg["qidx"], msg["top_k"])})
            elif cmd == "stats":
                reply({"ok": True, "peak_rss_mb": peak_rss_mb(), "rss_mb": rss_now_mb()})
            elif cmd == "quit":
                sysobj.close()
                reply({"ok": True})
                return 0
            else:
                reply({"ok": False, "error": f"unknown command {cmd}"})
        except Exception as e:
            traceback.print_exc()
            reply({"ok": False, "error": f"{type(e).__name__}: {e}"})
    return 0


def freeze_heap() -> int:
    """``superchargedb.memstats.freeze_heap`` (not imported: a peer's child need not load ours)."""
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()


_POOLS: dict[int, ThreadPoolExecutor] = {}


def _pool(c: int) -> ThreadPoolExecutor:
    """One long-lived pool per concurrency, as a server keeps its worker threads (per-thread
    state such as our SQLite reader connections stays warm across batches)."""
    if c not in _POOLS:
        _POOLS[c] = ThreadPoolExecutor(max_workers=c, thread_name_prefix=f"bench-c{c}")
    return _POOLS[c]


def run_cell(sysobj: Any, q: Queries, msg: dict[str, Any]) -> dict[str, Any]:
    """One cell on one batch of queries: per-request latency, rankings, filter checks."""
    mode, level, c, top_k = msg["mode"], msg["filter"], int(msg["c"]), int(msg["top_k"])
    qidx: list[int] = msg["qidx"]
    # At concurrency c the batch is cycled to at least 4 * c requests.
    reqs = list(qidx)
    while c > 1 and len(reqs) < 4 * c:
        reqs += qidx
    results: dict[int, Any] = {}

    def one(i: int) -> tuple[float, float]:
        qi = reqs[i]
        t0 = time.perf_counter()
        hits, embed_ms = sysobj.search(q, qi, mode, level, top_k)
        ms = (time.perf_counter() - t0) * 1000
        results[i] = hits
        return ms, embed_ms

    t0 = time.perf_counter()
    if c == 1:
        timed = [one(i) for i in range(len(reqs))]
    else:
        timed = list(_pool(c).map(one, range(len(reqs))))
    wall = time.perf_counter() - t0
    violations = 0
    n_hits = []
    for i, hits in results.items():
        scope = q.scope(reqs[i], level)
        violations += sum(1 for _, s in hits if not (s == scope or s.startswith(scope + "/")))
        n_hits.append(len(hits))
    out: dict[str, Any] = {
        "ms": [t[0] for t in timed],
        "embed_ms": [t[1] for t in timed],
        "wall_s": wall,
        "requests": len(reqs),
        "violations": violations,
        "n_hits": n_hits,
        "rss_mb": rss_now_mb(),
    }
    if msg.get("want_docs"):
        from_first: dict[int, list[str]] = {}
        for i, qi in enumerate(reqs[: len(qidx)]):
            from_first[qi] = list(dict.fromkeys(d for d, _ in results[i]))
        out["docs"] = {str(k): v for k, v in from_first.items()}
    return out
