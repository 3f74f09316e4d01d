"""``bench/answers.py --local N``: the local model (``[llm]`` extra) on a fixed REPORT sample.

The sample is ``select(REPORT questions, N)``: round-robin over the REPORT half's articles
(sorted), questions in file order within each, so every article contributes (stratified by
article). Each question is asked in scope and out of scope, as in the main benchmark, by two
fresh servers over the same ingest: one with the local model first in its chain
(``SCDB_ANSWER_PROVIDERS=local``; the extractive synthesizer stays last) and the extractive
default (``SCDB_ANSWER_PROVIDERS=''``), every request with a 300 s budget. Both are scored with
the same metrics; ``answers_local.json`` holds them and ``answers.md`` gets a table
(re-rendered from ``answers.json`` when it exists).

A model answer takes ~30-50 s (1 thread, passages cut to 200 words) to minutes (a loaded
machine), so every answer is appended to ``<out>/answers_local.<run>.jsonl`` as it arrives and
a rerun with the same ``--out`` resumes where the last one stopped (the answers depend only on
the ingested paragraphs, which every server ingests alike).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from bench import answers as A
from bench.answers_metrics import score
from bench.answers_report import markdown, metric_table
from superchargedb.answer.local_llm import DEFAULT_CONTEXT_WORDS

BUDGET_MS = 300_000  # per request
RUNS = (("local", "local"), ("extractive", ""))  # (name, SCDB_ANSWER_PROVIDERS)


def _synth(rec: Any) -> dict[str, Any]:
    return next((s for s in rec.response["trace"]["stages"] if s["stage"] == "synth"), {})


def _model_ran(rec: Any) -> bool:
    """The model was called: it answered (kept, rejected, or refused) or timed out/failed."""
    synth = _synth(rec)
    if synth.get("tokens") or rec.response["answer"]["provider"].startswith("local:"):
        return True
    detail = synth.get("detail") or ""
    return any(f"local:{w}" in detail or w in detail for w in (" rejected", " refused", " failed"))


def _load(
    path: Path, by_key: dict[tuple[str, str], Any], half: str = "report"
) -> dict[tuple[str, str], Any]:
    """Records already answered in an earlier (interrupted) run."""
    done: dict[tuple[str, str], Any] = {}
    if path.exists():
        for line in path.read_text(encoding="utf-8").splitlines():
            d = json.loads(line)
            key = (d["qid"], d["kind"])
            if key in by_key:
                q = by_key[key]
                done[key] = A.Record(q, half, d["kind"], d["response"], d["wall_ms"])
    return done


def run_local(args: argparse.Namespace, ds: Any, split: dict[str, list[str]], command: str) -> int:
    try:
        import gpt4all  # noqa: F401
    except ImportError:
        print("the [llm] extra is not installed: run scripts/install_llm.sh", file=sys.stderr)
        return 2
    half = getattr(args, "local_half", "report")
    sample = A.select(ds.questions, split[half], args.local)
    if args.partial:
        # Only the questions the model has fully answered so far (both requests), in order.
        keys = {(q.qid, kind): q for q in sample for kind in ("in", "oos")}
        have = _load(args.out / "answers_local.local.jsonl", keys, half)
        sample = [q for q in sample if (q.qid, "in") in have and (q.qid, "oos") in have]
        if not sample:
            print("--partial: no question has both answers in the checkpoint yet", file=sys.stderr)
            return 2
    plan = [(q, half, kind) for q in sample for kind in ("in", "oos")]
    by_key = {(q.qid, kind): q for q, _, kind in plan}
    print(
        f"local model: {len(sample)} {half.upper()} questions over {len(split[half])} articles,"
        f" {len(plan)} requests per server",
        file=sys.stderr,
    )
    args.out.mkdir(parents=True, exist_ok=True)
    runs: dict[str, list[Any]] = {}
    ing: dict[str, Any] = {}
    startup: dict[str, float] = {}
    for name, providers in RUNS:
        sink = args.out / f"answers_local.{name}.jsonl"
        done = _load(sink, by_key, half)
        todo = [p for p in plan if (p[0].qid, p[2]) not in done]
        print(
            f"{name}: {len(done)} answers kept from an earlier run, {len(todo)} to ask",
            file=sys.stderr,
        )
        if todo:
            with open(sink, "a", encoding="utf-8") as f:

                def keep(rec: Any, f: Any = f) -> None:
                    row = {
                        "qid": rec.q.qid,
                        "kind": rec.kind,
                        "response": rec.response,
                        "wall_ms": rec.wall_ms,
                    }
                    f.write(json.dumps(row, ensure_ascii=False) + "\n")
                    f.flush()

                env = A.server_env(args.min_score, providers)
                # Without a budget a provider call times out after 60 s; a 1.5B model on a
                # loaded 2-core machine needs more, as the slow test allows.
                fresh, ing, startup[name] = A.run_server(
                    ds, todo, env, None, args.port, False, {"budget": {"max_ms": BUDGET_MS}}, keep
                )
            done.update({(r.q.qid, r.kind): r for r in fresh})
        runs[name] = [done[(q.qid, kind)] for q, _, kind in plan]
    report = summarize(ds, runs, sample, split, command, ing, startup.get("local", 0.0), half)
    if report is None:
        return 3
    report["config"]["partial"] = (
        f"only the first {len(sample)} of the {args.local} sampled questions (the model's"
        " answers so far; the rest was not run)"
        if args.partial
        else None
    )
    (args.out / "answers_local.json").write_text(
        json.dumps(report, indent=2, ensure_ascii=False) + "\n"
    )
    main_json = args.out / "answers.json"
    if main_json.exists():
        (args.out / "answers.md").write_text(markdown(json.loads(main_json.read_text()), report))
    ev = report["evaluations"]
    print(metric_table({"local model": ev["local"], "extractive": ev["extractive"]}))
    print("providers:", report["providers"], "| model ran on", report["model_ran"], "requests")
    print(f"wrote {args.out / 'answers_local.json'}")
    return 0


def summarize(
    ds: Any,
    runs: dict[str, list[Any]],
    sample: list[Any],
    split: dict[str, list[str]],
    command: str,
    ing: dict[str, Any],
    startup_s: float,
    half: str = "report",
) -> dict[str, Any] | None:
    """The report of both runs (None, with a message, when the model never ran)."""
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
        return None
    models = Counter(p for p in providers if p.startswith("local:"))
    totals = [float(r.response["trace"]["total_ms"]) for r in ran]
    drops = [len(r.response["answer"].get("dropped") or []) for r in local]
    # What happened to the model's output: the synth detail's notes ("local:<m> rejected: ...").
    failures = Counter(
        next(
            (w for w in ("rejected", "failed", "refused", "skipped", "quoted") if w in note),
            "other",
        )
        for r in ran
        for s in r.response["trace"]["stages"]
        if s["stage"] == "synth"
        for note in (s.get("detail") or "").split("; ")[2:]
    )
    evaluations = {
        name: score(ds, [(r, A.as_served(r)) for r in recs])[0] for name, recs in runs.items()
    }
    return {
        "benchmark": "xquad-answers-local",
        "generated_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": command,
        "config": {
            "questions": len(sample),
            "articles": len(split[half]),
            "sample": f"{half.upper()} half; round-robin over its articles (sorted), file order"
            " within each",
            "qids": [q.qid for q in sample],
            "requests_per_server": 2 * len(sample),
            "top_k": A.TOP_K,
            "budget_ms": BUDGET_MS,
            # Passage words the model read per request (answer/context.py); 0 = whole passages.
            "context_words": int(os.environ.get("SCDB_LOCAL_CONTEXT_WORDS", DEFAULT_CONTEXT_WORDS)),
        },
        "model": ", ".join(models) or "local",
        "environment": A.environment(startup_s),
        "ingest": ing,
        "evaluations": evaluations,
        "providers": dict(providers.most_common()),
        "model_ran": len(ran),
        "synth_notes": dict(failures.most_common()),
        "dropped_sentences": sum(drops),
        "answers_with_drops": sum(1 for d in drops if d),
        "latency_ms": {
            "p50": round(float(np.percentile(totals, 50)), 1),
            "p95": round(float(np.percentile(totals, 95)), 1),
            "n": len(totals),
        },
    }
