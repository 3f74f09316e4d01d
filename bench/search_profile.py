"""Where a search's time goes: per-stage latencies, the untraced rest, concurrency, a profile.

Builds our Service on a SciFact slice (the same Units and cached vectors as bench.peers, so
query embedding is a lookup unless a cell says ``live``), then measures, in alternating rounds:

* ``hybrid/100%/c1``, ``hybrid/1%/c1``, ``dense/100%/c1``, ``lexical/100%/c1``: wall time of
  ``Service.search`` per request, each traced stage, and ``untraced`` = wall - trace total (what
  no stage accounts for: request parsing, cache key, response building);
* ``hybrid/100%/c8``: 8 threads, throughput against c1;
* ``live/c1``, ``live/c8``: the real ONNX model embeds every query (no query cache), so the
  embedding executor's batching shows in the c8 throughput;
* ``http/c1``: the same hybrid queries through ``POST /v1/search`` on a local uvicorn (JSON).

``--ab SRC`` builds a second Service from another source tree (e.g. ``git archive`` of an older
commit's ``src/``) in its own process and alternates rounds between the two, so the load of this
shared machine hits both alike. ``--profile`` also runs pyinstrument over two passes of
``hybrid/100%/c1`` (its call/return hook inflates Python-heavy code: read shares, not ms).

    git archive <old-commit> src | tar -x -C /tmp/before
    .venv/bin/python -m bench.search_profile --ab /tmp/before/src --label after --profile

Writes ``<out>/search_profile.json``, ``search_profile.md`` (+ ``search_profile_pyinstrument.txt``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from bench.common import evaldir
from bench.common.data import bucket, filter_scope, load_dataset, select
from bench.common.embedcache import (
    EmbedCache,
    embed_queries,
    live_embedder,
    make_caching_embedder,
    open_cache,
)
from bench.common.env import environment
from bench.common.paths import CACHE_DIR, REPO, RESULTS
from bench.common.proc import child_env, module_cmd
from bench.common.report import command, write_report
from bench.common.service import PRINCIPAL_KEY, ingest_docs, make_service
from bench.common.stats import pct

TOP_K = 100
CELLS: list[tuple[str, str, str, int]] = [
    # (name, mode, filter, concurrency)
    ("hybrid/100%/c1", "hybrid", "100%", 1),
    ("hybrid/1%/c1", "hybrid", "1%", 1),
    ("dense/100%/c1", "dense", "100%", 1),
    ("lexical/100%/c1", "lexical", "100%", 1),
    ("hybrid/100%/c8", "hybrid", "100%", 8),
    ("live/c1", "hybrid", "100%", 1),
    ("live/c8", "hybrid", "100%", 8),
    ("http/c1", "hybrid", "100%", 1),
]


def make_switch_embedder(cache: EmbedCache) -> Any:
    """Cached vectors for ingest and most cells; the live model when ``live`` is set."""
    from superchargedb.models.embedder import BUNDLED_TOKENIZER, _Base

    cached = make_caching_embedder(cache)
    live = live_embedder()

    class Switch(_Base):
        def __init__(self) -> None:
            super().__init__(BUNDLED_TOKENIZER, 0)
            self.model_id, self.dim, self.max_tokens = cached.model_id, cached.dim, live.max_tokens
            self.live = False

        def embed(self, texts: Sequence[str]) -> np.ndarray:
            return live.embed(texts) if self.live else cached.embed(texts)

    return Switch()


def http_client(svc: Any) -> tuple[Any, Any, threading.Thread]:
    import httpx
    import uvicorn

    from superchargedb.api.app import create_app

    port = Q_free_port()
    server = uvicorn.Server(
        uvicorn.Config(create_app(svc), host="127.0.0.1", port=port, log_level="warning")
    )
    th = threading.Thread(target=server.run, daemon=True)
    th.start()
    c = httpx.Client(
        base_url=f"http://127.0.0.1:{port}",
        headers={"Authorization": f"Bearer {PRINCIPAL_KEY}"},
        timeout=60,
    )
    deadline = time.time() + 30
    while True:
        try:
            c.get("/healthz")
            return c, server, th
        except httpx.TransportError:
            if time.time() > deadline:
                raise
            time.sleep(0.05)


def Q_free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Runner:
    def __init__(self, svc: Any, alice: Any, emb: Any, texts: list[str], buckets: list[int]):
        self.svc, self.alice, self.emb = svc, alice, emb
        self.texts, self.buckets = texts, buckets
        self.pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="sp")
        self.http: Any = None

    def one(self, cell: tuple[str, str, str, int], qi: int, salt: str) -> dict[str, Any]:
        name, mode, level, _ = cell
        q = self.texts[qi]
        if name.startswith("live"):
            q = f"{q} {salt}"  # a text never embedded before: the model runs (no cache)
        scope = filter_scope(level, self.buckets[qi])
        body = {"q": q, "top_k": TOP_K, "mode": mode}
        t0 = time.perf_counter()
        if name.startswith("http"):
            r = self.http.post("/v1/search", params={"scope": scope}, json=body)
            r.raise_for_status()
            out = r.json()
        else:
            out = self.svc.search(self.alice, body, query_scope=scope)
        wall = (time.perf_counter() - t0) * 1000
        tr = out["trace"]
        if tr["cache"] != "miss":
            raise RuntimeError("result cache hit: the benchmark would measure the cache")
        stages = {s["stage"]: s["ms"] for s in tr["stages"] if not s.get("skipped")}
        return {"wall": wall, "total": tr["total_ms"], "stages": stages, "hits": len(out["hits"])}

    def cell(self, cell: tuple[str, str, str, int], qidx: list[int], rnd: int) -> dict[str, Any]:
        name, _, _, c = cell
        self.emb.live = name.startswith("live")
        reqs = list(qidx)
        while c > 1 and len(reqs) < 4 * c:
            reqs += qidx
        salts = [f"r{rnd}i{i}" for i in range(len(reqs))]
        t0 = time.perf_counter()
        if c == 1:
            res = [self.one(cell, qi, s) for qi, s in zip(reqs, salts, strict=True)]
        else:
            res = list(self.pool.map(lambda a: self.one(cell, *a), zip(reqs, salts, strict=True)))
        wall_s = time.perf_counter() - t0
        self.emb.live = False
        return {"res": res, "wall_s": wall_s, "n": len(reqs)}


def summarize(results: list[dict[str, Any]], walls: list[tuple[int, float]]) -> dict[str, Any]:
    stages: dict[str, list[float]] = {}
    for r in results:
        for k, v in r["stages"].items():
            stages.setdefault(k, []).append(v)
    return {
        "wall_ms": pct([r["wall"] for r in results]),
        "trace_total_ms": pct([r["total"] for r in results]),
        "untraced_ms": pct([r["wall"] - r["total"] for r in results]),
        "excluding_embed_ms": pct([r["wall"] - r["stages"].get("embed", 0.0) for r in results]),
        "stages_p50_ms": {k: round(float(np.median(v)), 3) for k, v in stages.items()},
        "qps": round(sum(n for n, _ in walls) / sum(w for _, w in walls), 2),
        "mean_hits": round(float(np.mean([r["hits"] for r in results])), 1),
    }


def profile(runner: Runner, qidx: list[int], out: Path) -> str | None:
    try:
        from pyinstrument import Profiler
    except ImportError:
        return None
    p = Profiler(interval=0.0005)
    p.start()
    for _ in range(2):
        for qi in qidx:
            runner.one(CELLS[0], qi, "")
    p.stop()
    text = p.output_text(unicode=False, color=False, show_all=False)
    path = out / "search_profile_pyinstrument.txt"
    path.write_text(text)
    return path.name


def _shown_source(pkg: Path) -> str:
    """The code version's folder without a machine's path: repository-relative when it is this
    checkout's, else just its last parts (e.g. an ``--ab`` tree unpacked elsewhere)."""
    try:
        return pkg.relative_to(REPO).as_posix()
    except ValueError:
        return "/".join(pkg.parts[-3:]) + " (--ab tree)"


def child_main(args: argparse.Namespace) -> int:
    """One code version (whatever ``superchargedb`` imports as): build, then serve rounds."""
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    import superchargedb

    name = args.dataset.resolve().name
    corpus, queries, qrels = load_dataset(args.dataset, args.split)
    docs, qids = select(corpus, queries, qrels, args.limit_docs, args.limit_queries)
    cache = open_cache(name, args.cache_dir)
    texts = [queries[q] for q in qids]
    embed_queries(cache, texts)
    nonempty = sorted({bucket(d) for d in docs})
    buckets = [nonempty[(i * 37) % len(nonempty)] for i in range(len(texts))]
    emb = make_switch_embedder(cache)
    tmp = Path(tempfile.mkdtemp(prefix="scdb-search-profile-"))
    svc, alice = make_service(tmp / "data", emb)
    ing = ingest_docs(svc, alice, corpus, docs)
    runner = Runner(svc, alice, emb, texts, buckets)
    runner.http, server, th = http_client(svc)
    cells = [c for c in CELLS if not args.cells or c[0] in args.cells.split(",")]
    for cell in cells:  # warm-up: lazy initialisation is not query latency
        runner.cell(cell, list(range(min(3, len(texts)))), -1)
    hello = {
        "ok": True,
        "source": _shown_source(Path(superchargedb.__file__).resolve().parent),
        "version": getattr(superchargedb, "__version__", "?"),
        "docs": len(docs),
        "units": ing["units"],
        "queries": len(qids),
        "model": cache.model_id,
    }
    proto.write(json.dumps(hello) + "\n")
    try:
        for line in sys.stdin:
            msg = json.loads(line)
            if msg["cmd"] == "round":
                out = {}
                k = msg["r"] % len(cells)
                for cell in cells[k:] + cells[:k]:
                    res = runner.cell(cell, msg["batch"], msg["r"])
                    out[cell[0]] = res
                proto.write(json.dumps({"ok": True, "cells": out}) + "\n")
            elif msg["cmd"] == "profile":
                proto.write(
                    json.dumps(
                        {"ok": True, "profile": profile(runner, msg["qidx"], Path(msg["out"]))}
                    )
                    + "\n"
                )
            else:
                break
    finally:
        server.should_exit = True
        th.join(timeout=10)
        runner.http.close()
        runner.pool.shutdown()
        svc.close()
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


class Child:
    def __init__(self, label: str, src: str | None, args: argparse.Namespace, log: Path) -> None:
        env = dict(os.environ)
        if src:
            env["PYTHONPATH"] = src + (
                os.pathsep + env["PYTHONPATH"] if "PYTHONPATH" in env else ""
            )
        cmd = module_cmd("search_profile", "--child", *args.child_argv)
        env = child_env(env)  # the checkout's root first: the child imports bench.*
        self.label = label
        self._log = open(log, "w")  # noqa: SIM115 (closed in close())
        self.proc = subprocess.Popen(
            cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log, text=True, env=env
        )
        self.hello = self.read()

    def read(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"child {self.label} exited ({self.proc.wait()}); see its log")
        out: dict[str, Any] = json.loads(line)
        return out

    def call(self, **msg: Any) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(msg) + "\n")
        self.proc.stdin.flush()
        return self.read()

    def close(self) -> None:
        if self.proc.poll() is None and self.proc.stdin is not None:
            self.proc.stdin.write(json.dumps({"cmd": "quit"}) + "\n")
            self.proc.stdin.flush()
            self.proc.wait(timeout=120)
        self._log.close()


def run(args: argparse.Namespace) -> dict[str, Any]:
    from tqdm import tqdm

    env = environment()
    versions: list[tuple[str, str | None]] = [(args.label, None)]
    if args.ab:
        versions.append((args.ab_label, str(args.ab)))
    logs = Path(tempfile.mkdtemp(prefix="scdb-sp-logs-"))
    children: dict[str, Child] = {}
    try:
        for label, src in versions:
            print(f"{label}: building ...", file=sys.stderr)
            children[label] = Child(label, src, args, logs / f"{len(children)}.log")
        first = next(iter(children.values())).hello
        n = first["queries"]
        batches = [list(range(n))[r :: args.rounds] for r in range(args.rounds)]
        got: dict[str, dict[str, list[dict[str, Any]]]] = {lb: {} for lb in children}
        walls: dict[str, dict[str, list[tuple[int, float]]]] = {lb: {} for lb in children}
        labels = list(children)
        with tqdm(total=len(batches) * len(labels), desc="rounds", file=sys.stderr) as bar:
            for r, batch in enumerate(batches):
                for lb in labels[r % len(labels) :] + labels[: r % len(labels)]:
                    out = children[lb].call(cmd="round", r=r, batch=batch)
                    for cname, res in out["cells"].items():
                        got[lb].setdefault(cname, []).extend(res["res"])
                        walls[lb].setdefault(cname, []).append((res["n"], res["wall_s"]))
                    bar.update(1)
        prof = None
        if args.profile:
            prof = children[args.label].call(cmd="profile", qidx=list(range(n)), out=str(args.out))
    finally:
        for ch in children.values():
            ch.close()
    runs = {}
    for lb, ch in children.items():
        cs = {c: summarize(got[lb][c], walls[lb][c]) for c in got[lb]}
        rep: dict[str, Any] = {"source": ch.hello["source"], "cells": cs}
        if "hybrid/100%/c1" in cs and "hybrid/100%/c8" in cs:
            rep["c8_over_c1_qps"] = round(
                cs["hybrid/100%/c8"]["qps"] / cs["hybrid/100%/c1"]["qps"], 3
            )
        if "live/c1" in cs and "live/c8" in cs:
            rep["live_c8_over_c1_qps"] = round(cs["live/c8"]["qps"] / cs["live/c1"]["qps"], 3)
        runs[lb] = rep
    return {
        "benchmark": "search_profile",
        "generated_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": command("search_profile", args.argv),
        "environment": {**env, "loadavg_end": environment()["loadavg"]},
        "dataset": {
            "name": args.dataset.resolve().name,
            "docs": first["docs"],
            "units": first["units"],
            "queries": first["queries"],
        },
        "config": {"top_k": TOP_K, "rounds": args.rounds, "embedder": first["model"]},
        "labels": labels,
        "runs": runs,
        "profile": (prof or {}).get("profile"),
    }


def fmt(v: Any, nd: int = 1) -> str:
    return "—" if v is None else f"{v:.{nd}f}" if isinstance(v, float | int) else str(v)


def markdown(r: dict[str, Any]) -> str:
    env = r["environment"]
    labels = r["labels"]
    runs = r["runs"]
    lines = [
        "# Search path profile",
        "",
        f"Generated {r['generated_at']} by `{r['command']}` (commit `{env['git_commit']}`,"
        f" {env['cpus']} CPUs; load average {env['loadavg']} -> {env['loadavg_end']}: a shared,"
        " loaded machine; absolute numbers move by 30 % or more between runs, the versions were"
        " measured in alternating rounds, each in its own process).",
        "",
        f"{r['dataset']['name']}: {r['dataset']['docs']} documents, {r['dataset']['units']} Units,"
        f" {r['dataset']['queries']} queries, top_k {r['config']['top_k']},"
        f" {r['config']['rounds']} rounds. In-process `Service.search` unless the cell says http;"
        " query vectors from the embedding cache unless the cell says live. `untraced` = wall"
        " time minus the trace's total (work no stage accounts for).",
        "",
        "Versions: " + "; ".join(f"**{lb}** (`{runs[lb]['source']}`)" for lb in labels),
        "",
        "| cell | "
        + " | ".join(f"{lb}: wall p50 / p95 ms | untraced p50 | q/s" for lb in labels)
        + " |",
        "|---|" + "---|---|---|" * len(labels),
    ]
    cells = list(runs[labels[0]]["cells"])
    for k in cells:
        row = f"| {k} |"
        for lb in labels:
            c = runs[lb]["cells"].get(k)
            row += (
                f" {fmt(c['wall_ms']['p50'])} / {fmt(c['wall_ms']['p95'])} |"
                f" {fmt(c['untraced_ms']['p50'])} | {fmt(c['qps'])} |"
                if c
                else " — | — | — |"
            )
        lines.append(row)
    for lb in labels:
        lines += ["", f"Stage p50 (ms), {lb}:", "", "| cell | stages |", "|---|---|"]
        for k, c in runs[lb]["cells"].items():
            st = ", ".join(f"{s} {v:.2f}" for s, v in c["stages_p50_ms"].items())
            lines.append(f"| {k} | {st} |")
    lines.append("")
    for lb in labels:
        rr = runs[lb]
        if "c8_over_c1_qps" in rr:
            lines.append(
                f"- {lb}: throughput c8 / c1 = {rr['c8_over_c1_qps']} (hybrid, cached query"
                f" vectors); {rr.get('live_c8_over_c1_qps', '—')} (live query embedding)"
            )
    if r.get("profile"):
        lines.append(f"- pyinstrument call tree of hybrid/100%/c1 ({labels[0]}): `{r['profile']}`")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--dataset", type=Path, help="default: scifact/ of --eval-dir")
    evaldir.add_argument(ap)
    ap.add_argument("--split", default="test")
    ap.add_argument("--limit-docs", type=int, default=1000)
    ap.add_argument("--limit-queries", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--cells", default="", help="comma-separated subset of cell names")
    ap.add_argument("--label", default="current")
    ap.add_argument("--ab", type=Path, help="another src/ dir (e.g. an older commit) to alternate")
    ap.add_argument("--ab-label", default="before")
    ap.add_argument("--profile", action="store_true", help="pyinstrument over hybrid/100%%/c1")
    ap.add_argument("--out", type=Path, default=RESULTS)
    ap.add_argument("--cache-dir", type=Path, default=CACHE_DIR)
    args = ap.parse_args(argv)
    args.dataset = evaldir.dataset_arg(args, "scifact")
    if args.child:
        return child_main(args)
    args.argv = argv if argv is not None else sys.argv[1:]
    args.child_argv = [
        "--dataset",
        str(args.dataset),
        "--split",
        args.split,
        "--limit-docs",
        str(args.limit_docs),
        "--limit-queries",
        str(args.limit_queries),
        "--cells",
        args.cells,
        "--cache-dir",
        str(args.cache_dir),
    ]
    args.out.mkdir(parents=True, exist_ok=True)
    report = run(args)
    md = markdown(report)
    write_report(args.out, "search_profile", report, md)
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
