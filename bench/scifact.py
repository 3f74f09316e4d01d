"""SciFact (BEIR test split) retrieval benchmark through the real HTTP API.

Starts ``superchargedb serve --demo`` as a subprocess on a free port over a fresh data dir,
ingests the corpus as ``alice`` (Units are ``title + "\\n" + text``, ``doc_id`` = corpus id, scope
``acme/alpha/scifact``) in batches of 64, then runs the test queries once per mode (lexical, dense,
hybrid) with ``top_k=1000``. Chunk hits are aggregated to documents (best rank) before scoring
nDCG@10, Recall@100 and MRR@10 (D-70). Writes ``<out>/scifact.json`` and
``<out>/scifact.md``.

    .venv/bin/python -m bench.scifact                                   # full run (~10-15 min)
    .venv/bin/python -m bench.scifact --limit-docs 300 --limit-queries 30   # quick smoke

With ``--limit-queries``/``--limit-docs`` the relevant documents of the selected queries are
ingested first, the rest of the budget is filled with other corpus documents in file order, and
only queries whose relevant documents were all ingested are scored.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import secrets
import shutil
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import numpy as np
from tqdm import tqdm

from bench.common import evaldir
from bench.common.data import select
from bench.common.env import git_commit
from bench.common.paths import RESULTS
from bench.common.report import command, write_report
from bench.common.server import Server, free_port
from superchargedb.evaluation import aggregate_docs, load_beir, mrr_at_k, ndcg_at_k, recall_at_k

REPO = Path(__file__).resolve().parent.parent
SCOPE = "acme/alpha/scifact"
KEY = "aegis_sk_alice"
BATCH = 64
TOP_K = 1000
MODES = ("lexical", "dense", "hybrid")

# Published SciFact test-split baselines (the eval folder's README.md): nDCG@10, Recall@100.
BASELINES: list[dict[str, Any]] = [
    {
        "system": "BM25 flat (Lucene, k1=0.9, b=0.4)",
        "compare_to": "lexical",
        "ndcg@10": 0.679,
        "recall@100": 0.9253,
        "source": "Pyserini 2cr/beir.yaml",
    },
    {
        "system": "all-MiniLM-L6-v2 (dense)",
        "compare_to": "dense",
        "ndcg@10": 0.645,
        "recall@100": 0.925,
        "source": "MTEB results",
    },
    {
        "system": "txtai hybrid (BEIR notebook)",
        "compare_to": "hybrid",
        "ndcg@10": 0.713,
        "recall@100": None,
        "source": "neuml/txtai examples/48",
    },
]


# -- server ----------------------------------------------------------------------------------


def server_env() -> dict[str, str]:
    return {
        **os.environ,
        # The audit-chain key must live outside the data dir (D-46).
        "SCDB_AUDIT_KEY": os.environ.get("SCDB_AUDIT_KEY") or secrets.token_hex(32),
        # top_k=1000 so that Recall@100 over *documents* is meaningful after chunk aggregation.
        "SCDB_MAX_TOP_K": str(TOP_K),
        # No query-embedding cache: hybrid would otherwise reuse the dense run's embeddings
        # and report a near-zero embed stage.
        "SCDB_EMBED_CACHE_SIZE": "0",
    }


# -- selection -------------------------------------------------------------------------------


# -- stats -----------------------------------------------------------------------------------


def pct(values: list[float]) -> dict[str, float] | None:
    if not values:
        return None
    a = np.asarray(values, dtype=float)
    return {
        "p50": round(float(np.percentile(a, 50)), 3),
        "p95": round(float(np.percentile(a, 95)), 3),
        "mean": round(float(a.mean()), 3),
        "n": len(values),
    }


# -- phases ----------------------------------------------------------------------------------


def ingest(
    client: httpx.Client, corpus: dict[str, dict[str, str]], docs: list[str]
) -> dict[str, Any]:
    stored = 0
    statuses: dict[str, int] = {}
    chunked_docs = 0
    t0 = time.perf_counter()
    with tqdm(total=len(docs), desc="ingest", unit="doc", file=sys.stderr) as bar:
        for i in range(0, len(docs), BATCH):
            batch = docs[i : i + BATCH]
            units = [
                {
                    "text": corpus[d]["title"] + "\n" + corpus[d]["text"],
                    "doc_id": d,
                    "scope": SCOPE,
                }
                for d in batch
            ]
            r = client.post("/v1/ingest", json={"units": units}, headers={"X-Aegis-Scope": SCOPE})
            if r.status_code != 200:
                raise RuntimeError(f"ingest batch {i // BATCH}: HTTP {r.status_code}: {r.text}")
            body = r.json()
            for d, res in zip(batch, body["results"], strict=True):
                if not res.get("ok"):
                    raise RuntimeError(f"ingest of doc {d} failed: {res.get('error')}")
                statuses[res.get("status", "?")] = statuses.get(res.get("status", "?"), 0) + 1
                n = len(res.get("unit_ids") or []) or 1
                chunked_docs += n > 1
                stored += n
            bar.update(len(batch))
    secs = time.perf_counter() - t0
    return {
        "docs": len(docs),
        "units_stored": stored,
        "chunked_docs": chunked_docs,
        "statuses": statuses,
        "batch_size": BATCH,
        "seconds": round(secs, 3),
        "docs_per_s": round(len(docs) / secs, 3),
        "units_per_s": round(stored / secs, 3),
    }


def stage_ms(trace: dict[str, Any], name: str) -> float | None:
    for s in trace.get("stages", []):
        if s.get("stage") == name and not s.get("skipped"):
            return float(s["ms"])
    return None


def run_mode(
    client: httpx.Client,
    mode: str,
    queries: dict[str, str],
    qids: list[str],
    qrels: dict[str, dict[str, int]],
) -> dict[str, Any]:
    # One warm-up query (not scored, not timed): lazy initialisation is not query latency.
    client.post(
        "/v1/search",
        params={"scope": SCOPE},
        json={"q": f"warm-up query for the {mode} leg", "top_k": 10, "mode": mode},
    ).raise_for_status()
    ndcg, recall, mrr = [], [], []
    wall, server, embed, stages = [], [], [], {}
    n_hits, n_docs, nbytes = [], [], []
    per_query: dict[str, float] = {}
    runs: dict[str, list[list[Any]]] = {}
    for qid in tqdm(qids, desc=f"search {mode}", unit="q", file=sys.stderr):
        body = {"q": queries[qid], "top_k": TOP_K, "mode": mode}
        t0 = time.perf_counter()
        r = client.post("/v1/search", params={"scope": SCOPE}, json=body)
        ms = (time.perf_counter() - t0) * 1000
        if r.status_code != 200:
            raise RuntimeError(f"search {mode} q={qid}: HTTP {r.status_code}: {r.text}")
        out = r.json()
        trace = out["trace"]
        # Every query text is distinct, so every request must miss the result cache; a hit would
        # make the latency meaningless.
        assert trace["cache"] == "miss", f"q={qid} {mode}: result cache {trace['cache']!r}"
        ranked = aggregate_docs(out["hits"])
        q_ndcg = ndcg_at_k(ranked, qrels[qid], 10)
        ndcg.append(q_ndcg)
        recall.append(recall_at_k(ranked, qrels[qid], 100))
        mrr.append(mrr_at_k(ranked, qrels[qid], 10))
        per_query[qid] = round(q_ndcg, 6)
        runs[qid] = [[h["doc_id"], h["ranks"]["dense"], h["ranks"]["lexical"]] for h in out["hits"]]
        wall.append(ms)
        server.append(float(trace["total_ms"]))
        e = stage_ms(trace, "embed")
        if e is not None:
            embed.append(e)
        for s in trace["stages"]:
            if not s.get("skipped"):
                stages.setdefault(s["stage"], []).append(float(s["ms"]))
        n_hits.append(len(out["hits"]))
        n_docs.append(len(ranked))
        nbytes.append(len(r.content))
    metrics = {
        "ndcg@10": statistics.fmean(ndcg),
        "recall@100": statistics.fmean(recall),
        "mrr@10": statistics.fmean(mrr),
    }
    for k, v in metrics.items():
        if math.isnan(v):
            raise RuntimeError(f"{mode}: {k} is NaN")
    return {
        **{k: round(v, 4) for k, v in metrics.items()},
        "queries": len(qids),
        "latency_ms": {
            "client_wall": pct(wall),
            "server_total": pct(server),
            "embed": pct(embed),
            "stages": {k: pct(v) for k, v in stages.items()},
        },
        "hits_per_query_mean": round(statistics.fmean(n_hits), 1),
        "docs_per_query_mean": round(statistics.fmean(n_docs), 1),
        "response_kb_mean": round(statistics.fmean(nbytes) / 1024, 1),
        "per_query_ndcg@10": per_query,
        "_runs": runs,
    }


# -- report ----------------------------------------------------------------------------------


def fmt(v: float | None, nd: int = 3) -> str:
    return "—" if v is None else f"{v:.{nd}f}"


def table(report: dict[str, Any]) -> str:
    head = (
        "| mode | nDCG@10 | Recall@100 | MRR@10 | client p50 / p95 ms | server p50 / p95 ms"
        " | embed p50 / p95 ms | published nDCG@10 |\n|---|---|---|---|---|---|---|---|\n"
    )
    rows = []
    pub = {b["compare_to"]: b for b in BASELINES}
    for mode in MODES:
        m = report["modes"][mode]
        lat = m["latency_ms"]
        e = lat["embed"]
        b = pub.get(mode)
        rows.append(
            f"| {mode} | {fmt(m['ndcg@10'])} | {fmt(m['recall@100'])} | {fmt(m['mrr@10'])}"
            f" | {fmt(lat['client_wall']['p50'], 1)} / {fmt(lat['client_wall']['p95'], 1)}"
            f" | {fmt(lat['server_total']['p50'], 1)} / {fmt(lat['server_total']['p95'], 1)}"
            f" | {fmt(e and e['p50'], 1)} / {fmt(e and e['p95'], 1)}"
            f" | {fmt(b['ndcg@10']) + ' (' + b['system'] + ')' if b else '—'} |"
        )
    return head + "\n".join(rows) + "\n"


def markdown(report: dict[str, Any]) -> str:
    ing = report["ingest"]
    cfg = report["config"]
    lines = [
        "# SciFact retrieval benchmark",
        "",
        f"Generated {report['generated_at']} by `{report['command']}`"
        f" (commit `{report['environment']['git_commit']}`,"
        f" {report['environment']['cpus']} CPUs, Python {report['environment']['python']}).",
        "",
        f"- Data: BEIR SciFact, split `{cfg['split']}`; {ing['docs']} documents ingested,"
        f" {report['queries_scored']} queries scored"
        + (" (**limited run: not comparable to the published numbers**)" if cfg["limited"] else "")
        + ".",
        '- Units are `title + "\\n" + text`, `doc_id` = corpus id, scope'
        f" `{SCOPE}`, ingested over `POST /v1/ingest` in batches of {BATCH}.",
        f"- Search: `POST /v1/search`, `top_k={TOP_K}`; chunk hits aggregated to documents by"
        " best rank before scoring. Hybrid is RRF (k=60) of the dense and lexical legs.",
        "- Latency: one query at a time on a warm server; client wall includes the JSON of"
        f" {TOP_K} hits (mean response {report['modes']['hybrid']['response_kb_mean']} KiB for"
        " hybrid). The query-embedding cache is disabled, and every query misses the result cache.",
        "",
        "## Retrieval quality and latency",
        "",
        table(report),
        "## Ingest",
        "",
        f"{ing['docs']} docs -> {ing['units_stored']} stored Units ({ing['chunked_docs']} docs"
        f" chunked) in {ing['seconds']:.1f} s: **{ing['docs_per_s']:.2f} docs/s,"
        f" {ing['units_per_s']:.2f} Units/s**.",
        "",
        "## Published baselines (SciFact test)",
        "",
        "| system | nDCG@10 | Recall@100 | ours (same leg) nDCG@10 / Recall@100 | source |",
        "|---|---|---|---|---|",
    ]
    for b in BASELINES:
        ours = report["modes"][b["compare_to"]]
        lines.append(
            f"| {b['system']} | {fmt(b['ndcg@10'])} | {fmt(b['recall@100'])}"
            f" | {b['compare_to']}: {fmt(ours['ndcg@10'])} / {fmt(ours['recall@100'])}"
            f" | {b['source']} |"
        )
    lines += ["", "## Per-stage server latency (p50 / p95 ms)", ""]
    lines += ["| mode | " + " | ".join(report["stage_names"]) + " |"]
    lines += ["|---|" + "---|" * len(report["stage_names"])]
    for mode in MODES:
        st = report["modes"][mode]["latency_ms"]["stages"]
        cells = [
            f"{fmt(st[s]['p50'], 1)} / {fmt(st[s]['p95'], 1)}" if s in st else "—"
            for s in report["stage_names"]
        ]
        lines.append(f"| {mode} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data-dir", type=Path, help="data dir (must be empty; default: a temp dir)")
    ap.add_argument("--limit-docs", type=int, help="ingest at most N documents")
    ap.add_argument("--limit-queries", type=int, help="score at most N test queries")
    ap.add_argument("--port", type=int, help="server port (default: a free one)")
    ap.add_argument("--out", type=Path, default=RESULTS)
    ap.add_argument(
        "--save-runs",
        type=Path,
        help="also write every query's chunk hits as [doc_id, dense rank, lexical rank] (large)",
    )
    ap.add_argument("--dataset", type=Path, help=argparse.SUPPRESS)
    evaldir.add_argument(ap)
    args = ap.parse_args(argv)
    args.dataset = evaldir.dataset_arg(args, "scifact")

    corpus, queries, qrels = load_beir(args.dataset, "test")
    # Without a query limit the file order decides; with one, its relevant docs come first so
    # a smoke run scores them.
    docs, qids = select(
        corpus,
        queries,
        qrels,
        args.limit_docs,
        args.limit_queries,
        relevant_first=args.limit_queries is not None,
    )
    if not qids:
        print(
            "no query has all its relevant documents ingested; raise --limit-docs", file=sys.stderr
        )
        return 2
    print(f"{len(docs)} docs to ingest, {len(qids)} queries to score", file=sys.stderr)

    own_dir = args.data_dir is None
    if own_dir:
        data_dir = Path(tempfile.mkdtemp(prefix="scdb-bench-scifact-"))
    else:
        data_dir = args.data_dir
        data_dir.mkdir(parents=True, exist_ok=True)
        if any(data_dir.iterdir()):
            print(
                f"--data-dir {data_dir} is not empty; the benchmark needs a fresh one",
                file=sys.stderr,
            )
            return 2
    log_dir = Path(tempfile.mkdtemp(prefix="scdb-bench-log-"))
    server = Server(data_dir, args.port or free_port(), log_dir / "server.log", server_env())
    report: dict[str, Any] = {}
    try:
        t0 = time.perf_counter()
        server.start()
        startup_s = time.perf_counter() - t0
        print(
            f"server ready on {server.url} in {startup_s:.1f}s (data: {data_dir})", file=sys.stderr
        )
        headers = {"Authorization": f"Bearer {KEY}"}
        with httpx.Client(base_url=server.url, headers=headers, timeout=600.0) as client:
            ing = ingest(client, corpus, docs)
            modes = {m: run_mode(client, m, queries, qids, qrels) for m in MODES}
        runs = {m: modes[m].pop("_runs") for m in MODES}
        if args.save_runs is not None:
            args.save_runs.parent.mkdir(parents=True, exist_ok=True)
            args.save_runs.write_text(json.dumps(runs))
        stage_names: list[str] = []
        for m in modes.values():
            for s in m["latency_ms"]["stages"]:
                if s not in stage_names:
                    stage_names.append(s)
        report = {
            "benchmark": "scifact",
            "generated_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "command": command("scifact", argv if argv is not None else sys.argv[1:]),
            "config": {
                "split": "test",
                "scope": SCOPE,
                "unit_text": 'title + "\\n" + text',
                "batch_size": BATCH,
                "top_k": TOP_K,
                "limited": args.limit_docs is not None or args.limit_queries is not None,
                "limit_docs": args.limit_docs,
                "limit_queries": args.limit_queries,
                "server_env": {
                    k: v
                    for k, v in server.env.items()
                    if k.startswith("SCDB_") and k != "SCDB_AUDIT_KEY"
                },
            },
            "environment": {
                "git_commit": git_commit(),
                "python": platform.python_version(),
                "platform": platform.platform(),
                "cpus": os.cpu_count(),
                "server_startup_s": round(startup_s, 2),
            },
            "ingest": ing,
            "queries_scored": len(qids),
            "modes": modes,
            "stage_names": stage_names,
            "baselines": BASELINES,
        }
    except BaseException:
        print(f"server log tail:\n{server.log_tail()}", file=sys.stderr)
        raise
    finally:
        server.stop()
        shutil.rmtree(log_dir, ignore_errors=True)
        if own_dir:
            shutil.rmtree(data_dir, ignore_errors=True)

    args.out.mkdir(parents=True, exist_ok=True)
    md = markdown(report)
    write_report(args.out, "scifact", report, md)
    print()
    print(table(report))
    ing = report["ingest"]
    print(
        f"ingest: {ing['docs']} docs -> {ing['units_stored']} Units in {ing['seconds']:.1f}s"
        f" ({ing['docs_per_s']:.2f} docs/s, {ing['units_per_s']:.2f} Units/s)"
    )
    print(f"wrote {args.out / 'scifact.json'} and {args.out / 'scifact.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
