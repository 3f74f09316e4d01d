"""XQuAD (English) cited-answer benchmark through the real HTTP API (D-73, D-32 to D-35).

Starts ``superchargedb serve --demo`` on a free port over a fresh data dir, ingests the 240 XQuAD
paragraphs as ``alice`` (one Unit per paragraph: text = paragraph text, ``doc_id`` = paragraph
id, scope ``acme/alpha/xquad``), then asks every selected question twice over
``POST /v1/answer`` with ``top_k=5``:

* **in scope**: in ``acme/alpha/xquad`` (all 48 articles): the question is answerable;
* **out of scope**: in the same scope with ``filters.doc_id`` = the 235 paragraphs of the *other*
  47 articles, so every paragraph of the question's own article is absent (a sibling paragraph
  often holds the answer too, so holding out one paragraph would be wrong: D-73).

The 48 articles (corpus ``title``) are split once, deterministically: sorted by title, even
positions form the CALIBRATION half and odd positions the REPORT half. Metrics are reported for
each half separately; only the REPORT half is the headline.

``--calibrate`` runs the server with refusal disabled (``SCDB_ANSWER_MIN_SCORE=-1e9``) and the
extractive synthesizer only. For every request the script re-runs the library's own localizer
on the returned hits in-process (same model), which gives every candidate sentence's signals.
The server's answerability model (``answerability.decide``) and extractive synthesizer are then
replayed exactly for any weights and threshold (``answers_calib.py``): the model is refit as a
logistic regression on the CALIBRATION half (in scope vs out of scope), its threshold the
lowest whose CALIBRATION out-of-scope refusal reaches 0.95 and false-refusal rate stays
within 5 %, both with a margin for sampling error (one-sided 90 % Wilson bounds).
The headline columns replay the shipped rule (``answer/answerability.py``, which holds the
constants of an earlier refit); the refit is scored on the REPORT half as a comparison column
(the search legs' ranks vary slightly between runs, so a refit moves a little). One server run
gives everything. The replay is checked against the server: with refusal disabled it must
reproduce every server answer and signal.

Without ``--calibrate`` the server runs with its built-in rule (or ``--min-score``) and its
answers are scored as they are. ``--local N`` runs the local model (``[llm]`` extra) and, for
comparison, the extractive default on a fixed stratified sample of N REPORT questions
(``answers_local.py``), writes ``answers_local.json`` and adds a table to ``answers.md``.

    .venv/bin/python -m bench.answers --calibrate          # full calibration + report
    .venv/bin/python -m bench.answers                      # built-in rule
    .venv/bin/python -m bench.answers --limit 5            # smoke: 5 questions per half
    nice -n 10 .venv/bin/python -m bench.answers --local 100   # the local model (~70 min)

Writes ``<out>/answers.json`` and ``<out>/answers.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import secrets
import shutil
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
from tqdm import tqdm

from bench.answers_calib import (
    NEVER_REFUSE,
    Outcome,
    Replayer,
    as_rule,
    calibrate,
    check_replay,
    outcome_of,
)
from bench.answers_metrics import (
    MAX_EXAMPLES,
    TOP_K,
    failure_summary,
    latency,
    score,
    signal_summary,
)
from bench.answers_report import markdown, text_table
from bench.common import env as Q  # git_commit
from bench.common import evaldir
from bench.common.server import Server, free_port

REPO = Path(__file__).resolve().parent.parent
SCOPE = "acme/alpha/xquad"
KEY = "aegis_sk_alice"
INGEST_BATCH = 48
UNIT_DOC: dict[str, str] = {}  # unit_id -> doc_id of what was ingested (hop citations)
THRESHOLD_ENV = "SCDB_ANSWER_MIN_SCORE"
# Near miss: every fifth paragraph (corpus order) left out, its article's others kept: the store
# has the topic, not the fact. Each question is asked once, at the offset that removes its own.
NEAR_MISS_EVERY = 5
KINDS = ("in", "oos", "near")


# -- data ------------------------------------------------------------------------------------


@dataclass
class Question:
    qid: str
    text: str
    doc: str  # gold paragraph id
    article: str
    answers: list[str]
    starts: list[int]


@dataclass
class Dataset:
    paragraphs: dict[str, dict[str, str]]  # id -> {title, text}
    articles: list[str]  # sorted titles
    questions: list[Question]  # file order

    def docs_of(self, article: str) -> list[str]:
        return [p for p, v in self.paragraphs.items() if v["title"] == article]

    def near_offset(self, doc: str) -> int:
        """The near-miss offset that removes ``doc``: paragraph ``i`` (corpus order) is left out
        at offset ``i % NEAR_MISS_EVERY``."""
        return list(self.paragraphs).index(doc) % NEAR_MISS_EVERY

    def near_removed(self, offset: int) -> set[str]:
        return {p for i, p in enumerate(self.paragraphs) if i % NEAR_MISS_EVERY == offset}


def load(path: Path) -> Dataset:
    paragraphs: dict[str, dict[str, str]] = {}
    with open(path / "corpus.jsonl", encoding="utf-8") as f:
        for line in f:
            d = json.loads(line)
            paragraphs[d["_id"]] = {"title": d["title"], "text": d["text"]}
    questions = []
    with open(path / "qa.jsonl", encoding="utf-8") as f:
        for line in f:
            d = json.loads(line)
            para = paragraphs[d["passage_id"]]
            if d["context"] != para["text"]:
                raise RuntimeError(f"{d['id']}: context differs from corpus paragraph")
            questions.append(
                Question(
                    d["id"],
                    d["question"],
                    d["passage_id"],
                    para["title"],
                    [a["text"] for a in d["answers"]],
                    [int(a["answer_start"]) for a in d["answers"]],
                )
            )
    articles = sorted({p["title"] for p in paragraphs.values()})
    return Dataset(paragraphs, articles, questions)


def split_articles(articles: Sequence[str]) -> dict[str, list[str]]:
    """Fixed split: sorted titles, even positions -> calibration, odd -> report."""
    ordered = sorted(articles)
    return {"calibration": ordered[0::2], "report": ordered[1::2]}


def select(
    questions: Sequence[Question], articles: Sequence[str], limit: int | None
) -> list[Question]:
    """The half's questions; with ``limit``, a fixed stratified sample: round-robin over the
    half's articles (sorted), questions in file order within each article."""
    by_article: dict[str, list[Question]] = defaultdict(list)
    for q in questions:
        if q.article in articles:
            by_article[q.article].append(q)
    if limit is None:
        return [q for a in articles for q in by_article[a]]
    out: list[Question] = []
    depth = 0
    while len(out) < limit and any(depth < len(by_article[a]) for a in articles):
        for a in articles:
            if depth < len(by_article[a]) and len(out) < limit:
                out.append(by_article[a][depth])
        depth += 1
    return out


# -- server ----------------------------------------------------------------------------------


def server_env(min_score: float | None, providers: str = "") -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != THRESHOLD_ENV}
    # The audit-chain key must live outside the data dir (D-46).
    env["SCDB_AUDIT_KEY"] = os.environ.get("SCDB_AUDIT_KEY") or secrets.token_hex(32)
    # Extractive synthesizer only (deterministic, no network, and what the replay reproduces),
    # or the local model first (--local).
    env["SCDB_ANSWER_PROVIDERS"] = providers
    env["SCDB_ANSWER_PASSAGES"] = str(TOP_K)
    # One client asking as fast as answers come: the per-key rate limit is not what is measured.
    env["SCDB_RATE_KEY_RPS"] = "0"
    env["SCDB_RATE_IP_RPS"] = "0"
    env.setdefault("XDG_CONFIG_HOME", tempfile.mkdtemp(prefix="scdb-bench-config-"))
    if min_score is not None:
        env[THRESHOLD_ENV] = repr(float(min_score))
    return env


# -- phases ----------------------------------------------------------------------------------


def ingest(client: httpx.Client, ds: Dataset) -> dict[str, Any]:
    ids = list(ds.paragraphs)
    stored = chunked = 0
    t0 = time.perf_counter()
    with tqdm(total=len(ids), desc="ingest", unit="para", file=sys.stderr) as bar:
        for i in range(0, len(ids), INGEST_BATCH):
            batch = ids[i : i + INGEST_BATCH]
            units = [{"text": ds.paragraphs[d]["text"], "doc_id": d, "scope": SCOPE} for d in batch]
            r = client.post("/v1/ingest", json={"units": units}, headers={"X-Aegis-Scope": SCOPE})
            if r.status_code != 200:
                raise RuntimeError(
                    f"ingest batch {i // INGEST_BATCH}: HTTP {r.status_code}: {r.text}"
                )
            for d, res in zip(batch, r.json()["results"], strict=True):
                if not res.get("ok"):
                    raise RuntimeError(f"ingest of {d} failed: {res.get('error')}")
                for u in res.get("unit_ids") or [res.get("unit_id")]:
                    if u:
                        UNIT_DOC[u] = d
                n = len(res.get("unit_ids") or []) or 1
                stored += n
                chunked += n > 1
            bar.update(len(batch))
    secs = time.perf_counter() - t0
    return {
        "paragraphs": len(ids),
        "units_stored": stored,
        "chunked_paragraphs": chunked,
        "seconds": round(secs, 2),
    }


@dataclass
class Record:
    """One request: a question asked in scope or out of scope."""

    q: Question
    half: str
    kind: str  # "in" | "oos" | "near"
    response: dict[str, Any]
    wall_ms: float
    evidence: list[Any] | None = None  # in-process localization (calibrate only)
    offset: int = -1  # near miss: the offset whose removal made it one
    check: dict[str, Any] = field(default_factory=dict)

    @property
    def hits(self) -> list[dict[str, Any]]:
        return list(self.response["hits"])


def ask_all(
    client: httpx.Client,
    ds: Dataset,
    plan: list[tuple[Question, str, str]],
    localizer: Any | None,
    extra: dict[str, Any] | None = None,
    on_record: Callable[[Record], None] | None = None,
) -> list[Record]:
    all_docs = list(ds.paragraphs)
    records: list[Record] = []
    # One warm-up request (not scored): lazy initialisation is not answer latency.
    client.post(
        "/v1/answer", params={"scope": SCOPE}, json={"q": "warm-up question?", "top_k": TOP_K}
    ).raise_for_status()
    for q, half, kind in tqdm(plan, desc="answer", unit="q", file=sys.stderr):
        body: dict[str, Any] = {"q": q.text, "top_k": TOP_K, **(extra or {})}
        if kind == "oos":
            own = set(ds.docs_of(q.article))
            body["filters"] = {"doc_id": [d for d in all_docs if d not in own]}
        elif kind == "near":
            gone = ds.near_removed(ds.near_offset(q.doc))
            body["filters"] = {"doc_id": [d for d in all_docs if d not in gone]}
        t0 = time.perf_counter()
        r = client.post("/v1/answer", params={"scope": SCOPE}, json=body)
        wall = (time.perf_counter() - t0) * 1000
        if r.status_code != 200:
            raise RuntimeError(f"answer q={q.qid} ({kind}): HTTP {r.status_code}: {r.text}")
        rec = Record(q, half, kind, r.json(), wall)
        if kind == "near":
            rec.offset = ds.near_offset(q.doc)
        if kind in ("oos", "near"):
            held = set(ds.docs_of(q.article)) if kind == "oos" else {q.doc}
            leaked = {h["doc_id"] for h in rec.hits} & held
            if leaked:
                raise RuntimeError(f"q={q.qid} ({kind}): hits from what was left out: {leaked}")
        if localizer is not None:
            rec.evidence = localizer.localize(q.text, rec.hits[:TOP_K])
        records.append(rec)
        if on_record is not None:
            on_record(rec)
    return records


def builtin_min_score() -> float:
    from superchargedb.answer.answerability import MIN_SCORE

    return MIN_SCORE


# -- main ------------------------------------------------------------------------------------


def run_server(
    ds: Dataset,
    plan: list[tuple[Question, str, str]],
    env: dict[str, str],
    data_dir_arg: Path | None,
    port: int | None,
    in_process_localize: bool,
    extra: dict[str, Any] | None = None,
    on_record: Callable[[Record], None] | None = None,
) -> tuple[list[Record], dict[str, Any], float]:
    """Start a fresh server, ingest, ask the plan (``extra``: more request body fields;
    ``on_record``: called with each answer as it arrives); (records, ingest summary, startup
    seconds)."""
    own_dir = data_dir_arg is None
    if data_dir_arg is None:
        data_dir = Path(tempfile.mkdtemp(prefix="scdb-bench-answers-"))
    else:
        data_dir = data_dir_arg
        data_dir.mkdir(parents=True, exist_ok=True)
        if any(data_dir.iterdir()):
            raise SystemExit(f"--data-dir {data_dir} is not empty; the benchmark needs a fresh one")
    log_dir = Path(tempfile.mkdtemp(prefix="scdb-bench-log-"))
    server = Server(data_dir, port or free_port(), log_dir / "server.log", env)
    localizer = None
    try:
        t0 = time.perf_counter()
        server.start()
        startup_s = time.perf_counter() - t0
        print(
            f"server ready on {server.url} in {startup_s:.1f}s (data: {data_dir})", file=sys.stderr
        )
        if in_process_localize:
            import superchargedb  # noqa: F401  (onnxruntime before usearch)
            from superchargedb.answer.localize import Localizer
            from superchargedb.models.embedder import make_embedder
            from superchargedb.settings import Settings

            s = Settings()
            localizer = Localizer(
                make_embedder(
                    s.embedder,
                    max_tokens=s.embed_max_tokens,
                    threads=s.embed_threads,
                    batch_size=s.embed_batch_size,
                    cache_size=s.embed_cache_size,
                )
            )
        headers = {"Authorization": f"Bearer {KEY}"}
        with httpx.Client(base_url=server.url, headers=headers, timeout=600.0) as client:
            ing = ingest(client, ds)
            records = ask_all(client, ds, plan, localizer, extra, on_record)
    except BaseException:
        print(f"server log tail:\n{server.log_tail()}", file=sys.stderr)
        raise
    finally:
        server.stop()
        shutil.rmtree(log_dir, ignore_errors=True)
        if own_dir:
            shutil.rmtree(data_dir, ignore_errors=True)
    return records, ing, startup_s


def as_served(r: Record) -> Outcome:
    return outcome_of(r.response["answer"], r.hits, UNIT_DOC)


def environment(startup_s: float) -> dict[str, Any]:
    return {
        "git_commit": Q.git_commit(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "load_avg_1min": round(os.getloadavg()[0], 2),
        "server_startup_s": round(startup_s, 2),
    }


def public_env(env: dict[str, str]) -> dict[str, str]:
    # Not the audit key, nor where the data lies (a path of the machine that ran it).
    hidden = {"SCDB_AUDIT_KEY", "SCDB_EVAL_DIR"}
    return {k: v for k, v in env.items() if k.startswith("SCDB_") and k not in hidden}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--calibrate", action="store_true", help="fit the answerability model")
    ap.add_argument("--limit", type=int, help="a fixed stratified sample of N questions per half")
    ap.add_argument(
        "--min-score",
        type=float,
        help="run the server with this answerability threshold (default: built-in)",
    )
    ap.add_argument(
        "--local",
        type=int,
        metavar="N",
        help="run the local model (the [llm] extra) and the extractive default on a fixed"
        " stratified sample of N REPORT questions; adds a table to <out>/answers.md",
    )
    ap.add_argument(
        "--local-half",
        choices=("report", "calibration"),
        default="report",
        help="with --local: the half the sample is drawn from (calibration: data for fitting"
        " rules on model output, kept apart from the REPORT numbers; use its own --out)",
    )
    ap.add_argument(
        "--partial",
        action="store_true",
        help="with --local: report only the questions the model has answered so far (from the"
        " checkpoint in --out), asking the extractive server for those",
    )
    ap.add_argument("--out", type=Path, default=REPO / "bench" / "results")
    ap.add_argument("--data-dir", type=Path, help="data dir (must be empty; default: a temp dir)")
    ap.add_argument("--port", type=int, help="server port (default: a free one)")
    ap.add_argument(
        "--save-records", type=Path, help="also write every request's outcome as JSON lines"
    )
    ap.add_argument("--dataset", type=Path, help=argparse.SUPPRESS)
    evaldir.add_argument(ap)
    args = ap.parse_args(argv)
    args.dataset = evaldir.dataset_arg(args, "xquad-en")
    if args.calibrate and args.min_score is not None:
        ap.error("--calibrate fits the threshold; do not pass --min-score with it")
    if args.partial and args.local is None:
        ap.error("--partial goes with --local")
    if args.local is not None and (args.calibrate or args.limit):
        ap.error("--local takes its own sample; do not combine it with --calibrate or --limit")
    command = "bench/answers.py " + " ".join(argv if argv is not None else sys.argv[1:])
    ds = load(args.dataset)
    split = split_articles(ds.articles)
    if args.local is not None:
        from bench.answers_local import run_local

        return run_local(args, ds, split, command)

    chosen_q = {h: select(ds.questions, split[h], args.limit) for h in ("calibration", "report")}
    plan = [(q, h, kind) for h in ("calibration", "report") for q in chosen_q[h] for kind in KINDS]
    print(
        f"{len(ds.paragraphs)} paragraphs, {len(ds.articles)} articles; questions:"
        f" {len(chosen_q['calibration'])} calibration + {len(chosen_q['report'])} report,"
        f" {len(plan)} requests",
        file=sys.stderr,
    )
    if args.calibrate:
        run_min: float | None = NEVER_REFUSE
        mode = "built-in (replayed)"
    elif args.min_score is not None:
        run_min, mode = args.min_score, "given"
    else:
        run_min, mode = None, "built-in"
    env = server_env(run_min)
    if args.calibrate:
        # The replay is of the logistic rule alone: the answer check's bar (never refuse) and
        # hops (none) are off; they are calibrated on saved hits by answers_checks.py.
        env["SCDB_ANSWER_CHECK_MIN_SCORE"] = "-1e9"
        env["SCDB_ANSWER_MAX_HOPS"] = "0"
    records, ing, startup_s = run_server(
        ds, plan, env, args.data_dir, args.port, in_process_localize=args.calibrate
    )

    if args.save_records is not None:  # first: a report that fails to render keeps the data
        save_records(args.save_records, records, as_served)
    by_half = {h: [r for r in records if r.half == h] for h in ("calibration", "report")}
    comparisons: dict[str, dict[str, Any]] = {}
    calibration: dict[str, Any] | None = None
    get: Callable[[Record], Outcome] = as_served
    rule_desc: dict[str, Any]
    if args.calibrate:
        # The headline is the shipped rule (answer/answerability.py), replayed: what a plain run
        # serves. The rule refit on this run's CALIBRATION half is a comparison column (the
        # search legs' ranks vary slightly from run to run, so a refit moves a little).
        replayer = Replayer()
        # The logistic model is fit on in scope vs out of scope only (as before this row).
        fit = {h: [r for r in v if r.kind != "near"] for h, v in by_half.items()}
        calibration = calibrate(fit["calibration"], fit["report"], replayer)
        calibration["replay_check"] = check_replay(records, replayer)
        chosen = calibration["chosen"]
        shipped, refit = replayer.rule(), as_rule(replayer, chosen)

        def get(r: Record) -> Outcome:
            return replayer.outcome(r, shipped)

        for name, other in (
            (f"refit on this run's CALIBRATION (min {chosen['min_score']:g})", refit),
            ("no refusal", replayer.rule(min_score=NEVER_REFUSE)),
        ):
            m, _ = score(ds, [(r, replayer.outcome(r, other)) for r in by_half["report"]])
            comparisons[name] = m
        rule_desc = {
            "mode": "built-in (replayed)",
            "weights": dict(shipped.weights),
            "intercept": shipped.intercept,
            "min_score": shipped.min_score,
        }
    else:
        from superchargedb.answer.answerability import INTERCEPT, WEIGHTS

        rule_desc = {
            "mode": mode,
            "weights": dict(WEIGHTS),
            "intercept": INTERCEPT,
            "min_score": builtin_min_score() if run_min is None else run_min,
        }

    evaluations: dict[str, Any] = {}
    report_fails: dict[str, list[dict[str, Any]]] = {}
    report_pairs: list[tuple[Record, Outcome]] = []
    for h in ("report", "calibration"):
        pairs = [(r, get(r)) for r in by_half[h]]
        m, fails = score(ds, pairs)
        evaluations[h] = m
        if h == "report":
            report_fails, report_pairs = fails, pairs

    report: dict[str, Any] = {
        "benchmark": "xquad-answers",
        "generated_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": command,
        "config": {
            "calibrate": args.calibrate,
            "limit": args.limit,
            "limited": args.limit is not None,
            "scope": SCOPE,
            "top_k": TOP_K,
            "providers": "extractive only",
            "split": split,
            "questions": {h: len(v) for h, v in chosen_q.items()},
            "requests": len(records),
            "server_env": public_env(env),
            "out_of_scope": "same scope, filters.doc_id = the paragraphs of the other 47 articles",
        },
        "environment": environment(startup_s),
        "ingest": ing,
        "answerability": rule_desc,
        "evaluations": evaluations,
        "comparisons": comparisons,
        "calibration": calibration,
        "latency_ms": latency(records),
        "signals": signal_summary(records),
        "failure_summary": failure_summary(report_fails, report_pairs),
        "failures": {k: v[:MAX_EXAMPLES] for k, v in report_fails.items()},
    }
    args.out.mkdir(parents=True, exist_ok=True)
    local = args.out / "answers_local.json"
    (args.out / "answers.json").write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n")
    (args.out / "answers.md").write_text(
        markdown(report, json.loads(local.read_text()) if local.exists() else None)
    )
    print()
    if calibration is not None:
        c = calibration["chosen"]
        rc = calibration["replay_check"]
        print(
            f"replay check: {rc['text_mismatches']} text / {rc['citation_mismatches']} citation"
            f" mismatches in {rc['requests']} requests"
        )
        print(
            f"refit on CALIBRATION: FR {c['calibration']['false_refusal_rate']},"
            f" OOS refused {c['calibration']['oos_refusal_rate']},"
            f" recall {c['calibration']['citation_recall']}; min_score {c['min_score']:g}"
        )
        print("refit weights:", json.dumps(c["weights"]), "intercept", c["intercept"])
    print(f"ANSWERABILITY min_score={rule_desc['min_score']:g} ({mode})")
    print(text_table(evaluations["report"], "REPORT half"))
    print(text_table(evaluations["calibration"], "CALIBRATION half (in-sample)"))
    lat = report["latency_ms"]["all"]["server_total_ms"]
    if lat:
        print(f"answer latency (server total): p50 {lat['p50']} ms, p95 {lat['p95']} ms")
    print(f"wrote {args.out / 'answers.json'} and {args.out / 'answers.md'}")
    return 0


def save_records(path: Path, records: Sequence[Record], get: Callable[[Record], Outcome]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        for r in records:
            row = {
                "qid": r.q.qid,
                "half": r.half,
                "kind": r.kind,
                "offset": r.offset,
                "question": r.q.text,
                "gold": r.q.answers,
                "gold_doc": r.q.doc,
                "hit_docs": [h["doc_id"] for h in r.hits],
                "hits": [
                    {k: h.get(k) for k in ("doc_id", "unit_id", "score", "ranks", "text")}
                    for h in r.hits
                ],
                "server_answer": r.response["answer"],
                "outcome": get(r).__dict__,
                "total_ms": r.response["trace"]["total_ms"],
            }
            if r.evidence is not None:
                row["candidates"] = [
                    [c.n, c.start, c.end, round(c.cos, 5), round(c.coverage, 4)]
                    for ev in r.evidence
                    for c in ev.candidates
                ]
            f.write(json.dumps(row, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    sys.exit(main())
