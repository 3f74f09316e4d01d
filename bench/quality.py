"""Retrieval quality of our Service on any BEIR-layout folder: BM25, dense and hybrid RRF.

Runs in-process through the real ingest and search path (``Service.ingest`` / ``Service.search``
as ``alice``, a fresh data dir, result cache off) and scores nDCG@10, Recall@100 and MRR@10 over
*documents* (chunk hits aggregated by best rank, D-70), with the published baselines
of the eval folder's README.md beside ours. "hybrid + rerank" is reported as not run: no real
reranker is configured offline, and the search trace says so.

Embeddings are computed once per text with the default model (MiniLM-L6 int8, 256 tokens) and
cached under ``bench/results/cache/<dataset>.npz``; the Service is given a caching embedder, so a
second run of the same dataset ingests without re-embedding. The vectors are the model's, so the
scores are the same as with live embedding. ``bench.peers`` reuses the cache (bench/common/).

    .venv/bin/python -m bench.quality --dataset "$SCDB_EVAL_DIR/classic-adi"
    .venv/bin/python -m bench.quality --limit-docs 1000 --limit-queries 100   # scifact

Writes ``<out>/quality.json`` and ``<out>/quality.md``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.common import evaldir
from bench.common.baselines import BASELINES
from bench.common.data import BASE_SCOPE, load_dataset, select
from bench.common.embedcache import embed_queries, make_caching_embedder, open_cache
from bench.common.env import environment
from bench.common.evaldir import shown
from bench.common.paths import CACHE_DIR, RESULTS
from bench.common.progress import bar
from bench.common.report import command, write_report
from bench.common.service import BATCH, QUALITY_TOP_K, ingest_docs, make_service, stage_ms
from bench.common.stats import pct, score

MODES = ("lexical", "dense", "hybrid")


def warm_cache(
    dataset: Path, split: str, docs: Sequence[str], cache_dir: Path = CACHE_DIR
) -> dict[str, Any]:
    """Embed (once) every text the Service embeds when ingesting ``docs``; fast when cached.

    Runs a throwaway ingest into a temp dir with the caching embedder, so that a measured run
    afterwards finds every vector in the cache (no model in its process, no embedding time).
    """
    corpus, _, _ = load_dataset(dataset, split)
    cache = open_cache(dataset.resolve().name, cache_dir)
    emb = make_caching_embedder(cache)
    tmp = Path(tempfile.mkdtemp(prefix="scdb-bench-warm-"))
    try:
        svc, alice = make_service(tmp / "data", emb)
        try:
            ing = ingest_docs(svc, alice, corpus, docs)
        finally:
            svc.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    cache.save()
    return {"units": ing["units"], "embedded_live": emb.misses, "live_s": round(emb.live_s, 2)}


def run(args: argparse.Namespace) -> dict[str, Any]:
    from superchargedb.evaluation import aggregate_docs

    name = args.dataset.resolve().name
    corpus, queries, qrels = load_dataset(args.dataset, args.split)
    docs, qids = select(corpus, queries, qrels, args.limit_docs, args.limit_queries)
    if not qids:
        raise SystemExit("no query has all its relevant documents ingested; raise --limit-docs")
    print(f"{name}: {len(docs)} docs to ingest, {len(qids)} queries", file=sys.stderr)
    cache = open_cache(name, args.cache_dir)
    emb = make_caching_embedder(cache)
    qvecs, q_live = embed_queries(cache, [queries[q] for q in qids])
    del qvecs  # the Service embeds queries itself (served from the same cache)
    tmp = Path(tempfile.mkdtemp(prefix="scdb-bench-quality-"))
    try:
        svc, alice = make_service(tmp / "data", emb)
        try:
            with bar(total=len(docs), desc="ingest", unit="doc") as b:
                ing = ingest_docs(svc, alice, corpus, docs, b.update)
            cache.save()
            modes: dict[str, Any] = {}
            for mode in MODES:
                rankings: dict[str, list[str]] = {}
                wall: list[float] = []
                embed_ms: list[float] = []
                for qid in bar(qids, desc=f"search {mode}", unit="q"):
                    body = {"q": queries[qid], "top_k": QUALITY_TOP_K, "mode": mode}
                    t0 = time.perf_counter()
                    out = svc.search(alice, body, query_scope=BASE_SCOPE)
                    wall.append((time.perf_counter() - t0) * 1000)
                    assert out["trace"]["cache"] == "miss"
                    embed_ms.append(stage_ms(out["trace"], "embed"))
                    rankings[qid] = aggregate_docs(out["hits"])
                modes[mode] = {
                    **score(rankings, qrels),
                    "queries": len(qids),
                    "latency_ms": {
                        "in_process": pct(wall),
                        "excluding_embed": pct(
                            [w - e for w, e in zip(wall, embed_ms, strict=True)]
                        ),
                    },
                }
            probe = svc.search(
                alice, {"q": queries[qids[0]], "top_k": 10, "rerank": True}, query_scope=BASE_SCOPE
            )
            rr = [s for s in probe["trace"]["stages"] if s.get("stage") == "rerank"]
            rerank_reason = (rr[0].get("skipped") if rr else None) or "no rerank stage in trace"
            ingest_live = emb.live_s
        finally:
            svc.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    cache.save()
    base = BASELINES.get(name, [])
    return {
        "benchmark": "quality",
        "generated_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": command("quality", args.argv),
        "dataset": {
            "name": name,
            "path": shown(args.dataset),
            "split": args.split,
            "docs": len(docs),
            "units": ing["units"],
            "queries_scored": len(qids),
            "limited": args.limit_docs is not None or args.limit_queries is not None,
        },
        "config": {
            "unit_text": 'title + "\\n" + text',
            "top_k": QUALITY_TOP_K,
            "batch_docs": BATCH,
            "scope": BASE_SCOPE,
            "embedder": cache.model_id,
            "embedding": "cached per text (same model; misses embedded live)",
        },
        "environment": environment(),
        "ingest": {
            "seconds": round(ing["seconds"], 3),
            "live_embedding_s": round(ingest_live, 3),
            "docs_per_s_excluding_embedding": round(
                ing["docs"] / max(ing["seconds"] - ingest_live, 1e-9), 2
            ),
        },
        "query_embedding_live_ms": pct(q_live),
        "modes": modes,
        "hybrid+rerank": {"ran": False, "reason": rerank_reason},
        "baselines": base,
    }


def fmt(v: float | None, nd: int = 3) -> str:
    return "—" if v is None else f"{v:.{nd}f}"


def markdown(r: dict[str, Any]) -> str:
    ds = r["dataset"]
    lines = [
        f"# Retrieval quality: {ds['name']}",
        "",
        f"Generated {r['generated_at']} by `{r['command']}` (commit"
        f" `{r['environment']['git_commit']}`, {r['environment']['cpus']} CPUs, load average"
        f" {r['environment']['loadavg']}).",
        "",
        f"- {ds['docs']} documents ({ds['units']} stored Units), {ds['queries_scored']} queries"
        f" of split `{ds['split']}`"
        + (" (**limited run: not comparable to published numbers**)" if ds["limited"] else "")
        + ".",
        f"- In-process `Service.search`, `top_k={r['config']['top_k']}`, chunk hits aggregated"
        " to documents by best rank. Hybrid is RRF (k=60) of the dense and BM25 legs.",
        f"- Embedder `{r['config']['embedder']}`; vectors cached per text.",
        "",
        "| mode | nDCG@10 | Recall@100 | MRR@10 | p50 / p95 ms (in-process) |",
        "|---|---|---|---|---|",
    ]
    for mode in MODES:
        m = r["modes"][mode]
        lat = m["latency_ms"]["in_process"]
        lines.append(
            f"| {mode} | {fmt(m['ndcg@10'])} | {fmt(m['recall@100'])} | {fmt(m['mrr@10'])}"
            f" | {fmt(lat['p50'], 1)} / {fmt(lat['p95'], 1)} |"
        )
    lines.append(f"| hybrid + rerank | not run: {r['hybrid+rerank']['reason']} | | | |")
    lines += ["", "## Published baselines", ""]
    if not r["baselines"]:
        lines.append(f"No published baseline for `{ds['name']}` in the eval folder's README.md.")
    else:
        lines += [
            "| system | nDCG@10 | Recall@100 | ours (same leg) nDCG@10 / Recall@100 | source |",
            "|---|---|---|---|---|",
        ]
        for b in r["baselines"]:
            ours = r["modes"].get(b["compare_to"])
            cell = (
                f"{b['compare_to']}: {fmt(ours['ndcg@10'])} / {fmt(ours['recall@100'])}"
                if ours
                else f"{b['compare_to']}: not run"
            )
            lines.append(
                f"| {b['system']} | {fmt(b['ndcg@10'])} | {fmt(b['recall@100'])} | {cell}"
                f" | {b['source']} |"
            )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--dataset", type=Path, help="a BEIR folder (default: scifact/ of --eval-dir)")
    evaldir.add_argument(ap)
    ap.add_argument("--split", default="test")
    ap.add_argument("--limit-docs", type=int)
    ap.add_argument("--limit-queries", type=int)
    ap.add_argument("--out", type=Path, default=RESULTS)
    ap.add_argument("--cache-dir", type=Path, default=CACHE_DIR)
    ap.add_argument(
        "--warm-cache-only",
        action="store_true",
        help="only fill the embedding cache for the selected documents (used by bench.peers)",
    )
    args = ap.parse_args(argv)
    args.argv = argv if argv is not None else sys.argv[1:]
    args.dataset = evaldir.dataset_arg(args, "scifact")
    if args.warm_cache_only:
        corpus, queries, qrels = load_dataset(args.dataset, args.split)
        docs, _ = select(corpus, queries, qrels, args.limit_docs, args.limit_queries)
        print(json.dumps(warm_cache(args.dataset, args.split, docs, args.cache_dir)))
        return 0
    report = run(args)
    md = markdown(report)
    write_report(args.out, "quality", report, md)
    print(md)
    print(f"wrote {args.out / 'quality.json'} and {args.out / 'quality.md'}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
