"""Search latency and memory at 10k / 100k / 1M Units, with 100 / 10 / 1 % scope and ACL filters.

Each size runs in its own subprocess (so its RSS is its own):

1. **Import** the first N Units of bench/scale_data.py (real text, pooled real embeddings plus
   noise) into a fresh data dir with the bulk import (``superchargedb import``'s code path),
   timed; then the on-disk size.
2. **Restart** the Service on that dir (the index files load; timed) — a server as it runs.
3. **Search** in-process through ``Service.search`` (result cache off, top_k 10): ``lexical``,
   ``dense`` and ``hybrid``, for the query's scope at 100 % / 10 % / 1 % of the Units
   (``scope``) and for a reader who is not the owner and holds the groups of 10 % / 1 %
   (``acl``). Latency excludes query embedding (served from the cache of real embeddings and
   its traced stage subtracted); the live model's query embedding is measured apart.
4. The lexical leg alone again with ``SCDB_LEXICAL_BACKEND=fts5`` (FTS5 with the ACL tokens pushed
   into the MATCH, D-24) on the same dir, for the comparison (fewer queries at 1M).

    .venv/bin/python -m bench.scale                       # 10k, 100k, 1M (~1 h here)
    .venv/bin/python -m bench.scale --sizes 10000,100000 --queries 100
    .venv/bin/python -m bench.scale --sizes 1000000 --data-root /tmp/scale --keep   # reuse

Writes ``<out>/scale.json``, ``scale.md``, ``scale_latency.png``, ``scale_memory.png``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from bench import scale_data as SD
from bench.common import evaldir
from bench.common.data import BASE_SCOPE
from bench.common.embedcache import live_embedder, make_caching_embedder, open_cache
from bench.common.env import environment
from bench.common.paths import CACHE_DIR, RESULTS
from bench.common.plotting import pyplot
from bench.common.proc import child_env, module_cmd
from bench.common.report import command, write_report
from bench.common.service import embedded, make_service
from bench.common.stats import pct

MODES = ("lexical", "dense", "hybrid")
LEVELS = (("scope", "100%"), ("scope", "10%"), ("scope", "1%"), ("acl", "10%"), ("acl", "1%"))
DEFAULT_SIZES = (10_000, 100_000, 1_000_000)
GOAL_P95_MS = 50.0


def rss_mb() -> tuple[float, float]:
    """(current, peak) resident set size of this process, MB."""
    cur = peak = 0.0
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                cur = int(line.split()[1]) / 1024
            elif line.startswith("VmHWM:"):
                peak = int(line.split()[1]) / 1024
    return round(cur, 1), round(peak, 1)


def du_mb(path: Path) -> dict[str, float]:
    out: dict[str, float] = {}
    for p in path.rglob("*"):
        if p.is_file():
            top = p.relative_to(path).parts[0]
            key = "catalog" if top.startswith("catalog.db") else top
            out[key] = out.get(key, 0.0) + p.stat().st_size / 2**20
    out = {k: round(v, 1) for k, v in out.items() if v >= 0.05}
    out["total"] = round(sum(out.values()), 1)
    return out


# ================================================================================ child ====


def add_readers(svc: Any) -> dict[tuple[str, int], Any]:
    """Principals who are not the Units' owner and read ~10 % / ~1 % of them through groups."""
    from superchargedb.auth import principals as P

    keys: dict[tuple[str, int], str] = {}
    with svc.auth_store.write() as tx:
        have = {s.principal.name for s in tx.principals.every()}
        for level, buckets in (("10%", range(0, 100, 10)), ("1%", range(100))):
            for u in buckets:
                name = f"scale-reader-{level[:-1]}-{u}"
                key = f"aegis_sk_scale_{level[:-1]}_{u}"
                if name not in have:
                    p = P.create_principal(
                        tx.principals,
                        name,
                        perms=["read"],
                        tier="pro",
                        scopes=["acme/alpha"],
                        groups=SD.acl_groups_for(level, u),
                    )
                    P.add_key(tx.principals, p.id, key)
                keys[(level, u)] = key
    return {k: svc.authenticate(f"Bearer {v}") for k, v in keys.items()}


def open_service(data: Path, cache: Any, backend: str) -> tuple[Any, Any, float]:
    t0 = time.perf_counter()
    svc, alice = make_service(
        data, make_caching_embedder(cache, allow_live=False), lexical_backend=backend
    )
    return svc, alice, time.perf_counter() - t0


def run_cells(
    svc: Any,
    alice: Any,
    readers: dict[tuple[str, int], Any],
    queries: list[Any],
    modes: tuple[str, ...],
    levels: tuple[tuple[str, str], ...],
    desc: str,
) -> dict[str, Any]:
    """Latency per (mode, kind, level), modes interleaved per query (noise spreads evenly)."""
    from tqdm import tqdm

    walls: dict[str, list[float]] = {}
    cpus: dict[str, list[float]] = {}
    stages: dict[str, dict[str, list[float]]] = {}
    hits: dict[str, list[int]] = {}
    backends: dict[str, set[str]] = {}
    total = len(queries) * len(modes) * len(levels)
    with tqdm(total=total, desc=desc, unit="q", file=sys.stderr) as bar:
        for kind, level in levels:
            for q in queries:
                if kind == "scope":
                    who, scope = alice, q.scope(level)
                else:
                    b = q.bucket if level == "1%" else (q.bucket // 10) * 10
                    who, scope = readers[(level, b)], BASE_SCOPE
                for mode in modes:
                    key = f"{mode}/{kind}/{level}"
                    t0, c0 = time.perf_counter(), time.process_time()
                    out = svc.search(who, {"q": q.text, "mode": mode}, query_scope=scope)
                    wall = (time.perf_counter() - t0) * 1000
                    cpus.setdefault(f"{mode}/{kind}/{level}", []).append(
                        (time.process_time() - c0) * 1000
                    )
                    st = {s["stage"]: s for s in out["trace"]["stages"]}
                    embed = 0.0 if st.get("embed", {}).get("skipped") else st["embed"]["ms"]
                    walls.setdefault(key, []).append(wall - embed)
                    for name in ("vectorize", "d1_fts", "rrf", "hydrate"):
                        if name in st and not st[name].get("skipped"):
                            stages.setdefault(key, {}).setdefault(name, []).append(st[name]["ms"])
                    if "d1_fts" in st and st["d1_fts"].get("detail"):
                        backends.setdefault(key, set()).add(st["d1_fts"]["detail"].split(", ")[-1])
                    hits.setdefault(key, []).append(len(out["hits"]))
                    bar.update(1)
    cells: dict[str, Any] = {}
    for key, w in walls.items():
        cells[key] = {
            "ms": pct(w),
            # CPU time of this process per search (embedding lookup included, ~0): what a quiet
            # machine would see as wall time; the wall time above includes waiting for a core.
            "cpu_ms": pct(cpus[key]),
            "stages_p50": {k: round(float(np.median(v)), 3) for k, v in stages[key].items()},
            "mean_hits": round(float(np.mean(hits[key])), 2),
            "lexical_backend": sorted(backends.get(key, set())),
        }
    return cells


def child(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    import superchargedb  # noqa: F401  (onnxruntime before usearch)
    from superchargedb.ingest.bulk_import import import_batches

    n = args.child
    data = args.data_root / f"scale-{n}"
    done_marker = data / "IMPORTED.json"
    data_obj = SD.ScaleData.load(
        args.eval_dir, progress=False, max_docs=args.max_docs, max_queries=args.max_queries
    )
    cache = open_cache("scale_pool", CACHE_DIR)
    queries = data_obj.queries()
    step = max(1, len(queries) // args.queries)
    queries = queries[::step][: args.queries]
    rep: dict[str, Any] = {"units": n, "queries": len(queries)}
    if done_marker.exists() and args.keep:
        rep["import"] = json.loads(done_marker.read_text())
        rep["import"]["reused"] = True
    else:
        shutil.rmtree(data, ignore_errors=True)
        data.parent.mkdir(parents=True, exist_ok=True)
        svc, _, _ = open_service(data, cache, "sparse")
        try:
            t0 = time.perf_counter()
            with tqdm(total=n, desc=f"import {n}", unit="unit", file=sys.stderr) as bar:
                imp = import_batches(svc, data_obj.batches(n), progress=bar.update)
            imp["wall_s"] = round(time.perf_counter() - t0, 1)
            imp["units_per_s"] = round(n / imp["wall_s"], 1)
            imp["rss_mb_after"], imp["rss_mb_peak"] = rss_mb()
        finally:
            svc.close()
        done_marker.write_text(json.dumps(imp))
        rep["import"] = imp
    rep["disk_mb"] = du_mb(data)
    del data_obj
    svc, alice, start_s = open_service(data, cache, "sparse")
    try:
        rep["restart_s"] = round(start_s, 2)
        rep["rss_mb_after_restart"] = rss_mb()[0]
        readers = add_readers(svc)
        warm = queries[: min(20, len(queries))]
        run_cells(svc, alice, readers, warm, MODES, LEVELS[:1], "warm-up")
        if args.profile:
            from pyinstrument import Profiler

            prof = Profiler(interval=0.0005)
            prof.start()
            run_cells(svc, alice, readers, queries, ("lexical", "hybrid"), LEVELS[:1], "profile")
            prof.stop()
            (args.out / f"scale_profile_{n}.txt").write_text(prof.output_text(unicode=True))
        rep["cells"] = run_cells(svc, alice, readers, queries, MODES, LEVELS, f"search {n}")
        rep["rss_mb_after_search"], rep["rss_mb_peak"] = rss_mb()
        lexical = embedded(svc).sync.lexical
        rep["lexical_index"] = lexical.stats() if lexical else None
    finally:
        svc.close()
    if args.fts5_queries:
        fq = queries[:: max(1, len(queries) // args.fts5_queries)][: args.fts5_queries]
        svc, alice, _ = open_service(data, cache, "fts5")
        try:
            readers = add_readers(svc)
            run_cells(svc, alice, readers, fq[:5], ("lexical",), LEVELS[:1], "warm-up fts5")
            rep["fts5_cells"] = run_cells(
                svc, alice, readers, fq, ("lexical",), LEVELS, f"fts5 {n}"
            )
        finally:
            svc.close()
    if not args.keep:
        shutil.rmtree(data, ignore_errors=True)
    (args.out / f"scale_child_{n}.json").write_text(json.dumps(rep, indent=2))
    return 0


# =============================================================================== parent ====


def live_query_embedding(texts: list[str]) -> dict[str, Any] | None:
    emb = live_embedder()
    emb.embed(["warm-up"])
    ms = []
    for t in texts:
        t0 = time.perf_counter()
        emb.embed([t])
        ms.append((time.perf_counter() - t0) * 1000)
    return pct(ms)


def run(args: argparse.Namespace) -> dict[str, Any]:
    # Embeds the pool once (cached) before any child needs it.
    SD.ScaleData.load(args.eval_dir, max_docs=args.max_docs, max_queries=args.max_queries)
    sizes: list[dict[str, Any]] = []
    for n in args.sizes:
        fts5_q = args.fts5_queries if n < 1_000_000 else min(args.fts5_queries, 40)
        cmd = module_cmd(
            "scale",
            "--child",
            str(n),
            "--queries",
            str(args.queries),
            "--fts5-queries",
            str(fts5_q),
            "--data-root",
            str(args.data_root),
            "--out",
            str(args.out),
            "--eval-dir",
            str(args.eval_dir),
        )
        for flag in ("max_docs", "max_queries"):
            if getattr(args, flag) is not None:
                cmd += [f"--{flag.replace('_', '-')}", str(getattr(args, flag))]
        cmd += ["--keep"] if args.keep else []
        cmd += ["--profile"] if args.profile and n == max(args.sizes) else []
        t0 = time.perf_counter()
        env0 = environment()
        started = datetime.now(UTC).isoformat(timespec="seconds")
        proc = subprocess.run(cmd, check=False, env=child_env())
        if proc.returncode != 0:
            raise SystemExit(f"size {n} failed with exit code {proc.returncode}")
        child_rep = json.loads((args.out / f"scale_child_{n}.json").read_text())
        (args.out / f"scale_child_{n}.json").unlink()
        child_rep["child_wall_s"] = round(time.perf_counter() - t0, 1)
        # Each size records its own run, so sizes merged from separate runs (--merge) stay honest.
        child_rep["run"] = {
            "command": command("scale", args.argv),
            "git_commit": env0["git_commit"],
            "started_at": started,
            "finished_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "loadavg_start": env0["loadavg"],
            "loadavg_end": environment()["loadavg"],
        }
        sizes.append(child_rep)
    if args.merge and (args.out / "scale.json").exists():
        old = json.loads((args.out / "scale.json").read_text())
        sizes += [s for s in old["sizes"] if s["units"] not in args.sizes]
        sizes.sort(key=lambda s: s["units"])
    qtexts = [
        q.text
        for q in SD.ScaleData.load(
            args.eval_dir, progress=False, max_docs=args.max_docs, max_queries=args.max_queries
        ).queries()
    ][:50]
    return {
        "benchmark": "scale",
        "generated_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": command("scale", args.argv),
        "environment": environment(),
        "config": {
            "top_k": 10,
            "leg_depth": 100,
            "lexical_backend": "sparse (fts5 measured alongside)",
            "data": "bench/scale_data.py (real sentences; pooled real embeddings + noise)",
            "latency": "in-process Service.search, result cache off, query embedding excluded",
            "goal_hybrid_p95_ms_at_1M": GOAL_P95_MS,
        },
        "query_embedding_live_ms": live_query_embedding(qtexts),
        "sizes": sizes,
    }


def fmt(v: Any, nd: int = 1) -> str:
    return "—" if v is None else f"{v:.{nd}f}"


def markdown(r: dict[str, Any]) -> str:
    env = r["environment"]
    lines = [
        "# Scale: latency and memory at 10k / 100k / 1M Units",
        "",
        f"Generated {r['generated_at']} by `{r['command']}` (commit `{env['git_commit']}`,"
        f" {env['cpus']} CPUs, load average {env['loadavg']}: a shared machine, so absolute"
        " numbers are pessimistic).",
        "",
        f"- {r['config']['data']}; {r['config']['latency']}, top_k 10.",
        "- `scope` rows: the query scope selects ~100 / 10 / 1 % of the Units; `acl` rows: a"
        " reader who is not the owner and holds the groups of ~10 / 1 % of them.",
        f"- Live query embedding (reported apart): p50 {fmt(r['query_embedding_live_ms']['p50'])}"
        f" / p95 {fmt(r['query_embedding_live_ms']['p95'])} ms.",
        "",
        "## Runs (one per size; the machine's load average at start and end)",
        "",
        "| Units | commit | started (UTC) | wall (import + restart + searches) | load start |"
        " load end |",
        "|---|---|---|---|---|---|",
        *(
            f"| {s['units']:,} | `{s['run']['git_commit']}` | {s['run']['started_at']} |"
            f" {s['child_wall_s'] / 60:.1f} min | {s['run']['loadavg_start']} |"
            f" {s['run']['loadavg_end']} |"
            for s in r["sizes"]
            if "run" in s
        ),
        "",
        "## Import, memory, disk",
        "",
        "| Units | import s | Units/s | index apply s | restart s | RSS MB (serving) |"
        " RSS peak MB | disk MB (catalog / vectors / lexical) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for s in r["sizes"]:
        imp, d = s["import"], s["disk_mb"]
        lines.append(
            f"| {s['units']:,} | {fmt(imp.get('wall_s'))} | {fmt(imp.get('units_per_s'), 0)} |"
            f" {fmt(imp.get('index_apply_s'))} | {fmt(s['restart_s'], 2)} |"
            f" {fmt(s['rss_mb_after_search'], 0)} | {fmt(s['rss_mb_peak'], 0)} |"
            f" {fmt(d.get('total'), 0)} ({fmt(d.get('catalog'), 0)} / {fmt(d.get('index'), 0)} /"
            f" {fmt(d.get('lexical'), 0)}) |"
        )
    lines += [
        "",
        "## Latency, ms (p50 / p95 / p99), query embedding excluded",
        "",
        "| Units | filter | lexical | dense | hybrid | FTS5 lexical (before) |",
        "|---|---|---|---|---|---|",
    ]
    for s in r["sizes"]:
        for kind, level in LEVELS:
            row = [f"{s['units']:,}", f"{kind} {level}"]
            for mode in MODES:
                m = s["cells"][f"{mode}/{kind}/{level}"]["ms"]
                row.append(f"{fmt(m['p50'])} / {fmt(m['p95'])} / {fmt(m['p99'])}")
            f = (s.get("fts5_cells") or {}).get(f"lexical/{kind}/{level}")
            row.append(
                f"{fmt(f['ms']['p50'])} / {fmt(f['ms']['p95'])} (n={f['ms']['n']})" if f else "—"
            )
            lines.append("| " + " | ".join(row) + " |")
    lines += [
        "",
        "CPU time per search (ms, p50 / p95): the wall times above include waiting for a core on"
        " this shared machine; on a quiet 2-core machine a search's wall time is about its CPU"
        " time.",
        "",
        "| Units | filter | lexical | dense | hybrid |",
        "|---|---|---|---|---|",
    ]
    for s in r["sizes"]:
        for kind, level in LEVELS:
            row = [f"{s['units']:,}", f"{kind} {level}"]
            for mode in MODES:
                m = s["cells"][f"{mode}/{kind}/{level}"]["cpu_ms"]
                row.append(f"{fmt(m['p50'])} / {fmt(m['p95'])}")
            lines.append("| " + " | ".join(row) + " |")
    big = max(r["sizes"], key=lambda s: s["units"])
    worst = max(big["cells"][f"hybrid/{k}/{lv}"]["ms"]["p95"] for k, lv in LEVELS)
    lines += [
        "",
        f"Goal: hybrid p95 < {GOAL_P95_MS:.0f} ms at the largest size ({big['units']:,} Units):"
        f" worst filter p95 {worst:.1f} ms — {'met' if worst < GOAL_P95_MS else 'NOT met'}.",
        "",
        "Stage medians (ms) of the hybrid cells: "
        + "; ".join(
            f"{s['units']:,} {k} {lv}: "
            + ", ".join(
                f"{name} {v:.1f}"
                for name, v in s["cells"][f"hybrid/{k}/{lv}"]["stages_p50"].items()
            )
            for s in r["sizes"]
            for k, lv in (("scope", "100%"), ("scope", "1%"))
        )
        + ".",
    ]
    return "\n".join(lines) + "\n"


def plots(r: dict[str, Any], out: Path) -> list[str]:
    plt = pyplot()
    if plt is None:  # the bench extra is not installed: the report goes without plots
        return []
    sizes = [s["units"] for s in r["sizes"]]
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.5), sharey=True)
    for ax, mode in zip(axes, MODES, strict=True):
        for kind, level in LEVELS:
            p95 = [s["cells"][f"{mode}/{kind}/{level}"]["ms"]["p95"] for s in r["sizes"]]
            p50 = [s["cells"][f"{mode}/{kind}/{level}"]["ms"]["p50"] for s in r["sizes"]]
            (line,) = ax.plot(sizes, p95, marker="o", label=f"{kind} {level} p95")
            ax.plot(sizes, p50, marker=".", ls=":", color=line.get_color())
        if mode == "lexical":
            f5 = [s for s in r["sizes"] if s.get("fts5_cells")]
            ax.plot(
                [s["units"] for s in f5],
                [s["fts5_cells"]["lexical/scope/100%"]["ms"]["p95"] for s in f5],
                marker="x",
                color="black",
                label="FTS5 scope 100% p95",
            )
        ax.axhline(GOAL_P95_MS, color="red", lw=0.8, ls="--")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(f"{mode} (dotted: p50)")
        ax.set_xlabel("Units")
    axes[0].set_ylabel("ms, query embedding excluded")
    axes[-1].legend(fontsize=7)
    fig.tight_layout()
    lat = out / "scale_latency.png"
    fig.savefig(lat, dpi=110)
    plt.close(fig)
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(sizes, [s["rss_mb_after_search"] for s in r["sizes"]], marker="o", label="RSS serving")
    ax.plot(sizes, [s["rss_mb_peak"] for s in r["sizes"]], marker="o", label="RSS peak")
    ax.plot(sizes, [s["disk_mb"]["total"] for s in r["sizes"]], marker="s", label="on disk")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("Units")
    ax.set_ylabel("MB")
    ax.legend()
    fig.tight_layout()
    mem = out / "scale_memory.png"
    fig.savefig(mem, dpi=110)
    plt.close(fig)
    return [lat.name, mem.name]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument(
        "--sizes",
        type=lambda s: [int(x) for x in s.split(",")],
        default=list(DEFAULT_SIZES),
        help="comma-separated Unit counts",
    )
    ap.add_argument("--queries", type=int, default=200, help="queries per cell")
    ap.add_argument("--fts5-queries", type=int, default=100, help="0 skips the FTS5 run")
    ap.add_argument("--out", type=Path, default=RESULTS)
    evaldir.add_argument(ap)
    ap.add_argument("--data-root", type=Path, default=Path(tempfile.gettempdir()) / "scdb-scale")
    ap.add_argument("--keep", action="store_true", help="keep (and reuse) the data dirs")
    ap.add_argument("--profile", action="store_true", help="pyinstrument at the largest size")
    ap.add_argument("--max-docs", type=int, help="source documents used (smoke runs)")
    ap.add_argument("--max-queries", type=int, help="real queries loaded (smoke runs)")
    ap.add_argument(
        "--merge", action="store_true", help="keep the other sizes of an existing scale.json"
    )
    ap.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    args.argv = argv if argv is not None else sys.argv[1:]
    args.eval_dir = evaldir.eval_dir(args.eval_dir)  # stops here, naming SCDB_EVAL_DIR, if unset
    args.out.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("SCDB_AUDIT_KEY", "22" * 32)
    if args.child:
        return child(args)
    report = run(args)
    report["plots"] = plots(report, args.out)
    md = markdown(report)
    write_report(args.out, "scale", report, md)
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
