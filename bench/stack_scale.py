"""The server stack against the embedded default at 100k Units, side by side in one run, over HTTP.

1. **Data**: the first N Units of bench/scale_data.py (real sentences of the eval corpora; each
   vector its source document's real embedding plus noise) go into a fresh embedded data dir and
   into a fresh stack (PostgreSQL + pgvector, SeaweedFS S3, Valkey, started here on loopback
   ports from their wheels by ``stack.up.start_engines``) with the bulk import's code path.
2. **Servers**: ``serve`` on the embedded dir, ``serve`` (one API process) on the stack and
   ``serve --workers 2`` on the same stack, all at once; result cache, query-embedding cache and
   rate limits off, derivation jobs off, admission limits fixed (no latency target).
3. **Latency**: hybrid searches (top 10, as alice, the query's scope selecting ~1 %, ~10 % or all
   of the Units), each query sent to the embedded server and to the one-process stack in turn,
   one at a time, processes unconfined: client wall (the whole request, query embedding by the
   server's model included) and the server's traced time less the embedding.
4. **Ingest**: ``POST /v1/ingest`` batches of 64 new Units (the server embeds them), alternating
   between the two, into a scope of their own.
5. **Throughput**: each API process in its own cgroup capped at half a core (cgroup v1
   ``cpu.cfs_quota_us`` 50000 per 100000 us period), a closed loop of 8 clients (outside any
   cgroup) sending the latency phase's queries (all three filters) for ``--seconds``: the
   embedded server, the stack with one and with two API processes, in ``--rounds`` rounds.
   CPU per request from the API cgroups' ``cpuacct.usage`` (and PostgreSQL + Valkey's, in an
   accounting-only group).

Everything started is stopped at the end (SeaweedFS killed, as ``stack down`` does).

    .venv/bin/python -m bench.stack_scale                       # 100k Units (~30 min here)
    .venv/bin/python -m bench.stack_scale --units 5000 --queries 20 --seconds 10 --rounds 1

Writes ``<out>/stack_scale.json``, ``stack_scale.md`` and ``stack_scale.png``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

from bench import scale_data as SD
from bench.common import cgroups, evaldir, progress
from bench.common.data import BASE_SCOPE
from bench.common.embedcache import make_caching_embedder, open_cache
from bench.common.env import environment
from bench.common.httpload import HEADERS, Query, closed_loop, ingest, paired_latency
from bench.common.paths import CACHE_DIR, RESULTS
from bench.common.proc import child_env
from bench.common.report import command, write_report
from bench.common.server import Server, free_port
from bench.stack_scale_report import markdown, plots

LEVELS = (("1%", "1%"), ("10%", "10%"), ("none", "100%"))  # report name, scale_data level
INGEST_SCOPE = "acme/alpha/ingest"  # outside the bench scope: the filters' shares stay put
INGEST_BLOCK = 500  # scale_data block of the ingested Units (past any imported size)
INGEST_BATCH = 64
QUOTA_CORES = 0.5
CONCURRENCY = 8
GOAL_P50_RATIO = 2.0
GOAL_SCALE = 1.6
AUDIT_KEY = "33" * 32


def server_env(anchor: Path, extra: dict[str, str]) -> dict[str, str]:
    """The environment of every API server: every search must run, nothing else competes."""
    env = child_env()
    env = {k: v for k, v in env.items() if not k.startswith("SCDB_") or k == "SCDB_EVAL_DIR"}
    return {
        **env,
        "SCDB_AUDIT_KEY": AUDIT_KEY,
        "SCDB_AUDIT_ANCHOR_FILE": str(anchor),
        "SCDB_CACHE_MAX_BYTES": "0",
        "SCDB_EMBED_CACHE_SIZE": "0",
        "SCDB_RATE_KEY_RPS": "0",
        "SCDB_RATE_IP_RPS": "0",
        "SCDB_JOB_WORKERS": "0",
        "SCDB_LATENCY_TARGET_SEARCH_S": "0",
        "SCDB_LATENCY_TARGET_INGEST_S": "0",
        **extra,
    }


def settings_of(env: dict[str, str]) -> dict[str, Any]:
    """``SCDB_``-prefixed variables as Settings keyword arguments (lower-cased, prefix dropped)."""
    return {k.removeprefix("SCDB_").lower(): v for k, v in env.items()}


def anchor_of(data: Path) -> Path:
    return data.parent / f"{data.name}-anchor.json"  # where bench.common.service puts it


def bulk_import(
    data: Path, engines: dict[str, str], scale: SD.ScaleData, n: int, keep: bool
) -> dict[str, Any]:
    """The first ``n`` Units into ``data`` (and the stack's engines, if given) by the bulk
    import, in this process; reused when ``keep`` and a previous run imported the same ``n``."""
    from bench.common.service import make_service
    from superchargedb.ingest.bulk_import import import_batches

    marker = data / "IMPORTED.json"
    if keep and marker.exists() and json.loads(marker.read_text()).get("units") == n:
        return {**json.loads(marker.read_text()), "reused": True}
    if data.exists() and not engines:
        shutil.rmtree(data)
    data.mkdir(parents=True, exist_ok=True)
    cache = open_cache("scale_pool", CACHE_DIR)
    svc, _ = make_service(
        data, make_caching_embedder(cache, allow_live=False), **settings_of(engines)
    )
    try:
        name = "stack" if engines else "embedded"
        with progress.bar(total=n, desc=f"import {name}", unit="unit") as bar:
            t0 = time.perf_counter()
            imp = import_batches(svc, scale.batches(n), progress=bar.update)
        imp["wall_s"] = round(time.perf_counter() - t0, 1)
        imp["units_per_s"] = round(n / imp["wall_s"], 1)
    finally:
        svc.close()
    imp["units"] = n
    marker.write_text(json.dumps(imp))
    return imp


def vacuum_analyze(engines: dict[str, str]) -> float:
    """``VACUUM (ANALYZE)`` of the stack's database after the bulk load, as autovacuum would do
    within minutes (planner statistics; the visibility map the postings' index-only scans
    need), so the searches do not depend on when it wakes up. Its seconds."""
    import psycopg

    t0 = time.perf_counter()
    with psycopg.connect(engines["SCDB_DATABASE_URL"], autocommit=True) as conn:
        conn.execute("VACUUM (ANALYZE)")
    return round(time.perf_counter() - t0, 1)


@contextlib.contextmanager
def engines_running(root: Path) -> Iterator[tuple[dict[str, str], list[int]]]:
    """PostgreSQL, SeaweedFS and Valkey under ``root`` (their settings; the process groups of
    PostgreSQL and Valkey); all stopped after, SeaweedFS killed (``stack.up.down``)."""
    from superchargedb.stack import up

    state = up.StackState(str(root), "", 0, datetime.now(UTC).isoformat(timespec="seconds"))
    try:
        up.start_engines(state, echo=progress.write)
        yield dict(state.env), [state.processes[k].pid for k in ("postgres", "valkey")]
    finally:
        up.down(root, echo=progress.write)


def query_set(scale: SD.ScaleData, per_level: int) -> list[Query]:
    """``per_level`` real queries evenly over the set, each at every filter level, interleaved."""
    qs = scale.queries()
    qs = qs[:: max(1, len(qs) // per_level)][:per_level]
    return [
        Query(q.text, q.scope(lv) if lv != "100%" else BASE_SCOPE, name)
        for q in qs
        for name, lv in LEVELS
    ]


def ingest_units(scale: SD.ScaleData, n: int) -> list[dict[str, Any]]:
    """``n`` new Units (text and doc id only: the caller owns them), from a block no import uses."""
    records, _ = scale.block(INGEST_BLOCK)
    return [{"text": r["text"], "doc_id": r["doc_id"], "scope": INGEST_SCOPE} for r in records[:n]]


def ingest_phase(
    clients: dict[str, httpx.Client], units: list[dict[str, Any]]
) -> dict[str, dict[str, Any]]:
    """The same batches to each server, alternating batch by batch."""
    secs: dict[str, list[float]] = {name: [] for name in clients}
    batches = [units[i : i + INGEST_BATCH] for i in range(0, len(units), INGEST_BATCH)]
    with progress.bar(total=len(batches) * len(clients), desc="ingest", unit="batch") as bar:
        for i, batch in enumerate(batches):
            names = list(clients)[i % len(clients) :] + list(clients)[: i % len(clients)]
            for name in names:
                secs[name].append(ingest(clients[name], batch, INGEST_SCOPE))
                bar.update(1)
    return {
        name: {
            "units": len(units),
            "batch": INGEST_BATCH,
            "seconds": round(sum(s), 2),
            "units_per_s": round(len(units) / sum(s), 1),
            "batch_s_p50": round(statistics.median(s), 3),
        }
        for name, s in secs.items()
    }


def throughput_run(
    server: Server, groups: list[cgroups.CpuGroup], engines: cgroups.CpuGroup | None,
    queries: list[Query], seconds: float, warmup_s: float,
) -> dict[str, Any]:  # fmt: skip
    """One closed-loop run against ``server``, whose API processes are in ``groups``."""
    marks: dict[str, dict[str, Any]] = {}
    pids = server.api_pids()

    def mark(edge: str) -> None:
        marks[edge] = {
            "t": time.monotonic(),
            "api": [g.usage_s() for g in groups],
            "proc": [cgroups.proc_cpu_s(p) or 0.0 for p in pids],
            "engines": engines.usage_s() if engines is not None else 0.0,
            "throttled": [g.throttling().get("nr_throttled", 0) for g in groups],
        }

    res = closed_loop(server.url, queries, CONCURRENCY, seconds, warmup_s, on_window=mark)
    a, b = marks["start"], marks["end"]
    wall = b["t"] - a["t"]
    proc = [y - x for x, y in zip(a["proc"], b["proc"], strict=True)]
    # Without groups (--no-cgroups) the API processes' own counters stand in.
    api = [y - x for x, y in zip(a["api"], b["api"], strict=True)] if groups else proc
    eng = b["engines"] - a["engines"]
    ok = max(1, res["ok"])
    return {
        **res,
        "api_processes": len(groups),
        "api_cpu_s": [round(x, 2) for x in api],
        "api_cores_used": [round(x / wall, 3) for x in api],
        "proc_stat_cpu_s": [round(x, 2) for x in proc],
        "throttled_periods": [y - x for x, y in zip(a["throttled"], b["throttled"], strict=True)],
        "api_cpu_ms_per_request": round(sum(api) / ok * 1000, 2),
        "engines_cpu_ms_per_request": round(eng / ok * 1000, 2) if engines is not None else None,
        "cpu_ms_per_request": round((sum(api) + eng) / ok * 1000, 2),
    }


def throughput_phase(
    by_cfg: dict[str, Server], quotas: dict[str, list[cgroups.CpuGroup]],
    engines: cgroups.CpuGroup | None, mixes: dict[str, list[Query]], args: argparse.Namespace,
) -> dict[str, Any]:  # fmt: skip
    """Every (query mix, configuration) for ``args.rounds`` rounds, configurations interleaved
    within a round so a change in the machine's load falls on all of them."""
    runs = []
    with progress.bar(total=args.rounds * len(by_cfg) * len(mixes), desc="throughput") as bar:
        for r in range(args.rounds):
            for mix, qs in mixes.items():
                for cfg, srv in by_cfg.items():
                    out = throughput_run(
                        srv, quotas[cfg], engines if cfg != "embedded" else None, qs,
                        args.seconds, args.warmup,
                    )  # fmt: skip
                    runs.append({"mix": mix, "config": cfg, "round": r, **out})
                    progress.write(
                        f"{mix}, {cfg}, round {r}: {out['rps']} req/s,"
                        f" {out['cpu_ms_per_request']} CPU ms/request"
                    )
                    bar.update(1)
    summary = {
        mix: summarize([x for x in runs if x["mix"] == mix]) for mix in mixes
    }  # fmt: skip
    return {"runs": runs, "summary": summary}


def summarize(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Per configuration: the median of its rounds (rounds interleave the configurations)."""
    out: dict[str, Any] = {}
    for cfg in dict.fromkeys(r["config"] for r in runs):
        mine = [r for r in runs if r["config"] == cfg]
        med = {
            k: round(statistics.median(r[k] for r in mine), 2)
            for k in ("rps", "api_cpu_ms_per_request", "cpu_ms_per_request")
        }
        med["latency_p50_ms"] = round(statistics.median(r["latency_ms"]["p50"] for r in mine), 1)
        med["latency_p95_ms"] = round(statistics.median(r["latency_ms"]["p95"] for r in mine), 1)
        errors = sum(v for r in mine for k, v in r["statuses"].items() if k != "200")
        out[cfg] = {**med, "rounds": len(mine), "non_200": errors}
    return out


def goals(lat: dict[str, Any], thr: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The issue's two goals; the second for each query mix of ``thr``."""
    e, s = lat["embedded"]["1%"], lat["stack"]["1%"]
    ratio = s["wall_ms"]["p50"] / e["wall_ms"]["p50"]
    inner = s["server_less_embed_ms"]["p50"] / max(1e-9, e["server_less_embed_ms"]["p50"])
    out: dict[str, Any] = {
        "p50_ratio_1pct": round(ratio, 2),
        "p50_ratio_1pct_met": ratio <= GOAL_P50_RATIO,
        "p50_ratio_1pct_less_embed": round(inner, 2),
        "two_vs_one_process": {},
    }
    for mix, t in thr.items():
        scale = t["stack x2"]["rps"] / max(1e-9, t["stack x1"]["rps"])
        out["two_vs_one_process"][mix] = {"ratio": round(scale, 2), "met": scale >= GOAL_SCALE}
    return out


def run(args: argparse.Namespace) -> dict[str, Any]:
    t_start = time.perf_counter()
    os.environ["SCDB_AUDIT_KEY"] = AUDIT_KEY  # the imports' Service and the servers share it
    why = None if args.no_cgroups else cgroups.available()
    if why is not None:
        raise SystemExit(f"{why} (or pass --no-cgroups to run without the CPU quotas)")
    scale = SD.ScaleData.load(args.eval_dir)
    root = args.data_root
    root.mkdir(parents=True, exist_ok=True)
    os.chmod(root, 0o755)  # PostgreSQL runs as its own user: it must get through
    emb_dir, st_dir = root / "embedded", root / "stack-data"
    if not args.keep:
        shutil.rmtree(emb_dir, ignore_errors=True)
        shutil.rmtree(st_dir, ignore_errors=True)
        shutil.rmtree(root / "stack", ignore_errors=True)
    report: dict[str, Any] = {"import": {}}
    report["import"]["embedded"] = bulk_import(emb_dir, {}, scale, args.units, args.keep)
    queries = query_set(scale, args.queries)
    made: list[cgroups.CpuGroup] = []
    servers: list[Server] = []

    def group(name: str, quota: float | None) -> cgroups.CpuGroup:
        g = cgroups.CpuGroup(f"scdb-stackbench-{name}", quota).create()
        made.append(g)
        return g

    try:
        with engines_running(root) as (engines, engine_pgids):
            report["import"]["stack"] = bulk_import(st_dir, engines, scale, args.units, args.keep)
            report["import"]["stack"]["vacuum_analyze_s"] = vacuum_analyze(engines)
            eng_group = None
            if not args.no_cgroups:  # accounting only: new PostgreSQL backends are born inside
                eng_group = group("engines", None)
                for pgid in engine_pgids:
                    for pid in cgroups.group_pids(pgid):
                        eng_group.add(pid)
            logs = root / "logs"
            logs.mkdir(exist_ok=True)
            specs = {
                "embedded": (emb_dir, {}, 1),
                "stack x1": (st_dir, engines, 1),
                "stack x2": (st_dir, engines, 2),
            }
            by_cfg: dict[str, Server] = {}
            for cfg, (data, extra, workers) in specs.items():
                env = server_env(anchor_of(data), extra)
                log = logs / f"{cfg.replace(' ', '-')}.log"
                srv = Server(data, free_port(), log, env, demo=False, workers=workers)
                progress.write(f"starting {cfg} ...")
                t0 = time.perf_counter()
                servers.append(srv)
                srv.start()
                report.setdefault("server_start_s", {})[cfg] = round(time.perf_counter() - t0, 1)
                by_cfg[cfg] = srv
            clients = {
                "embedded": httpx.Client(base_url=by_cfg["embedded"].url, headers=HEADERS,
                                         timeout=120),
                "stack": httpx.Client(base_url=by_cfg["stack x1"].url, headers=HEADERS,
                                      timeout=120),
            }  # fmt: skip
            try:
                paired_latency(clients, queries[: 3 * min(5, args.queries)])  # warm-up
                with progress.bar(total=len(queries), desc="latency", unit="q") as bar:
                    report["latency"] = paired_latency(clients, queries, bar.update)
                report["ingest"] = ingest_phase(clients, ingest_units(scale, args.ingest_units))
            finally:
                for c in clients.values():
                    c.close()
            quotas: dict[str, list[cgroups.CpuGroup]] = {}
            for cfg, srv in by_cfg.items():
                quotas[cfg] = []
                for i, pid in enumerate([] if args.no_cgroups else srv.api_pids()):
                    quotas[cfg].append(group(f"{cfg.replace(' ', '')}-{i}", QUOTA_CORES))
                    quotas[cfg][-1].add(pid)
            mixes = {"all filters": queries, "1% filter": [q for q in queries if q.level == "1%"]}
            report["throughput"] = throughput_phase(by_cfg, quotas, eng_group, mixes, args)
            for srv in servers:
                srv.stop()
    finally:
        for srv in servers:
            srv.stop()
        for g in made:
            g.remove()
    if not args.keep:
        shutil.rmtree(root, ignore_errors=True)
    report["goals"] = goals(report["latency"], report["throughput"]["summary"])
    report["wall_s"] = round(time.perf_counter() - t_start, 1)
    return report


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--units", type=int, default=100_000, help="Units imported into each")
    ap.add_argument("--queries", type=int, default=100, help="queries per filter level")
    ap.add_argument("--ingest-units", type=int, default=640, help="Units ingested into each")
    ap.add_argument("--seconds", type=float, default=30.0, help="measured seconds per run")
    ap.add_argument("--warmup", type=float, default=3.0, help="unmeasured seconds before each")
    ap.add_argument("--rounds", type=int, default=2, help="throughput rounds (interleaved)")
    ap.add_argument("--out", type=Path, default=RESULTS)
    ap.add_argument(
        "--data-root", type=Path, default=Path(tempfile.gettempdir()) / "scdb-stackbench"
    )
    ap.add_argument("--keep", action="store_true", help="keep (and reuse) the imported data")
    ap.add_argument("--no-cgroups", action="store_true", help="no CPU quotas (not the benchmark)")
    evaldir.add_argument(ap)
    args = ap.parse_args(argv)
    args.argv = argv if argv is not None else sys.argv[1:]
    args.eval_dir = evaldir.eval_dir(args.eval_dir)
    if args.ingest_units > SD.BLOCK:
        ap.error(f"--ingest-units is at most {SD.BLOCK}")
    started = datetime.now(UTC).isoformat(timespec="seconds")
    env0 = environment()
    body = run(args)
    report = {
        "benchmark": "stack_scale",
        "generated_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "started_at": started,
        "command": command("stack_scale", args.argv),
        "environment": {**env0, "loadavg_end": environment()["loadavg"]},
        "config": {
            "units": args.units,
            "queries_per_level": args.queries,
            "mode": "hybrid",
            "top_k": 10,
            "data": "bench/scale_data.py: real sentences of the eval corpora; vectors are the"
            " source documents' real embeddings (default model) plus gaussian noise",
            "queries": "real queries (SciFact, Cranfield, ADI, XQuAD), embedded by the server",
            "concurrency": CONCURRENCY,
            "quota_cores_per_api_process": None if args.no_cgroups else QUOTA_CORES,
            "seconds_per_run": args.seconds,
            "rounds": args.rounds,
            "server_settings": {
                k: v
                for k, v in server_env(Path("anchor"), {}).items()
                # The eval data's folder is where this machine keeps it, not a server setting.
                if k.startswith("SCDB_")
                and k not in ("SCDB_AUDIT_KEY", "SCDB_AUDIT_ANCHOR_FILE", "SCDB_EVAL_DIR")
            },
            "goals": {"p50_ratio_1pct_max": GOAL_P50_RATIO, "two_vs_one_min": GOAL_SCALE},
        },
        **body,
    }
    report["plots"] = plots(report, args.out)
    md = markdown(report)
    write_report(args.out, "stack_scale", report, md)
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
