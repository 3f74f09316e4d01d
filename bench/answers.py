"""XQuAD (English) cited-answer benchmark through the real HTTP API (DECISIONS Part 4, 32-35).

Starts ``superchargedb serve --demo`` on a free port over a fresh data dir, ingests the 240 XQuAD
paragraphs as ``alice`` (one Unit per paragraph: text = paragraph text, ``doc_id`` = paragraph
id, scope ``acme/alpha/xquad``), then asks every selected question twice over
``POST /v1/answer`` with ``top_k=5``:

* **in scope**: in ``acme/alpha/xquad`` (all 48 articles): the question is answerable;
* **out of scope**: in the same scope with ``filters.doc_id`` = the 235 paragraphs of the *other*
  47 articles, so every paragraph of the question's own article is absent (a sibling paragraph
  often holds the answer too, so holding out one paragraph would be wrong: DECISIONS Part 4).

The 48 articles (corpus ``title``) are split once, deterministically: sorted by title, even
positions form the CALIBRATION half and odd positions the REPORT half. Metrics are reported for
each half separately; only the REPORT half is the headline.

``--calibrate`` runs the server with the answerability thresholds disabled (nothing is refused)
and the extractive synthesizer only. For every request the script re-runs the library's own
localizer on the returned hits in-process (same model), which gives every candidate sentence's
(cosine, coverage), not only the best one's ``signals``. The server's decision rule
(``answerability.decide``) and the extractive synthesizer (``extract`` + ``build_answer``) are
then replayed exactly for any thresholds: a threshold can change *which* sentence is best (the
best among those that pass), not only refuse-or-not. A grid search over (cos_strong, cos_min,
coverage_min) on the CALIBRATION half maximizes the out-of-scope refusal rate subject to at most
4 % false refusals on its in-scope questions; the REPORT half is then scored with the chosen
thresholds. One server run gives everything. The replay is checked against the server: with the
thresholds disabled it must reproduce every server answer and signal.

Without ``--calibrate`` the server runs with its built-in thresholds (or ``--thresholds``) and
its answers are scored as they are.

    .venv/bin/python bench/answers.py --calibrate          # full calibration + report
    .venv/bin/python bench/answers.py                      # built-in thresholds
    .venv/bin/python bench/answers.py --limit 5            # smoke: 5 questions per half

Writes ``<out>/answers.json`` and ``<out>/answers.md``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import re
import secrets
import shutil
import statistics
import string
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import numpy as np
from tqdm import tqdm

from benchserver import Server, free_port

REPO = Path(__file__).resolve().parent.parent
DATA = Path("/work/shared/eval/xquad-en")
SCOPE = "acme/alpha/xquad"
KEY = "aegis_sk_alice"
TOP_K = 5
INGEST_BATCH = 48
FR_BUDGET = 0.04  # calibration constraint: false refusals on in-scope questions
THRESHOLD_ENV = ("SCDB_ANSWER_COS_STRONG", "SCDB_ANSWER_COS_MIN", "SCDB_ANSWER_COVERAGE_MIN")

# Grid for --calibrate (cos_min <= cos_strong).
GRID_COS_STRONG = np.round(np.arange(0.20, 1.0001, 0.01), 2)
GRID_COS_MIN = np.round(np.arange(0.00, 1.0001, 0.01), 2)
GRID_COVERAGE = np.round(np.arange(0.00, 1.0001, 0.05), 2)

# name: (direction, bound, source). Direction ">=" means the metric must be at least the bound.
TARGETS: dict[str, tuple[str, float, str]] = {
    "citation_recall": (">=", 0.95, "brief"),
    "citation_precision": (">=", 0.95, "brief"),
    "citation_precision_strict": (">=", 0.95, "Part 4 (refusal = miss)"),
    "false_refusal_rate": ("<=", 0.05, "Part 4"),
    "oos_refusal_rate": (">=", 0.95, "brief"),
    "median_sentences": ("<=", 2, "Part 4"),
    "median_words": ("<=", 60, "Part 4"),
    "span_f1": (">=", 0.5, "Part 4 (extractive)"),
    "span_contains_gold": (">=", 0.85, "Part 4"),
}

# The metrics of one half; every one is a share in [0, 1] (None when its denominator is 0).
RATE_METRICS = (
    "citation_recall",
    "citation_precision",
    "citation_precision_strict",
    "answer_contains_gold",
    "answer_f1",
    "false_refusal_rate",
    "span_f1",
    "span_f1_all",
    "span_contains_gold",
    "span_covers_gold_offset",
    "oos_refusal_rate",
)

METRIC_DOC = {
    "citation_recall": "answerable questions whose citations include the gold paragraph"
    " (refusal = miss)",
    "citation_precision": "citations pointing at the gold paragraph, over all citations of"
    " answered in-scope questions",
    "citation_precision_strict": "the same with each refusal counted as one wrong citation",
    "answer_contains_gold": "answers whose text contains the gold answer (case- and"
    " whitespace-insensitive; refusal = miss)",
    "answer_f1": "SQuAD token F1 of the answer text vs the gold answer (refusal = 0)",
    "false_refusal_rate": "answerable questions refused",
    "span_f1": "SQuAD token F1 of the localized char_span of the cited gold paragraph vs the"
    " gold answer, over answers citing the gold paragraph",
    "span_f1_all": "the same over all answerable questions (0 when the gold paragraph is not"
    " cited)",
    "span_contains_gold": "answers citing the gold paragraph whose localized span contains the"
    " gold answer text",
    "span_covers_gold_offset": "the same, by character offsets (the span covers the gold"
    " answer's own position)",
    "oos_refusal_rate": "out-of-scope questions correctly refused",
    "median_sentences": "median answer length in sentences (answered in-scope questions)",
    "median_words": "median answer length in words (answered in-scope questions)",
}

FAILURE_KINDS = {
    "false_refusal": "answerable question refused",
    "wrong_citation_retrieval": "answered, gold paragraph not cited and not among the top-5 hits",
    "wrong_citation_localize": "answered, gold paragraph among the hits but another passage's"
    " sentence won",
    "span_misses_gold": "gold paragraph cited but its localized span lacks the gold answer",
    "oos_answered": "out-of-scope question answered (should be refused)",
}
MAX_EXAMPLES = 30


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


# -- text metrics (SQuAD v1.1 evaluation script) ---------------------------------------------

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = set(string.punctuation)


def squad_normalize(s: str) -> str:
    s = "".join(ch for ch in s.lower() if ch not in _PUNCT)
    return " ".join(_ARTICLES.sub(" ", s).split())


def token_f1(prediction: str, gold: str) -> float:
    p, g = squad_normalize(prediction).split(), squad_normalize(gold).split()
    common = Counter(p) & Counter(g)
    same = sum(common.values())
    if same == 0:
        return 0.0
    precision, recall = same / len(p), same / len(g)
    return 2 * precision * recall / (precision + recall)


def ws_lower(s: str) -> str:
    return " ".join(s.lower().split())


def contains(haystack: str, needles: Iterable[str]) -> bool:
    h = ws_lower(haystack)
    return any(ws_lower(n) in h for n in needles if n.strip())


# -- server ----------------------------------------------------------------------------------


def server_env(thresholds: tuple[float, float, float] | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in THRESHOLD_ENV}
    # The audit-chain key must live outside the data dir (DECISIONS 46).
    env["SCDB_AUDIT_KEY"] = os.environ.get("SCDB_AUDIT_KEY") or secrets.token_hex(32)
    # Extractive synthesizer only: deterministic, no network, and what the replay reproduces.
    env["SCDB_ANSWER_PROVIDERS"] = ""
    env["SCDB_ANSWER_PASSAGES"] = str(TOP_K)
    env.setdefault("XDG_CONFIG_HOME", tempfile.mkdtemp(prefix="scdb-bench-config-"))
    if thresholds is not None:
        for k, v in zip(THRESHOLD_ENV, thresholds, strict=True):
            env[k] = repr(float(v))
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
    kind: str  # "in" | "oos"
    response: dict[str, Any]
    wall_ms: float
    evidence: list[Any] | None = None  # in-process localization (calibrate only)
    check: dict[str, Any] = field(default_factory=dict)

    @property
    def hits(self) -> list[dict[str, Any]]:
        return list(self.response["hits"])


def ask_all(
    client: httpx.Client,
    ds: Dataset,
    plan: list[tuple[Question, str, str]],
    localizer: Any | None,
) -> list[Record]:
    all_docs = list(ds.paragraphs)
    records: list[Record] = []
    # One warm-up request (not scored): lazy initialisation is not answer latency.
    client.post(
        "/v1/answer", params={"scope": SCOPE}, json={"q": "warm-up question?", "top_k": TOP_K}
    ).raise_for_status()
    for q, half, kind in tqdm(plan, desc="answer", unit="q", file=sys.stderr):
        body: dict[str, Any] = {"q": q.text, "top_k": TOP_K}
        if kind == "oos":
            own = set(ds.docs_of(q.article))
            body["filters"] = {"doc_id": [d for d in all_docs if d not in own]}
        t0 = time.perf_counter()
        r = client.post("/v1/answer", params={"scope": SCOPE}, json=body)
        wall = (time.perf_counter() - t0) * 1000
        if r.status_code != 200:
            raise RuntimeError(f"answer q={q.qid} ({kind}): HTTP {r.status_code}: {r.text}")
        rec = Record(q, half, kind, r.json(), wall)
        if kind == "oos":
            leaked = {h["doc_id"] for h in rec.hits} & set(ds.docs_of(q.article))
            if leaked:
                raise RuntimeError(f"q={q.qid}: out-of-scope hits from its own article: {leaked}")
        if localizer is not None:
            rec.evidence = localizer.localize(q.text, rec.hits[:TOP_K])
        records.append(rec)
    return records


# -- outcomes --------------------------------------------------------------------------------


@dataclass
class Outcome:
    refused: bool
    sentences: list[str]
    citations: list[dict[str, Any]]  # {doc_id, unit_id, start, end}
    signals: dict[str, float]


def outcome_of(answer: dict[str, Any], hits: Sequence[dict[str, Any]]) -> Outcome:
    doc_of = {h["unit_id"]: h["doc_id"] for h in hits}
    cites = []
    for c in answer.get("citations") or []:
        loc = c.get("locator") or {}
        span = (
            (loc.get("start"), loc.get("end")) if loc.get("kind") == "char_span" else (None, None)
        )
        cites.append(
            {
                "doc_id": doc_of.get(c["unit_id"]),
                "unit_id": c["unit_id"],
                "start": span[0],
                "end": span[1],
            }
        )
    return Outcome(
        bool(answer.get("refused")),
        [s["text"] for s in answer.get("sentences") or []],
        cites,
        dict(answer.get("signals") or {}),
    )


class Replayer:
    """The server's decision rule and extractive synthesizer, replayed in-process."""

    def __init__(self) -> None:
        from superchargedb.answer.answerability import decide
        from superchargedb.answer.compose import build_answer, refusal
        from superchargedb.answer.extractive import extract

        self._decide, self._build, self._refusal, self._extract = (
            decide,
            build_answer,
            refusal,
            extract,
        )
        self._memo: dict[tuple[int, int, int], Outcome] = {}

    def answer(self, rec: Record, t: tuple[float, float, float]) -> tuple[dict[str, Any], Any]:
        assert rec.evidence is not None
        d = self._decide(rec.evidence, cos_strong=t[0], cos_min=t[1], coverage_min=t[2])
        if not d.answerable or d.best is None:
            return {**self._refusal(d.reason), "signals": d.signals()}, d
        draft = self._extract(d.best, rec.evidence)
        ans = self._build(draft, rec.evidence, extractive=True, provider="extractive")
        ans["signals"] = d.signals()
        return ans, d

    def outcome(self, rec: Record, t: tuple[float, float, float]) -> Outcome:
        assert rec.evidence is not None
        d = self._decide(rec.evidence, cos_strong=t[0], cos_min=t[1], coverage_min=t[2])
        if not d.answerable or d.best is None:
            return Outcome(True, [], [], d.signals())
        key = (id(rec), d.best.n, d.best.start)
        if key not in self._memo:
            ans, _ = self.answer(rec, t)
            self._memo[key] = outcome_of(ans, rec.hits)
        return self._memo[key]


def check_replay(records: Sequence[Record], replayer: Replayer) -> dict[str, Any]:
    """With thresholds disabled the replay must reproduce the server's answer and signals."""
    off = (-1.0, -1.0, 0.0)
    text_mismatch = cite_mismatch = 0
    cos_diff: list[float] = []
    examples = []
    for rec in records:
        ans, _ = replayer.answer(rec, off)
        srv = rec.response["answer"]
        same_text = ans["text"] == srv["text"]
        same_cites = [(c["unit_id"], c["locator"]) for c in ans["citations"]] == [
            (c["unit_id"], c["locator"]) for c in srv["citations"]
        ]
        text_mismatch += not same_text
        cite_mismatch += not same_cites
        s_sig, r_sig = srv.get("signals") or {}, ans["signals"]
        if "best_cos" in s_sig:
            cos_diff.append(abs(float(s_sig["best_cos"]) - float(r_sig["best_cos"])))
        if (not same_text or not same_cites) and len(examples) < 5:
            examples.append({"qid": rec.q.qid, "server": srv["text"], "replay": ans["text"]})
    return {
        "requests": len(records),
        "text_mismatches": text_mismatch,
        "citation_mismatches": cite_mismatch,
        "max_abs_best_cos_diff": round(max(cos_diff, default=0.0), 6),
        "examples": examples,
    }


# -- metrics ---------------------------------------------------------------------------------


def _share(num: float, den: int) -> float | None:
    return None if den == 0 else num / den


def _pct(values: Sequence[float]) -> dict[str, float] | None:
    if not values:
        return None
    a = np.asarray(values, dtype=float)
    return {
        "p50": round(float(np.percentile(a, 50)), 1),
        "p95": round(float(np.percentile(a, 95)), 1),
        "n": len(values),
    }


def score(
    ds: Dataset, pairs: Sequence[tuple[Record, Outcome]]
) -> tuple[dict[str, Any], dict[str, list[dict[str, Any]]]]:
    """Metrics of one half and its failures (each kind: all examples, capped later)."""
    ins = [(r, o) for r, o in pairs if r.kind == "in"]
    oos = [(r, o) for r, o in pairs if r.kind == "oos"]
    recall_hits = refused = answered = n_cites = gold_cites = 0
    contains_gold = 0
    f1s: list[float] = []
    span_f1s: list[float] = []
    span_contains = span_offset = gold_cited = 0
    n_sent: list[int] = []
    n_words: list[int] = []
    fails: dict[str, list[dict[str, Any]]] = {k: [] for k in FAILURE_KINDS}
    for r, o in ins:
        q = r.q
        if o.refused:
            refused += 1
            f1s.append(0.0)
            fails["false_refusal"].append(example(ds, r, o))
            continue
        answered += 1
        text = " ".join(o.sentences)
        n_sent.append(len(o.sentences))
        n_words.append(len(text.split()))
        n_cites += len(o.citations)
        gold_cites += sum(c["doc_id"] == q.doc for c in o.citations)
        contains_gold += contains(text, q.answers)
        f1s.append(max(token_f1(text, a) for a in q.answers))
        gold = [c for c in o.citations if c["doc_id"] == q.doc]
        if not gold:
            in_hits = q.doc in [h["doc_id"] for h in r.hits[:TOP_K]]
            kind = "wrong_citation_localize" if in_hits else "wrong_citation_retrieval"
            fails[kind].append(example(ds, r, o))
            continue
        recall_hits += 1
        gold_cited += 1
        c = gold[0]
        para = ds.paragraphs[q.doc]["text"]
        if c["start"] is None:
            span_text, sa, sb = "", -1, -1
        else:
            sa, sb = int(c["start"]), int(c["end"])
            span_text = para[sa:sb]
        span_f1s.append(max(token_f1(span_text, a) for a in q.answers))
        ok = contains(span_text, q.answers)
        span_contains += ok
        span_offset += any(
            sa <= st and st + len(a) <= sb for a, st in zip(q.answers, q.starts, strict=True)
        )
        if not ok:
            fails["span_misses_gold"].append(example(ds, r, o, span=span_text))
    oos_refused = 0
    for r, o in oos:
        if o.refused:
            oos_refused += 1
        else:
            fails["oos_answered"].append(example(ds, r, o))
    n_in = len(ins)
    m: dict[str, Any] = {
        "citation_recall": _share(recall_hits, n_in),
        "citation_precision": _share(gold_cites, n_cites),
        "citation_precision_strict": _share(gold_cites, n_cites + refused),
        "answer_contains_gold": _share(contains_gold, n_in),
        "answer_f1": _share(sum(f1s), n_in),
        "false_refusal_rate": _share(refused, n_in),
        "span_f1": _share(sum(span_f1s), gold_cited),
        "span_f1_all": _share(sum(span_f1s), n_in),
        "span_contains_gold": _share(span_contains, gold_cited),
        "span_covers_gold_offset": _share(span_offset, gold_cited),
        "oos_refusal_rate": _share(oos_refused, len(oos)),
        "median_sentences": float(statistics.median(n_sent)) if n_sent else None,
        "median_words": float(statistics.median(n_words)) if n_words else None,
        "counts": {
            "in_scope": n_in,
            "out_of_scope": len(oos),
            "answered_in_scope": answered,
            "refused_in_scope": refused,
            "citations": n_cites,
            "gold_cited": gold_cited,
            "oos_refused": oos_refused,
        },
    }
    for k in RATE_METRICS:
        if m[k] is not None:
            if math.isnan(m[k]):
                raise RuntimeError(f"{k} is NaN")
            m[k] = round(m[k], 4)
    m["targets"] = targets(m)
    return m, fails


def targets(m: dict[str, Any]) -> dict[str, dict[str, Any]]:
    out = {}
    for k, (op, bound, src) in TARGETS.items():
        v = m.get(k)
        ok = None if v is None else (v >= bound if op == ">=" else v <= bound)
        out[k] = {"target": f"{op} {bound}", "pass": ok, "source": src}
    return out


def example(ds: Dataset, r: Record, o: Outcome, span: str | None = None) -> dict[str, Any]:
    hits = r.hits[:TOP_K]
    hit_docs = [h["doc_id"] for h in hits]
    cited = [c["doc_id"] for c in o.citations]
    ex: dict[str, Any] = {
        "qid": r.q.qid,
        "kind": r.kind,
        "question": r.q.text,
        "gold": r.q.answers[0],
        "gold_doc": r.q.doc,
        "answer": "(refused)" if o.refused else " ".join(o.sentences),
        "cited_docs": cited,
        "cited_articles": sorted({ds.paragraphs[d]["title"] for d in cited if d in ds.paragraphs}),
        "gold_rank_in_hits": hit_docs.index(r.q.doc) + 1 if r.q.doc in hit_docs else None,
        "signals": o.signals,
    }
    if span is not None:
        ex["span"] = span
    if r.kind == "oos" and not o.refused:
        ex["answer_contains_gold"] = contains(" ".join(o.sentences), r.q.answers)
    return ex


def latency(records: Sequence[Record]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, sel in (
        ("all", records),
        ("in_scope", [r for r in records if r.kind == "in"]),
        ("out_of_scope", [r for r in records if r.kind == "oos"]),
    ):
        stages: dict[str, list[float]] = {}
        for r in sel:
            for st in r.response["trace"].get("stages", []):
                if not st.get("skipped"):
                    stages.setdefault(st["stage"], []).append(float(st["ms"]))
        out[name] = {
            "server_total_ms": _pct([float(r.response["trace"]["total_ms"]) for r in sel]),
            "client_wall_ms": _pct([r.wall_ms for r in sel]),
            "stages_ms": {k: _pct(v) for k, v in stages.items()},
        }
    return out


def signal_summary(records: Sequence[Record]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for kind in ("in", "oos"):
        sig = [r.response["answer"].get("signals") or {} for r in records if r.kind == kind]
        cos = [float(s["best_cos"]) for s in sig if "best_cos" in s]
        cov = [float(s["best_coverage"]) for s in sig if "best_coverage" in s]
        out[kind] = {
            "best_cos": _quantiles(cos),
            "best_coverage": _quantiles(cov),
        }
    return out


def _quantiles(v: Sequence[float]) -> dict[str, float] | None:
    if not v:
        return None
    a = np.asarray(v, dtype=float)
    return {f"p{p}": round(float(np.percentile(a, p)), 3) for p in (5, 25, 50, 75, 95)}


# -- calibration -----------------------------------------------------------------------------


def candidate_arrays(records: Sequence[Record]) -> tuple[np.ndarray, np.ndarray]:
    """Per request: the best cosine (A) and, per coverage grid value v, the best cosine among
    the sentences covering at least v (M[v]); -inf where there is none."""
    a = np.full(len(records), -np.inf)
    m = np.full((len(GRID_COVERAGE), len(records)), -np.inf)
    for i, rec in enumerate(records):
        assert rec.evidence is not None
        cands = [c for ev in rec.evidence for c in ev.candidates]
        if not cands:
            continue
        cos = np.array([c.cos for c in cands], dtype=float)
        cov = np.array([c.coverage for c in cands], dtype=float)
        a[i] = cos.max()
        for j, v in enumerate(GRID_COVERAGE):
            sel = cos[cov >= v]
            if sel.size:
                m[j, i] = sel.max()
    return a, m


def refusal_grid(records: Sequence[Record]) -> np.ndarray:
    """Share refused, shape (strong, min, coverage), by the rule of ``decide``."""
    a, m = candidate_arrays(records)
    s = GRID_COS_STRONG[:, None, None]
    mn = GRID_COS_MIN[None, :, None]
    out = np.empty((len(GRID_COS_STRONG), len(GRID_COS_MIN), len(GRID_COVERAGE)))
    if not records:
        out[:] = np.nan
        return out
    strong = a[None, None, :] >= s  # (S, 1, Q)
    for j in range(len(GRID_COVERAGE)):
        weak = m[j][None, None, :] >= mn  # (1, M, Q)
        out[:, :, j] = 1.0 - (strong | weak).mean(axis=2)
    return out


def calibrate(cal: Sequence[Record], rep: Sequence[Record]) -> dict[str, Any]:
    cal_in = refusal_grid([r for r in cal if r.kind == "in"])
    cal_oos = refusal_grid([r for r in cal if r.kind == "oos"])
    rep_in = refusal_grid([r for r in rep if r.kind == "in"])
    rep_oos = refusal_grid([r for r in rep if r.kind == "oos"])
    valid = GRID_COS_MIN[None, :, None] <= GRID_COS_STRONG[:, None, None]
    valid = np.broadcast_to(valid, cal_in.shape)

    def best_under(budget: float) -> tuple[int, int, int] | None:
        feasible = valid & (cal_in <= budget + 1e-12)
        if not feasible.any():
            return None
        oos = np.where(feasible, cal_oos, -1.0)
        top = oos.max()
        tied = feasible & (oos >= top - 1e-12)
        fr = np.where(tied, cal_in, np.inf)
        tied &= fr <= fr.min() + 1e-12
        idx = np.argwhere(tied)
        # Among exact ties, the medoid of the plateau (robust to the grid's edges).
        pts = np.stack(
            [GRID_COS_STRONG[idx[:, 0]], GRID_COS_MIN[idx[:, 1]], GRID_COVERAGE[idx[:, 2]]], 1
        )
        centre = pts.mean(axis=0)
        k = int(np.argmin(((pts - centre) ** 2).sum(axis=1)))
        return int(idx[k, 0]), int(idx[k, 1]), int(idx[k, 2])

    def point(ix: tuple[int, int, int]) -> dict[str, Any]:
        i, j, k = ix
        return {
            "cos_strong": float(GRID_COS_STRONG[i]),
            "cos_min": float(GRID_COS_MIN[j]),
            "coverage_min": float(GRID_COVERAGE[k]),
            "calibration": {
                "false_refusal_rate": round(float(cal_in[ix]), 4),
                "oos_refusal_rate": round(float(cal_oos[ix]), 4),
            },
            "report": {
                "false_refusal_rate": _r(rep_in[ix]),
                "oos_refusal_rate": _r(rep_oos[ix]),
            },
        }

    chosen = best_under(FR_BUDGET)
    if chosen is None:
        raise RuntimeError("no threshold triple meets the false-refusal budget")
    frontier = []
    for budget in (0.0, 0.01, 0.02, 0.03, 0.04, 0.05, 0.10, 0.20):
        ix = best_under(budget)
        if ix is not None:
            frontier.append({"fr_budget": budget, **point(ix)})
    # Separability of the simplest signal: AUC of the best cosine, in-scope vs out-of-scope.
    auc = {}
    for name, recs in (("calibration", cal), ("report", rep)):
        a_in, _ = candidate_arrays([r for r in recs if r.kind == "in"])
        a_oos, _ = candidate_arrays([r for r in recs if r.kind == "oos"])
        auc[name] = _auc(a_in, a_oos)
    return {
        "objective": f"max out-of-scope refusal s.t. false refusals <= {FR_BUDGET:.0%}"
        " (calibration half); ties: fewer false refusals, then the plateau's medoid",
        "grid": {
            "cos_strong": [float(GRID_COS_STRONG[0]), float(GRID_COS_STRONG[-1]), 0.01],
            "cos_min": [float(GRID_COS_MIN[0]), float(GRID_COS_MIN[-1]), 0.01],
            "coverage_min": [float(GRID_COVERAGE[0]), float(GRID_COVERAGE[-1]), 0.05],
            "constraint": "cos_min <= cos_strong",
        },
        "chosen": point(chosen),
        "frontier": frontier,
        "best_cos_auc": auc,
    }


def _r(x: float) -> float | None:
    return None if math.isnan(float(x)) else round(float(x), 4)


def _auc(pos: np.ndarray, neg: np.ndarray) -> float | None:
    if pos.size == 0 or neg.size == 0:
        return None
    pos, neg = np.where(np.isfinite(pos), pos, -9), np.where(np.isfinite(neg), neg, -9)
    gt = (pos[:, None] > neg[None, :]).mean()
    eq = (pos[:, None] == neg[None, :]).mean()
    return round(float(gt + 0.5 * eq), 4)


# -- report ----------------------------------------------------------------------------------


def fmt(v: Any, nd: int = 3) -> str:
    if v is None:
        return "—"
    if isinstance(v, float):
        return f"{v:.{nd}f}"
    return str(v)


def metric_table(evals: dict[str, dict[str, Any]]) -> str:
    """Rows: metrics; columns: the given evaluations (name -> metrics)."""
    names = list(evals)
    lines = [
        "| metric | " + " | ".join(names) + " | target |",
        "|---|" + "---|" * len(names) + "---|",
    ]
    for k in (*RATE_METRICS, "median_sentences", "median_words"):
        cells = []
        for n in names:
            m = evals[n]
            v = m.get(k)
            t = m["targets"].get(k)
            mark = "" if t is None or t["pass"] is None else (" ✅" if t["pass"] else " ❌")
            cells.append(fmt(v, 1 if k.startswith("median") else 3) + mark)
        t = TARGETS.get(k)
        lines.append(
            f"| {k} | " + " | ".join(cells) + f" | {t[0] + ' ' + str(t[1]) if t else ''} |"
        )
    for c in ("in_scope", "out_of_scope", "answered_in_scope", "citations"):
        lines.append(f"| n {c} | " + " | ".join(str(evals[n]["counts"][c]) for n in names) + " | |")
    return "\n".join(lines) + "\n"


def text_table(m: dict[str, Any], label: str) -> str:
    out = [f"{label}:"]
    for k in (*RATE_METRICS, "median_sentences", "median_words"):
        t = m["targets"].get(k)
        mark = (
            ""
            if t is None
            else ("  n/a" if t["pass"] is None else ("  PASS" if t["pass"] else "  FAIL"))
        )
        tgt = f" (target {t['target']})" if t else ""
        out.append(f"  {k:<26} {fmt(m.get(k), 1 if k.startswith('median') else 3):>7}{tgt}{mark}")
    return "\n".join(out)


def _md_escape(s: Any) -> str:
    return str(s).replace("|", "\\|").replace("\n", " ")


def markdown(report: dict[str, Any]) -> str:
    cfg = report["config"]
    th = report["thresholds"]
    lines = [
        "# XQuAD cited-answer benchmark",
        "",
        f"Generated {report['generated_at']} by `{report['command']}`"
        f" (commit `{report['environment']['git_commit']}`, {report['environment']['cpus']} CPUs,"
        f" Python {report['environment']['python']}).",
        "",
        "## Design",
        "",
        f"- Data: XQuAD English (1,190 SQuAD v1.1 dev questions, 240 paragraphs, 48 articles)."
        f" {report['ingest']['paragraphs']} paragraphs ingested as one Unit each (text = paragraph,"
        f" `doc_id` = paragraph id, scope `{SCOPE}`);"
        f" {report['ingest']['chunked_paragraphs']} paragraphs were chunked by the server"
        f" ({report['ingest']['units_stored']} Units).",
        "- Split: the 48 article titles sorted; even positions = CALIBRATION half"
        f" ({len(cfg['split']['calibration'])} articles), odd = REPORT half"
        f" ({len(cfg['split']['report'])}). Thresholds are fit on CALIBRATION only.",
        f"- Each question is asked twice with `POST /v1/answer?scope={SCOPE}`, `top_k={TOP_K}`:"
        " **in scope** (all 240 paragraphs; answerable) and **out of scope** (`filters.doc_id` ="
        " the 235 paragraphs of the other 47 articles: the question's whole article is absent).",
        "- Extractive synthesizer only (`SCDB_ANSWER_PROVIDERS=''`): deterministic, no LLM.",
        f"- Questions: {cfg['questions']['calibration']} CALIBRATION + {cfg['questions']['report']}"
        " REPORT"
        + (
            f" (**limited run: a fixed stratified sample of {cfg['limit']} per half**)"
            if cfg["limit"]
            else " (all)"
        )
        + ".",
        f"- Thresholds ({th['mode']}): cos_strong={th['cos_strong']}, cos_min={th['cos_min']},"
        f" coverage_min={th['coverage_min']}.",
    ]
    if cfg["calibrate"]:
        lines += [
            "- Calibration: one server run with the thresholds disabled (nothing refused). The"
            " localizer is re-run in-process on each response's hits (same model), which gives"
            " every candidate sentence's (cos, coverage); `decide()` and the extractive"
            " synthesizer are replayed exactly for any thresholds (a threshold can change which"
            " sentence is best, not only refuse-or-not). Latency below is that of the"
            " no-threshold run (refusals are cheaper).",
        ]
        rc = report["calibration"]["replay_check"]
        lines.append(
            f"- Replay check (thresholds off, replay vs server): {rc['text_mismatches']} text"
            f" and {rc['citation_mismatches']} citation mismatches in {rc['requests']} requests;"
            f" max |best_cos diff| {rc['max_abs_best_cos_diff']}."
        )
    lines += ["", "## Metrics", ""]
    ev = report["evaluations"]
    cols = {"REPORT half": ev["report"], "CALIBRATION half (in-sample)": ev["calibration"]}
    for name, extra in report.get("comparisons", {}).items():
        cols[f"REPORT, {name}"] = extra
    lines.append(metric_table(cols))
    lines += ["Definitions:", ""]
    for k, d in METRIC_DOC.items():
        lines.append(f"- `{k}`: {d}.")
    lat = report["latency_ms"]
    lines += [
        "",
        "## Latency (ms, one request at a time)",
        "",
        "| requests | server total p50 / p95 | client wall p50 / p95 | n |",
        "|---|---|---|---|",
    ]
    for name, v in lat.items():
        s, c = v["server_total_ms"], v["client_wall_ms"]
        if s is None:
            continue
        lines.append(f"| {name} | {s['p50']} / {s['p95']} | {c['p50']} / {c['p95']} | {s['n']} |")
    names = list(dict.fromkeys(k for v in lat.values() for k in v["stages_ms"]))
    if names:
        lines += ["", "Per-stage server latency (p50 / p95 ms):", ""]
        lines += ["| requests | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
        for name, v in lat.items():
            st = v["stages_ms"]
            cells = [f"{st[n]['p50']} / {st[n]['p95']}" if st.get(n) else "—" for n in names]
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
    sig = report["signals"]
    lines += [
        "",
        "## Signals of the best sentence (both halves, as returned by the server)",
        "",
        "| requests | best_cos p5 / p25 / p50 / p75 / p95"
        " | best_coverage p5 / p25 / p50 / p75 / p95 |",
        "|---|---|---|",
    ]
    for kind, v in sig.items():
        if v["best_cos"] is None:
            continue
        lines.append(
            f"| {kind} | "
            + " / ".join(str(x) for x in v["best_cos"].values())
            + " | "
            + " / ".join(str(x) for x in v["best_coverage"].values())
            + " |"
        )
    if cfg["calibrate"]:
        cal = report["calibration"]
        lines += [
            "",
            "## Calibration",
            "",
            f"Objective: {cal['objective']}. AUC of best_cos (in-scope vs out-of-scope):"
            f" calibration {cal['best_cos_auc']['calibration']},"
            f" report {cal['best_cos_auc']['report']}.",
            "",
            "Frontier (best triple for each false-refusal budget on CALIBRATION, and what it"
            " gives on REPORT):",
            "",
            "| FR budget | cos_strong | cos_min | coverage_min | CAL FR | CAL OOS refused"
            " | REP FR | REP OOS refused |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for f in cal["frontier"]:
            lines.append(
                f"| {f['fr_budget']:.2f} | {f['cos_strong']} | {f['cos_min']} | {f['coverage_min']}"
                f" | {fmt(f['calibration']['false_refusal_rate'])}"
                f" | {fmt(f['calibration']['oos_refusal_rate'])}"
                f" | {fmt(f['report']['false_refusal_rate'])}"
                f" | {fmt(f['report']['oos_refusal_rate'])} |"
            )
    fs = report["failure_summary"]
    lines += [
        "",
        "## Failures (REPORT half)",
        "",
        "| kind | count | meaning |",
        "|---|---|---|",
    ]
    for k, d in FAILURE_KINDS.items():
        lines.append(f"| {k} | {fs['counts'][k]} | {d} |")
    for k, v in fs.get("patterns", {}).items():
        lines.append(f"\n- {k}: {v}")
    for k in FAILURE_KINDS:
        exs = report["failures"][k]
        if not exs:
            continue
        lines += [
            "",
            f"### {k} ({len(exs)} of {fs['counts'][k]} shown)",
            "",
            "| question | gold | answer | cited doc(s) | gold doc (rank in hits) | cos / cov |",
            "|---|---|---|---|---|---|",
        ]
        for e in exs:
            sig = e["signals"] or {}
            ans = e["answer"] + (f" **[span: {e['span']}]**" if e.get("span") is not None else "")
            if e.get("answer_contains_gold"):
                ans += " *(contains the gold answer)*"
            lines.append(
                f"| {_md_escape(e['question'])} | {_md_escape(e['gold'])} | {_md_escape(ans)}"
                f" | {_md_escape(', '.join(e['cited_docs']) or '—')}"
                f" | {e['gold_doc']} ({fmt(e['gold_rank_in_hits'])})"
                f" | {fmt(sig.get('best_cos'), 2)} / {fmt(sig.get('best_coverage'), 2)} |"
            )
    return "\n".join(lines) + "\n"


_WH = re.compile(r"\b(what|which|who|whom|whose|when|where|why|how many|how much|how)\b", re.I)


def failure_summary(
    fails: dict[str, list[dict[str, Any]]], pairs: Sequence[tuple[Record, Outcome]]
) -> dict[str, Any]:
    counts = {k: len(v) for k, v in fails.items()}
    patterns: dict[str, str] = {}

    def wh(text: str) -> str:
        m = _WH.search(text)
        return m.group(1).lower() if m else "other"

    ins = [(r, o) for r, o in pairs if r.kind == "in"]
    if ins:
        total = Counter(wh(r.q.text) for r, _ in ins)
        wrong = Counter(
            wh(e["question"])
            for k in ("wrong_citation_retrieval", "wrong_citation_localize", "false_refusal")
            for e in fails[k]
        )
        parts = [f"{w} {wrong[w]}/{n}" for w, n in total.most_common()]
        patterns["citation misses by question word (miss/total)"] = ", ".join(parts)
        same_article = sum(
            1
            for e in fails["wrong_citation_localize"] + fails["wrong_citation_retrieval"]
            if e["cited_docs"]
            and e["gold_doc"].rsplit("_", 1)[0] in {d.rsplit("_", 1)[0] for d in e["cited_docs"]}
        )
        n_wrong = counts["wrong_citation_localize"] + counts["wrong_citation_retrieval"]
        if n_wrong:
            patterns["wrong citations that cite a sibling paragraph of the same article"] = (
                f"{same_article}/{n_wrong}"
            )
    if fails["oos_answered"]:
        with_gold = sum(1 for e in fails["oos_answered"] if e.get("answer_contains_gold"))
        patterns["answered out-of-scope questions whose answer still contains the gold string"] = (
            f"{with_gold}/{counts['oos_answered']}"
        )
    if fails["span_misses_gold"]:
        in_text = sum(1 for e in fails["span_misses_gold"] if contains(e["answer"], [e["gold"]]))
        patterns[
            "span misses whose answer text holds the gold answer in another sentence"
            " (the citation's char_span covers only the first cited sentence)"
        ] = f"{in_text}/{counts['span_misses_gold']}"
    return {"counts": counts, "patterns": patterns}


def git_commit() -> str:
    try:
        return subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def parse_thresholds(s: str) -> tuple[float, float, float]:
    parts = [float(x) for x in s.split(",")]
    if len(parts) != 3:
        raise argparse.ArgumentTypeError("expected cos_strong,cos_min,coverage_min")
    return parts[0], parts[1], parts[2]


def builtin_thresholds() -> tuple[float, float, float]:
    from superchargedb.answer.answerability import COS_MIN, COS_STRONG, COVERAGE_MIN

    return COS_STRONG, COS_MIN, COVERAGE_MIN


# -- main ------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--calibrate", action="store_true", help="fit the thresholds (see above)")
    ap.add_argument("--limit", type=int, help="a fixed stratified sample of N questions per half")
    ap.add_argument(
        "--thresholds",
        type=parse_thresholds,
        help="run the server with cos_strong,cos_min,coverage_min (default: built-in)",
    )
    ap.add_argument("--out", type=Path, default=REPO / "bench" / "results")
    ap.add_argument("--data-dir", type=Path, help="data dir (must be empty; default: a temp dir)")
    ap.add_argument("--port", type=int, help="server port (default: a free one)")
    ap.add_argument(
        "--save-records", type=Path, help="also write every request's outcome as JSON lines"
    )
    ap.add_argument("--dataset", type=Path, default=DATA, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.calibrate and args.thresholds:
        ap.error("--calibrate fits the thresholds; do not pass --thresholds with it")

    ds = load(args.dataset)
    split = split_articles(ds.articles)
    chosen_q = {h: select(ds.questions, split[h], args.limit) for h in ("calibration", "report")}
    plan = [
        (q, h, kind)
        for h in ("calibration", "report")
        for q in chosen_q[h]
        for kind in ("in", "oos")
    ]
    print(
        f"{len(ds.paragraphs)} paragraphs, {len(ds.articles)} articles; questions:"
        f" {len(chosen_q['calibration'])} calibration + {len(chosen_q['report'])} report,"
        f" {len(plan)} requests",
        file=sys.stderr,
    )

    if args.calibrate:
        run_thresholds: tuple[float, float, float] | None = (-1.0, -1.0, 0.0)
        mode = "calibrated"
    elif args.thresholds:
        run_thresholds, mode = args.thresholds, "given"
    else:
        run_thresholds, mode = None, "built-in"

    own_dir = args.data_dir is None
    if own_dir:
        data_dir = Path(tempfile.mkdtemp(prefix="scdb-bench-answers-"))
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
    env = server_env(run_thresholds)
    server = Server(data_dir, args.port or free_port(), log_dir / "server.log", env)
    localizer = None
    try:
        t0 = time.perf_counter()
        server.start()
        startup_s = time.perf_counter() - t0
        print(
            f"server ready on {server.url} in {startup_s:.1f}s (data: {data_dir})", file=sys.stderr
        )
        if args.calibrate:
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
            records = ask_all(client, ds, plan, localizer)
    except BaseException:
        print(f"server log tail:\n{server.log_tail()}", file=sys.stderr)
        raise
    finally:
        server.stop()
        shutil.rmtree(log_dir, ignore_errors=True)
        if own_dir:
            shutil.rmtree(data_dir, ignore_errors=True)

    by_half = {h: [r for r in records if r.half == h] for h in ("calibration", "report")}
    comparisons: dict[str, dict[str, Any]] = {}
    calibration: dict[str, Any] | None = None
    if args.calibrate:
        replayer = Replayer()
        cal = calibrate(by_half["calibration"], by_half["report"])
        cal["replay_check"] = check_replay(records, replayer)
        calibration = cal
        c = cal["chosen"]
        th = (c["cos_strong"], c["cos_min"], c["coverage_min"])

        def replay(t: tuple[float, float, float]) -> Callable[[Record], Outcome]:
            return lambda r: replayer.outcome(r, t)

        get = replay(th)
        for name, t in (
            ("built-in (replayed)", builtin_thresholds()),
            ("no thresholds", (-1.0, -1.0, 0.0)),
        ):
            m, _ = score(ds, [(r, replay(t)(r)) for r in by_half["report"]])
            comparisons[f"{name} {t[0]:g}/{t[1]:g}/{t[2]:g}"] = m
    else:
        th = run_thresholds or builtin_thresholds()

        def get(r: Record) -> Outcome:
            return outcome_of(r.response["answer"], r.hits)

    evaluations: dict[str, Any] = {}
    failures: dict[str, Any] = {}
    report_fails: dict[str, list[dict[str, Any]]] = {}
    report_pairs: list[tuple[Record, Outcome]] = []
    for h in ("report", "calibration"):
        pairs = [(r, get(r)) for r in by_half[h]]
        m, fails = score(ds, pairs)
        evaluations[h] = m
        if h == "report":
            report_fails, report_pairs = fails, pairs
    failures = {k: v[:MAX_EXAMPLES] for k, v in report_fails.items()}

    report: dict[str, Any] = {
        "benchmark": "xquad-answers",
        "generated_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": "bench/answers.py " + " ".join(argv if argv is not None else sys.argv[1:]),
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
            "server_env": {
                k: v for k, v in env.items() if k.startswith("SCDB_") and k != "SCDB_AUDIT_KEY"
            },
            "out_of_scope": "same scope, filters.doc_id = the paragraphs of the other 47 articles",
        },
        "environment": {
            "git_commit": git_commit(),
            "python": platform.python_version(),
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "server_startup_s": round(startup_s, 2),
        },
        "ingest": ing,
        "thresholds": {
            "mode": mode,
            "cos_strong": th[0],
            "cos_min": th[1],
            "coverage_min": th[2],
        },
        "evaluations": evaluations,
        "comparisons": comparisons,
        "calibration": calibration,
        "latency_ms": latency(records),
        "signals": signal_summary(records),
        "failure_summary": failure_summary(report_fails, report_pairs),
        "failures": failures,
    }

    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "answers.json").write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n")
    (args.out / "answers.md").write_text(markdown(report))
    if args.save_records is not None:
        args.save_records.parent.mkdir(parents=True, exist_ok=True)
        with open(args.save_records, "w", encoding="utf-8") as f:
            for r in records:
                o = get(r)
                row = {
                    "qid": r.q.qid,
                    "half": r.half,
                    "kind": r.kind,
                    "question": r.q.text,
                    "gold": r.q.answers,
                    "gold_doc": r.q.doc,
                    "hit_docs": [h["doc_id"] for h in r.hits],
                    "server_answer": r.response["answer"],
                    "outcome": o.__dict__,
                    "total_ms": r.response["trace"]["total_ms"],
                }
                if r.evidence is not None:
                    row["candidates"] = [
                        [c.n, c.start, c.end, round(c.cos, 5), round(c.coverage, 4)]
                        for ev in r.evidence
                        for c in ev.candidates
                    ]
                f.write(json.dumps(row, ensure_ascii=False) + "\n")

    print()
    if calibration is not None:
        c = calibration["chosen"]
        rc = calibration["replay_check"]
        print(
            f"replay check: {rc['text_mismatches']} text / {rc['citation_mismatches']} citation"
            f" mismatches in {rc['requests']} requests"
        )
        print(
            f"calibration fit: FR {c['calibration']['false_refusal_rate']:.3f},"
            f" OOS refused {c['calibration']['oos_refusal_rate']:.3f}"
        )
    print(f"THRESHOLDS cos_strong={th[0]:g} cos_min={th[1]:g} coverage_min={th[2]:g} ({mode})")
    print(text_table(evaluations["report"], "REPORT half"))
    print(text_table(evaluations["calibration"], "CALIBRATION half (in-sample)"))
    lat = report["latency_ms"]["all"]["server_total_ms"]
    if lat:
        print(f"answer latency (server total): p50 {lat['p50']} ms, p95 {lat['p95']} ms")
    print(f"wrote {args.out / 'answers.json'} and {args.out / 'answers.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
