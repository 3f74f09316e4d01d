"""``bench/answers.py --local N``: the local model (``[llm]`` extra) on a fixed REPORT sample.

The sample is ``select(REPORT questions, N)``: round-robin over the REPORT half's articles
(sorted), questions in file order within each, so every article contributes (stratified by
article). Each question is asked in scope and out of scope, as in the main benchmark, by two
fresh servers over the same ingest: one with the local model first in its chain
(``SCDB_ANSWER_PROVIDERS=local``; the extractive synthesizer stays last) and the extractive
default (``SCDB_ANSWER_PROVIDERS=''``), every request with a 300 s budget. Both are scored with
the same metrics; ``answers_local.json`` holds them and ``answers.md`` gets a table
(re-rendered from ``answers.json`` when it exists).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from datetime import UTC, datetime
from typing import Any

import numpy as np

import answers as A
from answers_metrics import score
from answers_report import markdown, metric_table

BUDGET_MS = 300_000  # per request


def _model_ran(rec: Any) -> bool:
    synth = next((s for s in rec.response["trace"]["stages"] if s["stage"] == "synth"), None)
    return bool(synth and synth.get("tokens"))


def run_local(args: argparse.Namespace, ds: Any, split: dict[str, list[str]], command: str) -> int:
    try:
        import gpt4all  # noqa: F401
    except ImportError:
        print("the [llm] extra is not installed: run scripts/install_llm.sh", file=sys.stderr)
        return 2
    sample = A.select(ds.questions, split["report"], args.local)
    plan = [(q, "report", kind) for q in sample for kind in ("in", "oos")]
    print(
        f"local model: {len(sample)} REPORT questions over {len(split['report'])} articles,"
        f" {len(plan)} requests per server",
        file=sys.stderr,
    )
    runs: dict[str, list[Any]] = {}
    startup: dict[str, float] = {}
    for name, providers in (("local", "local"), ("extractive", "")):
        env = A.server_env(args.min_score, providers)
        # Without a budget a provider call times out after 60 s; a 1.5B model on a loaded
        # 2-core machine needs more, as the slow test allows (tests/test_local_llm.py).
        runs[name], ing, startup[name] = A.run_server(
            ds, plan, env, None, args.port, False, {"budget": {"max_ms": BUDGET_MS}}
        )
    local = runs["local"]
    providers = Counter(r.response["answer"]["provider"] for r in local)
    ran = [r for r in local if _model_ran(r)]
    if not ran:
        details = Counter(
            next(
                s.get("detail", "") for s in r.response["trace"]["stages"] if s["stage"] == "synth"
            )
            for r in local
            if not r.response["answer"]["refused"]
        )
        print(
            f"the local model never ran; synth details: {details.most_common(3)}", file=sys.stderr
        )
        return 3
    models = Counter(p for p in providers if p.startswith("local:"))
    totals = [float(r.response["trace"]["total_ms"]) for r in ran]
    drops = [len(r.response["answer"].get("dropped") or []) for r in local]
    evaluations = {}
    for name, recs in runs.items():
        evaluations[name], _ = score(ds, [(r, A.as_served(r)) for r in recs])
    report: dict[str, Any] = {
        "benchmark": "xquad-answers-local",
        "generated_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": command,
        "config": {
            "questions": len(sample),
            "articles": len(split["report"]),
            "sample": "REPORT half; round-robin over its articles (sorted), file order within each",
            "qids": [q.qid for q in sample],
            "requests_per_server": len(plan),
            "top_k": A.TOP_K,
            "budget_ms": BUDGET_MS,
        },
        "model": ", ".join(models) or "local",
        "environment": A.environment(startup["local"]),
        "ingest": ing,
        "evaluations": evaluations,
        "providers": dict(providers.most_common()),
        "model_ran": len(ran),
        "dropped_sentences": sum(drops),
        "answers_with_drops": sum(1 for d in drops if d),
        "latency_ms": {
            "p50": round(float(np.percentile(totals, 50)), 1),
            "p95": round(float(np.percentile(totals, 95)), 1),
            "n": len(totals),
        },
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "answers_local.json").write_text(
        json.dumps(report, indent=2, ensure_ascii=False) + "\n"
    )
    main_json = args.out / "answers.json"
    if main_json.exists():
        (args.out / "answers.md").write_text(markdown(json.loads(main_json.read_text()), report))
    print(
        metric_table({"local model": evaluations["local"], "extractive": evaluations["extractive"]})
    )
    print("providers:", dict(providers), "| model ran on", len(ran), "requests")
    print(f"wrote {args.out / 'answers_local.json'}")
    return 0
