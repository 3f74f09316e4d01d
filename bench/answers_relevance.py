"""Choose ``RELEVANCE_CUT`` (answer/relevance.py) on the CALIBRATION half, report it on both.

A passage's relevance is its best sentence's localizer score minus the best passage's. A model
sentence's citation below the cut is removed, so the cut must keep gold passages: it is the
highest cut (the most removal) under which at most ``MAX_GOLD_LOSS`` of the CALIBRATION half's
gold passages in the top 5 fall. The REPORT half is shown beside it, never used to choose.

Input: the records of a full extractive run (``bench/answers.py --save-records PATH``), whose
hits are replayed through the library's own Localizer; optionally ``--model-records`` (a local
model run's ``answers_local.local.jsonl``): what the cut would remove from its kept sentences.

    .venv/bin/python -m bench.answers --save-records /tmp/records.jsonl
    .venv/bin/python -m bench.answers_relevance --records /tmp/records.jsonl
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import onnxruntime  # noqa: F401  (before usearch: the platform's import-order trap)
from tqdm import tqdm

from bench.common import evaldir
from bench.common.env import git_commit
from superchargedb.answer.localize import Localizer
from superchargedb.answer.relevance import RELEVANCE_CUT, relevance
from superchargedb.models.embedder import make_embedder

REPO = Path(__file__).resolve().parents[1]

MAX_GOLD_LOSS = 0.005  # citation recall (goal 0.95, local model 0.95) has no room for more
GRID = [round(-0.05 - 0.01 * i, 2) for i in range(56)]  # -0.05 .. -0.60
PASSAGES = 5  # Settings.answer_passages


def corpus_texts(path: Path) -> dict[str, str]:
    with open(path / "corpus.jsonl", encoding="utf-8") as f:
        return {d["_id"]: d["text"] for d in map(json.loads, f)}


def passage_relevance(records: Iterable[dict[str, Any]], loc: Localizer, texts: dict[str, str]):
    """Per half: relevance of gold passages and of the others, over in-scope questions."""
    out: dict[str, dict[str, list[float]]] = {}
    for r in records:
        if r["kind"] != "in":
            continue
        hits = r.get("hits") or [{"doc_id": d, "text": texts[d]} for d in r["hit_docs"]]
        hits = hits[:PASSAGES]
        rel = relevance(loc.localize(r["question"], hits))
        half = out.setdefault(r["half"], {"gold": [], "other": []})
        for n, h in enumerate(hits, start=1):
            if n in rel:
                half["gold" if h["doc_id"] == r["gold_doc"] else "other"].append(rel[n])
    return out


def below(values: list[float], cut: float) -> float:
    return sum(v < cut for v in values) / max(1, len(values))


def choose(cal: dict[str, list[float]]) -> float:
    ok = [c for c in GRID if below(cal["gold"], c) <= MAX_GOLD_LOSS]
    return max(ok)


def model_citations(path: Path, loc: Localizer, gold_doc: dict[str, str], question: dict[str, str]):
    """Kept model sentences' citations: (gold?, relevance) for each."""
    rows = []
    with open(path, encoding="utf-8") as f:
        records = [json.loads(line) for line in f]
    for r in records:
        a = r["response"]["answer"]
        if r["kind"] != "in" or not str(a.get("provider", "")).startswith("local"):
            continue
        hits = r["response"]["hits"][:PASSAGES]
        rel = relevance(loc.localize(question[r["qid"]], hits))
        n_of = {h["unit_id"]: n for n, h in enumerate(hits, start=1)}
        unit_of = {c["index"]: c["unit_id"] for c in a["citations"]}
        for s in a["sentences"]:
            for c in s["citations"]:
                n = n_of[unit_of[c]]
                rows.append((hits[n - 1]["doc_id"] == gold_doc[r["qid"]], rel[n]))
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=Path, required=True, help="bench/answers.py --save-records")
    ap.add_argument("--model-records", type=Path, action="append", default=[])
    ap.add_argument("--out", type=Path, default=REPO / "bench" / "results")
    evaldir.add_argument(ap)
    args = ap.parse_args(argv)
    DATA = evaldir.dataset("xquad-en", args.eval_dir)

    loc = Localizer(make_embedder("minilm-int8"))
    texts = corpus_texts(DATA)
    with open(args.records, encoding="utf-8") as f:
        records = [json.loads(line) for line in f]
    halves = passage_relevance(tqdm(records, desc="localize", unit="q"), loc, texts)
    cut = choose(halves["calibration"])
    grid = [
        {
            "cut": c,
            **{
                f"{h}_{k}_below": round(below(halves[h][k], c), 4)
                for h in ("calibration", "report")
                for k in ("gold", "other")
            },
        }
        for c in GRID
    ]
    with open(DATA / "qa.jsonl", encoding="utf-8") as f:
        qa = [json.loads(line) for line in f]
    gold_doc = {q["id"]: q["passage_id"] for q in qa}
    question = {q["id"]: q["question"] for q in qa}
    models = {}
    for p in args.model_records:
        rows = model_citations(p, loc, gold_doc, question)
        models[str(p.relative_to(REPO) if p.is_relative_to(REPO) else p)] = {
            "citations": len(rows),
            "gold": sum(g for g, _ in rows),
            "removed_gold": sum(g and r < cut for g, r in rows),
            "removed_other": sum((not g) and r < cut for g, r in rows),
        }
    report = {
        "commit": git_commit(),
        "rule": f"highest cut with at most {MAX_GOLD_LOSS:.1%} of CALIBRATION gold passages below",
        "chosen_cut": cut,
        "constant_in_code": RELEVANCE_CUT,
        "passages": {h: {k: len(v) for k, v in d.items()} for h, d in halves.items()},
        "grid": grid,
        "model_citations": models,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "answers_relevance.json").write_text(json.dumps(report, indent=1) + "\n")
    lines = [
        "# Citation relevance cut (answer/relevance.py)",
        "",
        f"Commit `{report['commit']}`. Rule: {report['rule']}. **Chosen: {cut}** "
        f"(constant in code: {RELEVANCE_CUT}). Passages (in top {PASSAGES}): "
        + ", ".join(
            f"{h} {d['gold']} gold / {d['other']} other" for h, d in report["passages"].items()
        ),
        "",
        "| cut | CALIBRATION: gold below | others below | REPORT: gold below | others below |",
        "|---|---|---|---|---|",
    ]
    for g in grid:
        if g["cut"] in (-0.1, -0.15, -0.2, cut, -0.3, -0.35, -0.4, -0.5, -0.6):
            mark = " **(chosen)**" if g["cut"] == cut else ""
            lines.append(
                f"| {g['cut']}{mark} | {g['calibration_gold_below']:.2%} | "
                f"{g['calibration_other_below']:.1%} | {g['report_gold_below']:.2%} | "
                f"{g['report_other_below']:.1%} |"
            )
    if models:
        lines += ["", "Kept local-model citations the cut would remove:", ""]
        lines += [
            "| records | citations | gold | gold removed | non-gold removed |",
            "|---|---|---|---|---|",
        ]
        for k, m in models.items():
            counts = (m["citations"], m["gold"], m["removed_gold"], m["removed_other"])
            lines.append(f"| `{k}` | " + " | ".join(map(str, counts)) + " |")
    (args.out / "answers_relevance.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
