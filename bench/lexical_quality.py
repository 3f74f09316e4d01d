"""Lexical leg quality and equality: the derived sparse index against FTS5 on a BEIR dataset.

Ingests the dataset through the real ingest path (``Service.ingest``: same Units, same chunking
with the model's tokenizer and the title context of later chunks) and scores the *lexical* leg
only, first with ``SCDB_LEXICAL_BACKEND=fts5``, then, on the same data dir restarted with
``sparse`` (which rebuilds the derived index from the catalog), with the derived index. Reports
nDCG@10 / Recall@100 / MRR@10 for both and how many queries got the identical ranking.

The lexical leg never reads vectors, so the Units are stored with placeholder vectors from a
tokenizer-only embedder (named ``lexical-only-placeholder``): embedding SciFact's 10k chunks on
2 loaded cores would take hours and change nothing here. Dense and hybrid quality are
bench/quality.py's job.

    .venv/bin/python -m bench.lexical_quality    # scifact of $SCDB_EVAL_DIR

Writes ``<out>/lexical_quality.json`` and ``.md``.
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from bench.common import evaldir
from bench.common.data import BASE_SCOPE, load_dataset, select
from bench.common.env import environment
from bench.common.paths import RESULTS
from bench.common.report import command, write_report
from bench.common.service import QUALITY_TOP_K, ingest_docs, make_service
from bench.common.stats import pct, score

BACKENDS = ("fts5", "sparse")


def placeholder_embedder() -> Any:
    """The bundled tokenizer (chunking is exactly the real one) with hashed unit vectors."""
    from superchargedb.models.embedder import BUNDLED_TOKENIZER, _Base

    class LexicalOnlyEmbedder(_Base):
        model_id = "lexical-only-placeholder@256"
        dim = 384
        max_tokens = 256

        def __init__(self) -> None:
            super().__init__(BUNDLED_TOKENIZER, 0)

        def embed(self, texts: Sequence[str]) -> np.ndarray:
            out = np.empty((len(texts), self.dim), np.float32)
            for i, t in enumerate(texts):
                seed = int.from_bytes(hashlib.sha256(t.encode("utf-8", "replace")).digest()[:8])
                v = np.random.default_rng(seed).standard_normal(self.dim)
                out[i] = v / np.linalg.norm(v)
            return out

    return LexicalOnlyEmbedder()


def run(args: argparse.Namespace) -> dict[str, Any]:
    from tqdm import tqdm

    from superchargedb.evaluation import aggregate_docs

    name = args.dataset.resolve().name
    corpus, queries, qrels = load_dataset(args.dataset, args.split)
    docs, qids = select(corpus, queries, qrels, args.limit_docs, args.limit_queries)
    tmp = Path(tempfile.mkdtemp(prefix="scdb-lexq-"))
    emb = placeholder_embedder()
    out: dict[str, Any] = {}
    rankings: dict[str, dict[str, list[int]]] = {}
    try:
        for backend in BACKENDS:
            t0 = time.perf_counter()
            svc, alice = make_service(tmp / "data", emb, lexical_backend=backend)
            start_s = time.perf_counter() - t0
            try:
                if backend == BACKENDS[0]:
                    with tqdm(total=len(docs), desc="ingest", unit="doc", file=sys.stderr) as bar:
                        ing = ingest_docs(svc, alice, corpus, docs, bar.update)
                ranked: dict[str, list[str]] = {}
                raw: dict[str, list[int]] = {}
                lat: list[float] = []
                for qid in tqdm(qids, desc=f"lexical {backend}", unit="q", file=sys.stderr):
                    body = {"q": queries[qid], "top_k": QUALITY_TOP_K, "mode": "lexical"}
                    t1 = time.perf_counter()
                    res = svc.search(alice, body, query_scope=BASE_SCOPE)
                    lat.append((time.perf_counter() - t1) * 1000)
                    ranked[qid] = aggregate_docs(res["hits"])
                    raw[qid] = [h["unit_id"] for h in res["hits"]]
                    stage = next(s for s in res["trace"]["stages"] if s["stage"] == "d1_fts")
                rankings[backend] = raw
                out[backend] = {
                    **score(ranked, qrels),
                    "latency_ms": pct(lat),
                    "service_start_s": round(start_s, 2),
                    "trace_detail_last": stage.get("detail"),
                }
            finally:
                svc.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    same = sum(rankings["fts5"][q] == rankings["sparse"][q] for q in qids)
    return {
        "benchmark": "lexical_quality",
        "generated_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": command("lexical_quality", args.argv),
        "dataset": {"name": name, "docs": len(docs), "units": ing["units"], "queries": len(qids)},
        "environment": environment(),
        "backends": out,
        "identical_rankings": same,
        "ndcg_delta": round(out["sparse"]["ndcg@10"] - out["fts5"]["ndcg@10"], 4),
    }


def markdown(r: dict[str, Any]) -> str:
    ds = r["dataset"]
    lines = [
        f"# Lexical leg: derived sparse index vs FTS5 on {ds['name']}",
        "",
        f"Generated {r['generated_at']} by `{r['command']}` (commit "
        f"`{r['environment']['git_commit']}`, load {r['environment']['loadavg']}).",
        "",
        f"{ds['docs']} documents as {ds['units']} Units (real ingest path and chunking), "
        f"{ds['queries']} queries, top_k = {QUALITY_TOP_K}, chunk hits aggregated to documents."
        " The sparse run restarted the same data dir, so its index was rebuilt from the catalog.",
        "",
        "| backend | nDCG@10 | Recall@100 | MRR@10 | p50 / p95 ms (in-process, top_k 1000) |",
        "|---|---|---|---|---|",
    ]
    for b in BACKENDS:
        m = r["backends"][b]
        lines.append(
            f"| {b} | {m['ndcg@10']:.4f} | {m['recall@100']:.4f} | {m['mrr@10']:.4f} |"
            f" {m['latency_ms']['p50']:.1f} / {m['latency_ms']['p95']:.1f} |"
        )
    lines += [
        "",
        f"Identical top-{QUALITY_TOP_K} Unit rankings: {r['identical_rankings']} of "
        f"{ds['queries']} queries; nDCG@10 difference {r['ndcg_delta']:+.4f}.",
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--dataset", type=Path, help="default: scifact/ of --eval-dir")
    evaldir.add_argument(ap)
    ap.add_argument("--split", default="test")
    ap.add_argument("--limit-docs", type=int)
    ap.add_argument("--limit-queries", type=int)
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args(argv)
    args.dataset = evaldir.dataset_arg(args, "scifact")
    args.argv = argv if argv is not None else sys.argv[1:]
    report = run(args)
    args.out.mkdir(parents=True, exist_ok=True)
    md = markdown(report)
    write_report(args.out, "lexical_quality", report, md)
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
