"""The alternating rounds: every system in its own child, ours loaded first (it exports the Units
and vectors the peers index), a warm-up, then every cell on every system in rotating order, so
load noise from a shared machine hits all systems alike; then each system's numbers."""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from bench.common.baselines import BASELINES
from bench.common.data import BASE_SCOPE, filter_scope, load_dataset, select
from bench.common.env import environment
from bench.common.evaldir import shown
from bench.common.progress import bar
from bench.common.report import command
from bench.common.service import BATCH
from bench.common.stats import pct, score
from bench.peers.cells import CELLS, SCALE_CELLS, TOP_K, cell_key, rounds_of
from bench.peers.parent import Child, ChildError
from bench.peers.prepare import (
    live_embedding_sample,
    prepare_queries,
    prepare_scale,
    qmeta_texts,
    warm_embedding_cache,
)
from bench.peers.summary import ratios, vs_faster_peer
from bench.peers.units import load_units


@dataclass
class Plan:
    """What one run measures: the dataset's documents and queries, the cells, the work dir."""

    name: str
    cells: list[tuple[str, str, int]]
    docs: list[str]
    qids: list[str]
    qrels: dict[str, dict[str, int]]
    work: Path
    qprep: dict[str, Any]

    @property
    def log_dir(self) -> Path:  # kept (copied to <out>/peers-logs) only if a system failed
        return self.work / "logs"


@dataclass
class Tally:
    """Per system and cell, what the rounds collected."""

    names: list[str]
    lat: dict[str, dict[str, list[float]]] = field(default_factory=dict)
    emb_ms: dict[str, dict[str, list[float]]] = field(default_factory=dict)
    wall: dict[str, dict[str, list[tuple[int, float]]]] = field(default_factory=dict)
    ranks: dict[str, dict[str, dict[str, list[str]]]] = field(default_factory=dict)
    viol: dict[str, dict[str, int]] = field(default_factory=dict)
    fill: dict[str, dict[str, list[float]]] = field(default_factory=dict)
    rss_warm: dict[str, dict[str, float]] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for d in (self.lat, self.emb_ms, self.wall, self.ranks, self.viol, self.fill):
            d.update({s: {} for s in self.names})
        self.rss_warm.update({s: {} for s in self.names})


def plan(args: argparse.Namespace) -> Plan:
    """Select the documents and queries (or build the scale Units) and prepare the query files."""
    work = Path(tempfile.mkdtemp(prefix="scdb-bench-peers-", dir=args.work_dir))
    (work / "logs").mkdir()
    if args.scale:
        name = f"scale-{args.scale}"
        qids, docs, qprep = prepare_scale(
            work,
            args.scale,
            args.limit_queries or 100,
            args.cache_dir,
            args.max_docs,
            args.eval_dir,
        )
        print(f"{name}: {len(docs)} Units, {len(qids)} queries", file=sys.stderr)
        return Plan(name, SCALE_CELLS, docs, qids, {}, work, qprep)
    name = args.dataset.resolve().name
    corpus, queries, qrels = load_dataset(args.dataset, args.split)
    docs, qids = select(corpus, queries, qrels, args.limit_docs, args.limit_queries)
    if not qids:
        shutil.rmtree(work, ignore_errors=True)
        raise SystemExit("no query has all its relevant documents ingested; raise --limit-docs")
    qprep = prepare_queries(work, name, args.cache_dir, [queries[q] for q in qids], docs)
    return Plan(name, CELLS, docs, qids, qrels, work, qprep)


def header(args: argparse.Namespace, p: Plan, env: dict[str, Any], warm: dict[str, Any]) -> Any:
    return {
        "benchmark": "peers",
        "generated_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": command("peers", args.argv),
        "dataset": {
            "name": p.name,
            "path": "bench/scale_data.py" if args.scale else shown(args.dataset),
            "split": args.split,
            "docs": len(p.docs),
            "queries_scored": len(p.qids),
            "limited": args.limit_docs is not None or args.limit_queries is not None,
            "scale": args.scale,
        },
        "config": {
            "top_k": TOP_K,
            "batch_docs": BATCH,
            "rounds": args.rounds,
            "cells": [cell_key(*c) for c in p.cells],
            "embedder": p.qprep["model_id"],
            "filters": {
                "100%": BASE_SCOPE,
                "10%": f"{BASE_SCOPE}/t<b//10>",
                "1%": f"{BASE_SCOPE}/t<b//10>/u<b>",
            },
            "recall_note": f"Recall@100 over the documents in the top {TOP_K} Units",
        },
        "environment": env,
        "systems": {},
        "hybrid+rerank": {"ran": False, "reason": "no reranker configured (offline)"},
        "embedding": {
            "model": p.qprep["model_id"],
            "query_live_ms": pct(p.qprep["live_ms"]),
            "note": "excluded from every system's search latency (vectors precomputed)",
            "cache_warm": warm,
        },
    }


def start(systems: list[str], p: Plan, sysrep: dict[str, Any]) -> dict[str, Child]:
    """A child per system; one that cannot start (extra not installed) is reported, not run."""
    children: dict[str, Child] = {}
    for s in systems:
        try:
            ch = Child(s, p.work, p.log_dir)
            children[s] = ch
            sysrep[s] = {
                "ran": False,
                "version": ch.hello["version"],
                "import_s": round(ch.hello["import_s"], 3),
                "rss_after_import_mb": round(ch.hello["rss_mb"], 1),
            }
        except ChildError as e:
            sysrep[s] = {"ran": False, "error": str(e).splitlines()[0]}
            print(f"{s}: not run: {e}", file=sys.stderr)
    return children


def load(
    args: argparse.Namespace, p: Plan, children: dict[str, Child], sysrep: dict[str, Any]
) -> None:
    """Ingest + index in every system, ours first; a peer that fails to load is dropped."""
    msg = {
        "cmd": "load",
        "dataset": str(args.dataset),
        "split": args.split,
        "docs": p.docs,
        "cache_dir": str(args.cache_dir),
        "lancedb_ann_min_rows": args.lancedb_ann_min_rows,
        "txtai_unlocked": args.txtai_unlocked,
        "scale": args.scale,
        "model_id": p.qprep["model_id"],
    }
    for s in list(children):
        print(f"{s}: ingest + index ...", file=sys.stderr)
        try:
            out = children[s].call(**msg)
        except ChildError as e:
            if s == "ours":
                raise
            sysrep[s]["error"] = str(e).splitlines()[0]
            children.pop(s).close()
            continue
        sysrep[s].update(loaded(out))


def loaded(out: dict[str, Any]) -> dict[str, Any]:
    """A system's load reply as its report section."""
    ing_s = out["ingest_s"] - out.get("live_embedding_s", 0.0)
    chunking = out.get("chunking_s_estimate")
    return {
        "config": out["config"],
        "docs": out["docs"],
        "units": out["units"],
        "ingest": {
            "seconds": round(out["ingest_s"], 3),
            "live_embedding_s": round(out.get("live_embedding_s", 0.0), 3),
            "chunking_s_estimate": round(chunking, 3) if chunking is not None else None,
            "docs_per_s": round(out["docs"] / ing_s, 2),
            "units_per_s": round(out["units"] / ing_s, 2),
        },
        "index_build_s": round(out["index_s"], 4),
        "index_note": out["index_note"],
        "rss_after_load_mb": round(out["rss_after_load_mb"], 1),
        "gc_frozen_objects": out.get("gc_frozen_objects"),
    }


def warm_up(children: dict[str, Child], p: Plan, first: list[int], t: Tally) -> None:
    """Not timed, not scored: lazy initialisation is not query latency. The concurrency-1 cells
    first, then concurrency 8, with the RSS after each: per-thread state (connections, caches)
    shows up as the difference."""
    for s in t.names:
        for conc in (1, 8):
            for mode, level, c in p.cells:
                if c == conc:
                    out = children[s].call(
                        cmd="search", mode=mode, filter=level, c=c, qidx=first[:3], top_k=TOP_K
                    )
                    t.rss_warm[s][f"c{conc}"] = out["rss_mb"]


def rounds(
    args: argparse.Namespace, p: Plan, children: dict[str, Child], units: dict[str, Any], t: Tally
) -> None:
    """Every round's queries through every cell on every system, the order rotating."""
    batches = rounds_of(len(p.qids), args.rounds)
    warm_up(children, p, batches[0], t)
    per_scope: dict[str, int] = {}
    for sc in units["scope"].tolist():
        per_scope[sc] = per_scope.get(sc, 0) + 1
    buckets = json.loads((p.work / "queries.json").read_text())["buckets"]
    names = t.names
    with bar(total=len(batches) * len(p.cells) * len(names), desc="rounds", unit="batch") as b:
        for r, batch in enumerate(batches):
            for ci, (mode, level, c) in enumerate(p.cells):
                key = cell_key(mode, level, c)
                k = (r * len(p.cells) + ci) % len(names)
                for s in names[k:] + names[:k]:
                    b.update(1)
                    if s in t.failed:
                        continue
                    try:
                        out = children[s].call(
                            cmd="search",
                            mode=mode,
                            filter=level,
                            c=c,
                            qidx=batch,
                            top_k=TOP_K,
                            want_docs=(c == 1 and level == "100%" and not args.scale),
                        )
                    except ChildError as e:
                        t.failed[s] = f"{key}: {str(e).splitlines()[0]}"
                        continue
                    record(t, s, key, mode, level, batch, out, buckets, per_scope)


def record(
    t: Tally,
    s: str,
    key: str,
    mode: str,
    level: str,
    batch: list[int],
    out: dict[str, Any],
    buckets: list[int],
    per_scope: dict[str, int],
) -> None:
    """One system's reply for one cell and batch, into the tally."""
    t.lat[s].setdefault(key, []).extend(out["ms"])
    t.emb_ms[s].setdefault(key, []).extend(out["embed_ms"])
    t.wall[s].setdefault(key, []).append((out["requests"], out["wall_s"]))
    t.viol[s][key] = t.viol[s].get(key, 0) + out["violations"]
    if "docs" in out:
        t.ranks[s].setdefault(mode, {}).update(out["docs"])
    if level != "100%" and mode == "hybrid":
        for qi, n in zip(batch, out["n_hits"], strict=False):
            sc = filter_scope(level, buckets[qi])
            avail = sum(v for sc2, v in per_scope.items() if sc2 == sc or sc2.startswith(sc + "/"))
            t.fill[s].setdefault(key, []).append(n / max(1, min(TOP_K, avail)))


def ours_extras(report: dict[str, Any], children: dict[str, Child], p: Plan, t: Tally) -> None:
    """HTTP overhead and snippets on / off (ours only), after the peak RSS was read."""
    http = None
    if "ours" in children and "ours" not in t.failed:
        qidx = list(range(len(p.qids)))
        print("ours: HTTP overhead ...", file=sys.stderr)
        http = children["ours"].call(cmd="http", qidx=qidx, top_k=TOP_K)
        http.pop("ok", None)
        print("ours: snippets on / off ...", file=sys.stderr)
        snip = children["ours"].call(cmd="snippets", qidx=qidx, top_k=TOP_K)
        snip.pop("ok", None)
        report["snippets"] = snip
    report["http_overhead"] = http


def assemble(rep: dict[str, Any], s: str, p: Plan, t: Tally, stats: dict[str, Any]) -> None:
    """System ``s``'s numbers from the tally into its report section ``rep``."""
    if s in t.failed:
        rep["error"] = t.failed[s]
        return
    lat = t.lat[s]
    rep["ran"] = True
    rep["peak_rss_mb"] = round(stats[s]["peak_rss_mb"], 1)
    rep["latency_ms"] = {k: pct(v) for k, v in lat.items()}
    if s == "ours":
        rep["latency_excluding_embed_ms"] = {
            k: pct([a - b for a, b in zip(v, t.emb_ms[s][k], strict=True)]) for k, v in lat.items()
        }
    rep["qps"] = {
        k: round(sum(n for n, _ in v) / sum(w for _, w in v), 2) for k, v in t.wall[s].items()
    }
    rep["filter_violations"] = t.viol[s]
    rep["rss_after_warmup_mb"] = {k: round(v, 1) for k, v in t.rss_warm[s].items()}
    rep["filtered_fill"] = {k: round(float(np.mean(v)), 4) for k, v in t.fill[s].items() if v}
    rep["quality"] = {
        mode: score({p.qids[int(qi)]: d for qi, d in rk.items()}, p.qrels)
        for mode, rk in t.ranks[s].items()
    }
    rep["_latency_raw"] = {k: [round(x, 3) for x in v] for k, v in lat.items()}


def run(args: argparse.Namespace) -> dict[str, Any]:
    systems = [s for s in args.systems.split(",") if s]
    systems.sort(key=lambda s: s != "ours")  # ours loads first: it exports the Units
    env_start = environment()
    p = plan(args)
    print(f"{p.name}: systems {systems}; load average {env_start['loadavg']}", file=sys.stderr)
    warm: dict[str, Any] = {"skipped": "scale mode: vectors given"}
    children: dict[str, Child] = {}
    report: dict[str, Any] = {}
    try:
        if not args.scale:
            warm = warm_embedding_cache(args)
        report = header(args, p, env_start, warm)
        sysrep: dict[str, dict[str, Any]] = report["systems"]
        children = start(systems, p, sysrep)
        if "ours" not in children:
            raise SystemExit(f"our system did not start: {sysrep.get('ours')}")
        load(args, p, children, sysrep)
        if sysrep["ours"].get("units"):
            report["dataset"]["units"] = sysrep["ours"]["units"]
        units = load_units(p.work)
        report["embedding"]["live_sample"] = live_embedding_sample(
            list(qmeta_texts(p.work))[:20], units["text"].tolist()[:64]
        )
        t = Tally(list(children))
        rounds(args, p, children, units, t)
        stats = {s: children[s].call(cmd="stats") for s in t.names if s not in t.failed}
        ours_extras(report, children, p, t)
        for s in t.names:
            assemble(sysrep[s], s, p, t, stats)
        report["ratios"] = ratios(sysrep)
        report["vs_faster_peer"] = vs_faster_peer(report)
        report["environment"]["loadavg_end"] = environment()["loadavg"]
        report["baselines"] = BASELINES.get(p.name, [])
    finally:
        for ch in children.values():
            ch.close()
        if any(not rep.get("ran") for rep in report.get("systems", {}).values()):
            shutil.copytree(p.log_dir, args.out / "peers-logs", dirs_exist_ok=True)
            print(f"child logs: {args.out / 'peers-logs'}", file=sys.stderr)
        shutil.rmtree(p.work, ignore_errors=True)
    return report
