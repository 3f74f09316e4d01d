"""HotpotQA dev-500 multi-hop cited-answer benchmark through the real HTTP API (issue 21).

Starts ``superchargedb serve --demo`` on a free port over a fresh data dir and ingests the
evidence sentences as one Unit per article (``doc_id`` = the article title; text = ``# title``
then the article's sentences in corpus order: a document with its heading, so "It was
established in 1993" stays about its university). Each question is asked over ``POST
/v1/answer`` with ``top_k=5``; the questions whose index (in id order) % 5 == 0 are also asked
with their evidence articles filtered out (``filters.doc_id``: must be refused).

Halves by question id: the first 250 (TUNE) for choosing, the last 250 (REPORT) reported. Per
half: the answer contains the gold answer (SQuAD-normalized), every gold evidence sentence cited
(each lies inside a cited span of its article's Unit), citation precision (citations whose span
holds a gold evidence sentence), yes/no accuracy (the answer opens with the right yes/no), the
held-out questions refused / answered wrongly, median answer length, latency; and the same on
the subset whose answer-bearing sentence (an evidence sentence containing the gold answer) is
not in the question's own top-k hits (the hop had to find it).

    SCDB_EVAL_DIR=... .venv/bin/python -m bench.answers_hotpot [--limit N] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
from tqdm import tqdm

from bench.answers import KEY, SCOPE, server_env
from bench.answers_metrics import squad_normalize
from bench.common import env as benv
from bench.common import evaldir
from bench.common.server import Server, free_port

REPO = Path(__file__).resolve().parent.parent
TOP_K = 5
HELD_OUT_EVERY = 5


def load(root: Path) -> tuple[dict[str, str], dict[str, tuple[str, int, int]], list[dict]]:
    """(article title -> Unit text, sentence id -> (title, start, end), questions by id)."""
    by_title: dict[str, list[tuple[str, str]]] = defaultdict(list)
    with open(root / "corpus.jsonl", encoding="utf-8") as f:
        for line in f:
            d = json.loads(line)
            by_title[d["title"]].append((d["_id"], d["text"]))
    texts: dict[str, str] = {}
    where: dict[str, tuple[str, int, int]] = {}
    for title, sents in by_title.items():
        text = f"# {title}\n\n"
        for sid, s in sents:
            where[sid] = (title, len(text), len(text) + len(s))
            text += s + " "
        texts[title] = text.rstrip()
    with open(root / "qa.jsonl", encoding="utf-8") as f:
        qs = sorted((json.loads(line) for line in f), key=lambda d: d["id"])
    return texts, where, qs


def ingest(c: httpx.Client, texts: dict[str, str]) -> dict[str, str]:
    unit_doc: dict[str, str] = {}
    titles = list(texts)
    for i in tqdm(range(0, len(titles), 64), desc="ingest", file=sys.stderr):
        batch = titles[i : i + 64]
        units = [{"text": texts[t], "doc_id": t, "scope": SCOPE} for t in batch]
        r = c.post("/v1/ingest", json={"units": units}, headers={"X-Aegis-Scope": SCOPE})
        r.raise_for_status()
        for t, res in zip(batch, r.json()["results"], strict=True):
            if not res.get("ok"):
                raise RuntimeError(f"ingest of {t!r} failed: {res.get('error')}")
            for u in res.get("unit_ids") or [res.get("unit_id")]:
                unit_doc[u] = t
    return unit_doc


def norm_has(text: str, gold: str) -> bool:
    g = squad_normalize(gold)
    return bool(g) and g in squad_normalize(text)


def yes_no(text: str) -> str | None:
    first = squad_normalize(text).split()[:1]
    return first[0] if first and first[0] in ("yes", "no") else None


def score(rows: list[dict[str, Any]], where: dict[str, tuple[str, int, int]]) -> dict[str, Any]:
    ins = [r for r in rows if r["kind"] == "in"]
    held = [r for r in rows if r["kind"] == "held"]
    out: dict[str, Any] = {"n": len(ins), "held_out_n": len(held)}
    gold = all_cited = cites = good_cites = refused = yn_n = yn_ok = 0
    sents, words = [], []
    for r in ins:
        a = r["answer"]
        q = r["q"]
        spans = [(r["unit_doc"].get(c["unit_id"]), c.get("locator") or {}) for c in a["citations"]]
        ev = [where[e["doc_id"]] for e in q["evidence"]]

        def inside(e: tuple[str, int, int], sp: tuple[str | None, dict[str, Any]]) -> bool:
            t, loc = sp
            return t == e[0] and loc.get("start", 1e9) <= e[1] + 1 and loc.get("end", -1) >= e[2]

        if a["refused"]:
            refused += 1
        else:
            sents.append(len(a["sentences"]))
            words.append(len(" ".join(s["text"] for s in a["sentences"]).split()))
        gold += (not a["refused"]) and norm_has(a["text"], q["answer"])
        all_cited += (not a["refused"]) and all(any(inside(e, sp) for sp in spans) for e in ev)
        cites += len(spans)
        good_cites += sum(any(inside(e, sp) for e in ev) for sp in spans)
        if q["answer"].lower() in ("yes", "no"):
            yn_n += 1
            yn_ok += yes_no(a["text"]) == q["answer"].lower()
    n = max(1, len(ins))
    out.update(
        answer_contains_gold=round(gold / n, 4),
        all_evidence_cited=round(all_cited / n, 4),
        citation_precision=round(good_cites / cites, 4) if cites else None,
        refused_in_scope=round(refused / n, 4),
        yes_no_n=yn_n,
        yes_no_accuracy=round(yn_ok / yn_n, 4) if yn_n else None,
        median_sentences=statistics.median(sents) if sents else None,
        median_words=statistics.median(words) if words else None,
    )
    if held:
        ok_ref = sum(r["answer"]["refused"] for r in held)
        wrong = sum(
            not r["answer"]["refused"] and not norm_has(r["answer"]["text"], r["q"]["answer"])
            for r in held
        )
        out.update(held_out_refused=round(ok_ref / len(held), 4))
        out.update(held_out_wrong=round(wrong / len(held), 4))
    return out


TARGETS = {  # issue 21 (the held-out rows: refused >= 0.90, wrong <= 5 %)
    "answer_contains_gold": (">=", 0.70),
    "all_evidence_cited": (">=", 0.75),
    "citation_precision": (">=", 0.95),
    "yes_no_accuracy": (">=", 0.80),
    "held_out_refused": (">=", 0.90),
    "held_out_wrong": ("<=", 0.05),
    "median_sentences": ("<=", 3),
    "median_words": ("<=", 80),
}


def markdown(report: dict[str, Any]) -> str:
    halves = report["halves"]
    out = [
        "# HotpotQA dev-500 multi-hop cited answers",
        "",
        f"Generated {report['generated_at']} by `{report['command']}` (commit"
        f" `{report['git_commit']}`, {report['cpus']} CPUs, load {report['load_avg_1min']}),"
        f" extractive synthesizer, `top_k={report['top_k']}`. TUNE = the first 250 questions by"
        " id (everything was chosen there), REPORT = the last 250. *hop needed*: the questions"
        " whose answer-bearing evidence sentence is not in their own top-k hits.",
        "",
        "| metric | " + " | ".join(f"{h} all | {h} hop needed" for h in halves) + " | target |",
        "|---|" + "---|---|" * len(halves) + "---|",
    ]
    keys = ["n", "held_out_n", *TARGETS, "refused_in_scope", "yes_no_n"]
    for k in dict.fromkeys(keys):
        cells = []
        for v in halves.values():
            for part in ("all", "hop_needed"):
                x = v[part].get(k)
                cells.append("—" if x is None else f"{x:g}" if isinstance(x, float) else str(x))
        t = TARGETS.get(k)
        mark = f"{t[0]} {t[1]:g}" if t else ""
        out.append(f"| {k} | " + " | ".join(cells) + f" | {mark} |")
    out += ["", "| half | latency p50 (ms) | p95 (ms) |", "|---|---|---|"]
    for h, v in halves.items():
        out.append(f"| {h} | {v['latency_ms']['p50']} | {v['latency_ms']['p95']} |")
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--limit", type=int, help="the first N questions of each half")
    ap.add_argument("--out", type=Path, default=REPO / "bench" / "results")
    ap.add_argument("--save-records", type=Path)
    evaldir.add_argument(ap)
    args = ap.parse_args(argv)
    root = evaldir.dataset_arg(args, "hotpotqa-dev-500")
    texts, where, qs = load(root)
    halves = {"tune": qs[: len(qs) // 2], "report": qs[len(qs) // 2 :]}
    if args.limit:
        halves = {h: v[: args.limit] for h, v in halves.items()}
    index = {q["id"]: i for i, q in enumerate(qs)}
    env = server_env(None)
    data_dir = Path(tempfile.mkdtemp(prefix="scdb-bench-hotpot-"))
    log_dir = Path(tempfile.mkdtemp(prefix="scdb-bench-log-"))
    server = Server(data_dir, free_port(), log_dir / "server.log", env)
    rows: list[dict[str, Any]] = []
    try:
        server.start()
        with httpx.Client(
            base_url=server.url, headers={"Authorization": f"Bearer {KEY}"}, timeout=600.0
        ) as c:
            unit_doc = ingest(c, texts)
            plan = [
                (h, q, kind)
                for h, v in halves.items()
                for q in v
                for kind in (("in", "held") if index[q["id"]] % HELD_OUT_EVERY == 0 else ("in",))
            ]
            for h, q, kind in tqdm(plan, desc="answer", file=sys.stderr):
                body: dict[str, Any] = {"q": q["question"], "top_k": TOP_K}
                if kind == "held":
                    gone = {e["title"] for e in q["evidence"]}
                    body["filters"] = {"doc_id": [t for t in texts if t not in gone]}
                t0 = time.perf_counter()
                r = c.post("/v1/answer", params={"scope": SCOPE}, json=body)
                wall = (time.perf_counter() - t0) * 1000
                r.raise_for_status()
                d = r.json()
                hit_docs = {unit_doc.get(x["unit_id"]) for x in d["hits"]}
                bearing = [
                    where[e["doc_id"]][0] for e in q["evidence"] if norm_has(e["text"], q["answer"])
                ]
                rows.append(
                    {
                        "half": h,
                        "kind": kind,
                        "q": q,
                        "answer": d["answer"],
                        "hits": [
                            {k: x.get(k) for k in ("unit_id", "doc_id", "ranks", "text")}
                            for x in d["hits"]
                        ],
                        "hops": [
                            s.get("detail") for s in d["trace"]["stages"] if s["stage"] == "hop"
                        ],
                        "unit_doc": unit_doc,
                        "hop_needed": bool(bearing) and not (set(bearing) & hit_docs),
                        "total_ms": d["trace"]["total_ms"],
                        "wall_ms": wall,
                    }
                )
    except BaseException:
        print(f"server log tail:\n{server.log_tail()}", file=sys.stderr)
        raise
    finally:
        server.stop()
        shutil.rmtree(data_dir, ignore_errors=True)
        shutil.rmtree(log_dir, ignore_errors=True)
    command = "bench/answers_hotpot.py " + " ".join(argv if argv is not None else sys.argv[1:])
    report: dict[str, Any] = {
        "benchmark": "hotpotqa-answers",
        "generated_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": command,
        "git_commit": benv.git_commit(),
        "cpus": os.cpu_count(),
        "load_avg_1min": round(os.getloadavg()[0], 2),
        "top_k": TOP_K,
        "limit": args.limit,
        "halves": {},
    }
    for h in halves:
        mine = [r for r in rows if r["half"] == h]
        sub = [r for r in mine if r["kind"] == "in" and r["hop_needed"]]
        ms = sorted(r["total_ms"] for r in mine)
        report["halves"][h] = {
            "all": score(mine, where),
            "hop_needed": score(sub, where),
            "latency_ms": {
                "p50": ms[len(ms) // 2] if ms else None,
                "p95": ms[int(len(ms) * 0.95)] if ms else None,
            },
        }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "answers_hotpot.json").write_text(json.dumps(report, indent=2) + "\n")
    (args.out / "answers_hotpot.md").write_text(markdown(report))
    if args.save_records:
        with open(args.save_records, "w", encoding="utf-8") as f:
            for r in rows:
                f.write(json.dumps({k: v for k, v in r.items() if k != "unit_doc"}) + "\n")
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
