"""Metrics of bench/answers.py: SQuAD text metrics, the per-half scores and their targets,
failure examples, latency and signal summaries.

Records are duck-typed (``bench/answers.py``'s ``Record``); the dataset is its ``Dataset``.
"""

from __future__ import annotations

import math
import re
import statistics
import string
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from bench.answers_calib import Outcome

TOP_K = 5  # hits asked for and localized per question
# Informational metrics (no target): span_f1 (token F1 of the localized span; an extractive
# span is a whole sentence, so it stays far below the answer-string F1 a reader model reaches).

# name: (direction, bound, source). Direction ">=" means the metric must be at least the bound.
TARGETS: dict[str, tuple[str, float, str]] = {
    "citation_recall": (">=", 0.95, "brief"),
    "citation_precision": (">=", 0.97, "issue 21"),
    "citation_precision_strict": (">=", 0.95, "D-74 (refusal = miss)"),
    "false_refusal_rate": ("<=", 0.05, "D-74"),
    "oos_refusal_rate": (">=", 0.96, "issue 21"),
    "near_miss_ok_rate": (">=", 0.90, "issue 21 (worst offset)"),
    "near_miss_wrong_rate": ("<=", 0.05, "issue 21 (worst offset)"),
    "median_sentences": ("<=", 2, "D-74"),
    "median_words": ("<=", 60, "D-74"),
    "span_contains_gold": (">=", 0.85, "D-74"),
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
    "span_contains_gold_answered",
    "oos_refusal_rate",
    "near_miss_ok_rate",
    "near_miss_wrong_rate",
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
    "span_contains_gold_answered": "the same over answers whose text contains the gold answer:"
    " whether the citation points where the answer's own claim is (a wrong answer citing the"
    " gold paragraph is pinned to what it says, so it misses in span_contains_gold)",
    "oos_refusal_rate": "out-of-scope questions correctly refused",
    "near_miss_ok_rate": "near-miss questions (own paragraph left out, its article kept) refused"
    " or answered with text containing the gold answer; the worst of the five offsets",
    "near_miss_wrong_rate": "near-miss questions answered without the gold answer; the worst"
    " offset",
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
    "near_wrong": "near-miss question answered without the gold answer",
}
MAX_EXAMPLES = 30


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
    ds: Any, pairs: Sequence[tuple[Any, Outcome]]
) -> tuple[dict[str, Any], dict[str, list[dict[str, Any]]]]:
    """Metrics of one half and its failures (each kind: all examples, capped later)."""
    ins = [(r, o) for r, o in pairs if r.kind == "in"]
    oos = [(r, o) for r, o in pairs if r.kind == "oos"]
    recall_hits = refused = answered = n_cites = gold_cites = 0
    contains_gold = 0
    f1s: list[float] = []
    span_f1s: list[float] = []
    span_contains = span_offset = gold_cited = 0
    answered_gold = span_answered = 0  # answers containing the gold answer, citing its paragraph
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
        has_gold = contains(text, q.answers)
        contains_gold += has_gold
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
        answered_gold += has_gold
        span_answered += ok and has_gold
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
    near = near_miss(ds, pairs, fails)
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
        "span_contains_gold_answered": _share(span_answered, answered_gold),
        "oos_refusal_rate": _share(oos_refused, len(oos)),
        "near_miss_ok_rate": near["worst_ok"],
        "near_miss_wrong_rate": near["worst_wrong"],
        "near_miss": near,
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


def near_miss(
    ds: Any, pairs: Sequence[tuple[Any, Outcome]], fails: dict[str, list[dict[str, Any]]]
) -> dict[str, Any]:
    """Per offset: refused, answered with the gold answer (a sibling paragraph may hold it),
    answered wrongly; the worst offset's shares are the row's numbers."""
    per: dict[int, Counter[str]] = {}
    for r, o in pairs:
        if r.kind != "near":
            continue
        c = per.setdefault(int(r.offset), Counter())
        c["n"] += 1
        if o.refused:
            c["refused"] += 1
        elif contains(" ".join(o.sentences), r.q.answers):
            c["answered_gold"] += 1
        else:
            c["wrong"] += 1
            fails["near_wrong"].append(example(ds, r, o))
    offsets = {
        k: {
            **dict(v),
            "ok_rate": round((v["refused"] + v["answered_gold"]) / v["n"], 4),
            "wrong_rate": round(v["wrong"] / v["n"], 4),
        }
        for k, v in sorted(per.items())
    }
    return {
        "offsets": offsets,
        "worst_ok": min((v["ok_rate"] for v in offsets.values()), default=None),
        "worst_wrong": max((v["wrong_rate"] for v in offsets.values()), default=None),
    }


def targets(m: dict[str, Any]) -> dict[str, dict[str, Any]]:
    out = {}
    for k, (op, bound, src) in TARGETS.items():
        v = m.get(k)
        ok = None if v is None else (v >= bound if op == ">=" else v <= bound)
        out[k] = {"target": f"{op} {bound}", "pass": ok, "source": src}
    return out


def example(ds: Any, r: Any, o: Outcome, span: str | None = None) -> dict[str, Any]:
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


def latency(records: Sequence[Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, sel in (
        ("all", records),
        ("in_scope", [r for r in records if r.kind == "in"]),
        ("out_of_scope", [r for r in records if r.kind == "oos"]),
        ("near_miss", [r for r in records if r.kind == "near"]),
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


def signal_summary(records: Sequence[Any]) -> dict[str, Any]:
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


_WH = re.compile(r"\b(what|which|who|whom|whose|when|where|why|how many|how much|how)\b", re.I)


def failure_summary(
    fails: dict[str, list[dict[str, Any]]], pairs: Sequence[tuple[Any, Outcome]]
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
            and e["gold_doc"].rsplit("_", 1)[0]
            in {d.rsplit("_", 1)[0] for d in e["cited_docs"] if d}
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
