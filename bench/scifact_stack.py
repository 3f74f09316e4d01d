"""SciFact through the HTTP API on the server stack and on the embedded default, in one run.

The same corpus, queries and model on both: ``serve --demo`` over a fresh data dir (embedded),
then ``serve --demo`` with PostgreSQL + pgvector, SeaweedFS (S3) and Valkey started here on
loopback ports (``stack.up.start_engines``; stopped at the end, SeaweedFS killed). Each ingests the
corpus over ``POST /v1/ingest`` and answers the test queries in lexical, dense and hybrid mode
(bench/scifact.py's phases: top_k 1000, chunk hits aggregated to documents). The stack must score
within 0.005 nDCG@10 of the embedded backend in every mode; per-query nDCG@10 differences are
counted so a tie broken the other way is told from a ranking that differs.

    .venv/bin/python -m bench.scifact_stack                         # full (~1 h here)
    .venv/bin/python -m bench.scifact_stack --limit-docs 300 --limit-queries 30   # smoke

Writes ``<out>/scifact_stack.json`` and ``<out>/scifact_stack.md``.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

from bench import scifact as SF
from bench.common import evaldir, progress
from bench.common.data import select
from bench.common.env import environment
from bench.common.paths import RESULTS
from bench.common.report import command, write_report
from bench.common.server import Server, free_port
from superchargedb.evaluation import load_beir

GOAL_NDCG_DIFF = 0.005
BACKENDS = ("embedded", "stack")


@contextmanager
def engines(root: Path, backend: str) -> Iterator[dict[str, str]]:
    """The settings that select ``backend``: none, or a stack's engines started under ``root``."""
    if backend == "embedded":
        yield {}
        return
    from superchargedb.stack import up

    state = up.StackState(str(root), "", 0, datetime.now(UTC).isoformat(timespec="seconds"))
    try:
        up.start_engines(state, echo=progress.write)
        yield dict(state.env)
    finally:
        up.down(root, echo=progress.write)


def one_backend(
    backend: str, root: Path, corpus: Any, queries: Any, qrels: Any, docs: list[str],
    qids: list[str], modes: tuple[str, ...], embed_threads: int,
) -> dict[str, Any]:  # fmt: skip
    data = root / f"{backend}-data"
    with engines(root, backend) as extra:
        env = {
            **SF.server_env(),
            "SCDB_AUDIT_ANCHOR_FILE": str(root / f"{backend}-anchor.json"),
            "SCDB_JOB_WORKERS": "0",  # nothing to derive: text only
            "SCDB_EMBED_THREADS": str(embed_threads),
            **extra,
        }
        server = Server(data, free_port(), root / f"{backend}.log", env)
        try:
            t0 = time.perf_counter()
            server.start()
            start_s = time.perf_counter() - t0
            progress.write(f"{backend}: server ready in {start_s:.1f} s")
            headers = {"Authorization": f"Bearer {SF.KEY}"}
            with httpx.Client(base_url=server.url, headers=headers, timeout=600.0) as client:
                ing = SF.ingest(client, corpus, docs)
                out = {m: SF.run_mode(client, m, queries, qids, qrels) for m in modes}
        except BaseException:
            progress.write(f"{backend} server log tail:\n{server.log_tail()}")
            raise
        finally:
            server.stop()
    for m in out.values():
        m.pop("_runs")
    return {"server_start_s": round(start_s, 1), "ingest": ing, "modes": out}


def compare(res: dict[str, Any], modes: tuple[str, ...]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for m in modes:
        e, s = res["embedded"]["modes"][m], res["stack"]["modes"][m]
        pe, ps = e["per_query_ndcg@10"], s["per_query_ndcg@10"]
        diffs = [ps[q] - pe[q] for q in pe]
        d = s["ndcg@10"] - e["ndcg@10"]
        out[m] = {
            "ndcg@10_diff": round(d, 4),
            "recall@100_diff": round(s["recall@100"] - e["recall@100"], 4),
            "queries_differing": sum(abs(x) > 1e-9 for x in diffs),
            "largest_query_diff": round(max(diffs, key=abs, default=0.0), 4),
            "met": abs(d) <= GOAL_NDCG_DIFF,
        }
    return out


def markdown(r: dict[str, Any]) -> str:
    env, res, cmp_ = r["environment"], r["backends"], r["comparison"]
    ing = {b: res[b]["ingest"] for b in BACKENDS}
    lines = [
        "# SciFact through the API: the server stack vs the embedded default",
        "",
        f"Generated {r['generated_at']} by `{r['command']}` (commit `{env['git_commit']}`,"
        f" {env['cpus']} CPUs shared with other jobs, load average {env['loadavg']};"
        f" {r['wall_s'] / 60:.1f} min in all).",
        "",
        f"- BEIR SciFact test split: {ing['embedded']['docs']} documents ingested into each"
        f" backend, {r['queries_scored']} queries scored"
        + (" (**a limited run**)" if r["limited"] else "")
        + "; the same model, queries and settings (bench/scifact.py's phases: `POST /v1/ingest`"
        " in batches of 64, `POST /v1/search` top_k 1000, chunk hits aggregated to documents).",
        "- The stack: PostgreSQL 16 + pgvector, SeaweedFS (S3) and Valkey started by the"
        " benchmark on loopback ports, one API process.",
        "",
        "| mode | embedded nDCG@10 | stack nDCG@10 | difference | goal (<= 0.005) |"
        " queries whose nDCG@10 differs | Recall@100 embedded / stack |"
        " client p50 ms embedded / stack |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for m, c in cmp_.items():
        e, s = res["embedded"]["modes"][m], res["stack"]["modes"][m]
        lines.append(
            f"| {m} | {e['ndcg@10']:.4f} | {s['ndcg@10']:.4f} | {c['ndcg@10_diff']:+.4f}"
            f" | {'met' if c['met'] else '**NOT met**'} | {c['queries_differing']}"
            f" (largest {c['largest_query_diff']:+.4f}) | {e['recall@100']:.4f} /"
            f" {s['recall@100']:.4f} | {e['latency_ms']['client_wall']['p50']:.1f} /"
            f" {s['latency_ms']['client_wall']['p50']:.1f} |"
        )
    lines += [
        "",
        "Ingest over the API (Units/s, the server embedding each chunk): "
        + ", ".join(
            f"{b} {ing[b]['units_per_s']:.2f} ({ing[b]['units_stored']} Units in"
            f" {ing[b]['seconds'] / 60:.1f} min)"
            for b in BACKENDS
        )
        + ".",
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--limit-docs", type=int, help="ingest at most N documents")
    ap.add_argument("--limit-queries", type=int, help="score at most N test queries")
    ap.add_argument("--modes", default=",".join(SF.MODES), help="comma-separated search modes")
    ap.add_argument(
        "--embed-threads", type=int, default=1, help="SCDB_EMBED_THREADS of both servers"
    )
    ap.add_argument("--out", type=Path, default=RESULTS)
    ap.add_argument("--dataset", type=Path, help=argparse.SUPPRESS)
    evaldir.add_argument(ap)
    args = ap.parse_args(argv)
    args.dataset = evaldir.dataset_arg(args, "scifact")
    modes = tuple(args.modes.split(","))
    corpus, queries, qrels = load_beir(args.dataset, "test")
    limited = args.limit_docs is not None or args.limit_queries is not None
    docs, qids = select(corpus, queries, qrels, args.limit_docs, args.limit_queries, limited)
    if not qids:
        print("no query has all its relevant documents ingested; raise --limit-docs")
        return 2
    env0, t0 = environment(), time.perf_counter()
    # Not under a 0700 temp dir of its own: PostgreSQL runs as its own user and must get in.
    root = Path(tempfile.mkdtemp(prefix="scdb-scifact-stack-"))
    root.chmod(0o755)
    try:
        res = {
            b: one_backend(b, root, corpus, queries, qrels, docs, qids, modes, args.embed_threads)
            for b in BACKENDS
        }
    finally:
        shutil.rmtree(root, ignore_errors=True)
    report = {
        "benchmark": "scifact_stack",
        "generated_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": command("scifact_stack", argv if argv is not None else sys.argv[1:]),
        "environment": env0,
        "limited": limited,
        "embed_threads": args.embed_threads,
        "queries_scored": len(qids),
        "goal_ndcg@10_diff_max": GOAL_NDCG_DIFF,
        "comparison": compare(res, modes),
        "backends": res,
        "wall_s": round(time.perf_counter() - t0, 1),
    }
    md = markdown(report)
    write_report(args.out, "scifact_stack", report, md)
    print(md)
    return 0 if all(c["met"] for c in report["comparison"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
