"""Tune an answer's supporting facts (``answer/cover.py``) and the chain rule (``answer/gate.py``)
offline, on saved records of both answer benchmarks.

Reads the JSON lines of ``bench/answers_hotpot.py --save-records FILE`` (HotpotQA: every
request's hits) and, optionally, ``bench/answers.py --min-score=-1e9 --save-records FILE``
(XQuAD), re-runs the library's localizer in-process on the saved hits and replays the gate
(``gate.gate``, without hop retrievals: the replay has no search) and the extractive synthesizer
for a grid of ``cover``/``gate`` parameters. Prints, per parameter set, the HotpotQA TUNE half's
answer-contains-gold, every-evidence-cited, citation precision, in-scope refusals, yes/no and
held-out rows, and the XQuAD CALIBRATION half's false refusals, answers containing the gold
answer, citation recall and precision, near misses and out-of-scope refusal. Choose on those
halves; ``--half report`` prints the other halves for the record.

    .venv/bin/python -m bench.answers_cover HOTPOT.jsonl [--xquad XQUAD.jsonl]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.answers_hotpot import load as load_hotpot
from bench.answers_hotpot import norm_has, yes_no
from bench.answers_metrics import contains
from bench.common import evaldir

Spans = list[tuple[str, int, int]]  # (doc_id, start, end) per cited passage


def localized(path: Path, question: Callable[[dict[str, Any]], str]) -> list[dict[str, Any]]:
    import superchargedb  # noqa: F401  (onnxruntime before usearch)
    from superchargedb.answer.localize import Localizer
    from superchargedb.models.embedder import make_embedder
    from superchargedb.settings import Settings

    s = Settings()
    loc = Localizer(make_embedder(s.embedder, max_tokens=s.embed_max_tokens))
    with open(path, encoding="utf-8") as f:
        rows = [json.loads(line) for line in f]
    for r in rows:
        r["evidence"] = loc.localize(question(r), r["hits"][:5])
    return rows


def answer(question: str, evidence: list[Any]) -> tuple[str, Spans] | None:
    """The server's gate and extractive synthesizer on localized evidence, hops off; None for
    a refusal."""
    from superchargedb.answer.answerability import decide
    from superchargedb.answer.extractive import extract
    from superchargedb.answer.gate import gate
    from superchargedb.answer.question import analyze

    info = analyze(question)
    g = gate(info, evidence, decide(evidence), lambda q: [], lambda q, h: [], 0)
    if g.code is not None:
        return None
    draft = g.draft if g.draft is not None else extract(g.best, evidence, info)
    by_n = {e.n: e for e in [*evidence, *g.extra]}
    spans: dict[str, tuple[int, int]] = {}
    for s in draft.sentences:
        for n in s.passages:
            sp = s.spans.get(n, s.span)
            if sp is None:
                continue
            doc = by_n[n].hit["doc_id"]
            lo, hi = spans.get(doc, (sp[0], sp[1]))
            spans[doc] = (min(lo, sp[0]), max(hi, sp[1]))
    return " ".join(s.text for s in draft.sentences), [(d, a, b) for d, (a, b) in spans.items()]


def score_hotpot(rows: list[dict[str, Any]], where: dict[str, Any], half: str) -> dict[str, Any]:
    c: Counter[str] = Counter()
    words: list[int] = []
    for r in rows:
        if r["half"] != half:
            continue
        q = r["q"]
        out = answer(q["question"], r["evidence"])
        if r["kind"] == "held":
            c["held"] += 1
            c["held_refused"] += out is None
            c["held_wrong"] += out is not None and not norm_has(out[0], q["answer"])
            continue
        c["n"] += 1
        yn = q["answer"].lower() in ("yes", "no")
        c["yn"] += yn
        if out is None:
            c["refused"] += 1
            continue
        text, spans = out
        ev = [where[e["doc_id"]] for e in q["evidence"]]

        def inside(e: tuple[str, int, int], sp: tuple[str, int, int]) -> bool:
            return sp[0] == e[0] and sp[1] <= e[1] + 1 and sp[2] >= e[2]

        c["gold"] += norm_has(text, q["answer"])
        c["all"] += all(any(inside(e, sp) for sp in spans) for e in ev)
        c["cites"] += len(spans)
        c["good"] += sum(any(inside(e, sp) for e in ev) for sp in spans)
        c["yn_ok"] += yn and yes_no(text) == q["answer"].lower()
        words.append(len(text.split()))
    n = max(1, c["n"])
    return {
        "gold": round(c["gold"] / n, 3),
        "all_cited": round(c["all"] / n, 3),
        "precision": round(c["good"] / max(1, c["cites"]), 3),
        "refused": round(c["refused"] / n, 3),
        "yes_no": f"{c['yn_ok']}/{c['yn']}",
        "held_refused": round(c["held_refused"] / max(1, c["held"]), 3),
        "held_wrong": round(c["held_wrong"] / max(1, c["held"]), 3),
        "median_words": statistics.median(words) if words else None,
    }


def score_xquad(rows: list[dict[str, Any]], half: str) -> dict[str, Any]:
    c: Counter[str] = Counter()
    near: dict[int, Counter[str]] = defaultdict(Counter)
    words: list[int] = []
    for r in rows:
        if r["half"] != half:
            continue
        k = r["kind"]
        c[f"{k}_n"] += 1
        out = answer(r["question"], r["evidence"])
        if out is None:
            c[f"{k}_refused"] += 1
            if k == "near":
                near[r["offset"]]["ok"] += 1
            continue
        text, spans = out
        good = contains(text, r["gold"])
        if k == "in":
            docs = [d for d, _, _ in spans]
            c["gold"] += good
            c["cited"] += r["gold_doc"] in docs
            c["cites"] += len(docs)
            c["gold_cites"] += docs.count(r["gold_doc"])
            words.append(len(text.split()))
        if k == "near":
            near[r["offset"]]["ok" if good else "wrong"] += 1
    n = max(1, c["in_n"])
    rates = [v["ok"] / max(1, v["ok"] + v["wrong"]) for v in near.values()]
    return {
        "false_refusals": round(c["in_refused"] / n, 3),
        "gold": round(c["gold"] / n, 3),
        "recall": round(c["cited"] / n, 3),
        "precision": round(c["gold_cites"] / max(1, c["cites"]), 3),
        "near_ok_worst": round(min(rates, default=0.0), 3),
        "oos_refused": round(c["oos_refused"] / max(1, c["oos_n"]), 3),
        "median_words": statistics.median(words) if words else None,
    }


GRID: list[dict[str, float | bool]] = [
    {},
    {"BRIDGES": False},
    {"NAMED": False},
    {"NAMED": False, "GAIN_MIN": 0.05},
    {"GAIN_MIN": 0.1},
    {"GAIN_MIN": 0.2},
    {"GAIN_SAME": 0.02},
    {"GAIN_SAME": 0.1},
    {"GAIN_SAME": 0.15},
    {"MAX_FACTS": 2},
    {"MAX_FACTS": 4},
    {"CHAIN_COVERAGE": 9.0},
    {"CHAIN_COVERAGE": 0.6},
    {"CHAIN_FLOOR": -1.0},
]


def apply(params: dict[str, float | bool]) -> dict[str, Any]:
    """Set module constants for one replay; returns the old values."""
    from superchargedb.answer import cover, gate

    old: dict[str, Any] = {}
    for k, v in params.items():
        mod = gate if hasattr(gate, k) and k.startswith("CHAIN") else cover
        old[k] = getattr(mod, k)
        setattr(mod, k, v)
    return old


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("hotpot", type=Path, help="bench/answers_hotpot.py --save-records output")
    ap.add_argument("--xquad", type=Path, help="bench/answers.py --save-records output")
    ap.add_argument("--half", choices=("tune", "report"), default="tune")
    evaldir.add_argument(ap)
    args = ap.parse_args(argv)
    _, where, _ = load_hotpot(evaldir.dataset_arg(args, "hotpotqa-dev-500"))
    hot = localized(args.hotpot, lambda r: r["q"]["question"])
    xq = localized(args.xquad, lambda r: r["question"]) if args.xquad else []
    hhalf = args.half
    xhalf = "calibration" if args.half == "tune" else "report"
    for params in GRID:
        old = apply(params)
        try:
            row: dict[str, Any] = {"params": params, "hotpot": score_hotpot(hot, where, hhalf)}
            if xq:
                row["xquad"] = score_xquad(xq, xhalf)
        finally:
            apply(old)
        print(json.dumps(row))
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
