"""The XQuAD answer benchmark end to end on a small slice: real server, real HTTP, real model."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bench.common import evaldir

REPO = Path(__file__).resolve().parent.parent
# The data comes from SCDB_EVAL_DIR (the child inherits it); without it these tests skip.
NO_DATA = evaldir.skip_reason("xquad-en")
RATES = (
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
)
# Defined whenever at least one in-scope and one out-of-scope question was asked.
ALWAYS = (
    "citation_recall",
    "answer_contains_gold",
    "answer_f1",
    "false_refusal_rate",
    "span_f1_all",
    "citation_precision_strict",
    "oos_refusal_rate",
)


def _finite(x: object) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)


def _check_half(m: dict[str, Any], n: int) -> None:
    c = m["counts"]
    assert c["in_scope"] == n and c["out_of_scope"] == n, c
    assert c["answered_in_scope"] + c["refused_in_scope"] == n
    for k in RATES:
        assert k in m, k
        v = m[k]
        if v is None:
            assert k not in ALWAYS, k
            continue
        assert _finite(v) and 0.0 <= v <= 1.0, (k, v)
    if c["answered_in_scope"]:
        assert m["citation_precision"] is not None
        assert _finite(m["median_sentences"]) and m["median_sentences"] >= 1
        assert _finite(m["median_words"]) and m["median_words"] >= 1
    if c["gold_cited"]:
        for k in ("span_f1", "span_contains_gold", "span_covers_gold_offset"):
            assert m[k] is not None, k
    for k, t in m["targets"].items():
        assert t["pass"] in (True, False, None), (k, t)
    # refusal = miss: recall can never exceed the answered share
    assert m["citation_recall"] <= 1.0 - m["false_refusal_rate"] + 1e-9


def _run(tmp_path: Path, *extra: str) -> tuple[dict[str, Any], str, str]:
    out = tmp_path / "results"
    proc = subprocess.run(
        [sys.executable, "-m", "bench.answers", "--limit", "5", "--out", str(out), *extra],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    report = json.loads((out / "answers.json").read_text())
    md = (out / "answers.md").read_text()
    assert md.startswith("# XQuAD cited-answer benchmark")
    return report, md, proc.stdout


@pytest.mark.slow
@pytest.mark.skipif(NO_DATA is not None, reason=str(NO_DATA))
def test_answers_bench_smoke(tmp_path: Path) -> None:
    records = tmp_path / "records.jsonl"
    report, md, stdout = _run(tmp_path, "--save-records", str(records))
    assert report["benchmark"] == "xquad-answers"
    cfg = report["config"]
    assert cfg["limited"] is True and cfg["limit"] == 5 and cfg["top_k"] == 5
    # the two halves partition the 48 articles
    cal, rep = set(cfg["split"]["calibration"]), set(cfg["split"]["report"])
    assert len(cal) == len(rep) == 24 and not cal & rep
    assert cfg["questions"] == {"calibration": 5, "report": 5}
    assert cfg["requests"] == 30  # every question in scope, out of scope and as a near miss
    assert report["ingest"]["paragraphs"] == 240
    assert report["ingest"]["units_stored"] >= 240
    rule = report["answerability"]
    assert rule["mode"] == "built-in" and set(rule["weights"]) >= {"cos", "wcoverage"}
    for half in ("report", "calibration"):
        _check_half(report["evaluations"][half], 5)
    # the question's gold paragraph is in scope, so a real pipeline finds some of them
    assert report["evaluations"]["report"]["citation_recall"] > 0
    lat = report["latency_ms"]["all"]
    for name in ("server_total_ms", "client_wall_ms"):
        p = lat[name]
        assert p["n"] == 30 and p["p95"] >= p["p50"] > 0, (name, p)
    assert lat["client_wall_ms"]["p50"] >= lat["server_total_ms"]["p50"]
    assert set(report["failures"]) == set(report["failure_summary"]["counts"])
    # The near-miss row: each question once, at the offset that leaves its paragraph out.
    for half in ("report", "calibration"):
        near = report["evaluations"][half]["near_miss"]
        assert sum(o["n"] for o in near["offsets"].values()) == 5
        for o in near["offsets"].values():
            assert o["n"] == o.get("refused", 0) + o.get("answered_gold", 0) + o.get("wrong", 0)
        assert 0.0 <= near["worst_ok"] <= 1.0 and near["worst_wrong"] == max(
            o["wrong_rate"] for o in near["offsets"].values()
        )
    assert "ANSWERABILITY min_score=" in stdout
    assert "## Failures (REPORT half)" in md
    _check_relevance_cut(tmp_path, records)


def _check_relevance_cut(tmp_path: Path, records: Path) -> None:
    """bench/answers_relevance.py on the smoke run's records: the cut it chooses keeps the
    CALIBRATION gold passages (at most 0.5 % below it) and its table is monotone."""
    out = tmp_path / "relevance"
    proc = subprocess.run(
        [sys.executable, "-m", "bench.answers_relevance", "--records", str(records)]
        + ["--out", str(out)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    rep = json.loads((out / "answers_relevance.json").read_text())
    assert rep["passages"]["calibration"]["gold"] > 0
    grid = {g["cut"]: g for g in rep["grid"]}
    assert grid[rep["chosen_cut"]]["calibration_gold_below"] <= 0.005
    cuts = sorted(grid)  # lower cut -> fewer passages below
    for k in ("calibration_gold_below", "calibration_other_below", "report_other_below"):
        vals = [grid[c][k] for c in cuts]
        assert vals == sorted(vals) and all(0.0 <= v <= 1.0 for v in vals), k
    assert (out / "answers_relevance.md").read_text().startswith("# Citation relevance cut")


@pytest.mark.slow
@pytest.mark.skipif(NO_DATA is not None, reason=str(NO_DATA))
def test_answers_bench_calibrate_smoke(tmp_path: Path) -> None:
    report, md, stdout = _run(tmp_path, "--calibrate")
    cal = report["calibration"]
    # the in-process replay reproduces every server answer when refusal is off
    rc = cal["replay_check"]
    assert rc["requests"] == 30
    assert rc["text_mismatches"] == 0 and rc["citation_mismatches"] == 0
    assert rc["max_abs_best_cos_diff"] < 1e-3
    chosen = cal["chosen"]
    assert chosen["calibration"]["false_refusal_rate"] <= 0.04
    assert set(chosen["weights"]) == set(cal["features"])
    assert all(_finite(w) for w in chosen["weights"].values()) and _finite(chosen["intercept"])
    # the headline replays the shipped rule; the refit is a comparison column
    from superchargedb.answer.answerability import INTERCEPT, MIN_SCORE, WEIGHTS

    rule = report["answerability"]
    assert rule["mode"] == "built-in (replayed)"
    assert (rule["weights"], rule["intercept"], rule["min_score"]) == (
        WEIGHTS,
        INTERCEPT,
        MIN_SCORE,
    )
    assert f"ANSWERABILITY min_score={MIN_SCORE:g}" in stdout
    assert any(k.startswith("refit on this run's CALIBRATION") for k in report["comparisons"])
    # the frontier is monotone: a higher out-of-scope target never answers more
    ths = [f["threshold"] for f in cal["frontier"]]
    assert ths == sorted(ths)
    for g in cal["localize_grid"]:
        assert 0.0 <= g["gold_passage_share"] <= 1.0
    for half in ("report", "calibration"):
        _check_half(report["evaluations"][half], 5)
    assert report["comparisons"]  # built-in and no-refusal replays on the REPORT half
    for m in report["comparisons"].values():
        _check_half(m, 5)
    assert "## Calibration" in md and "Frontier" in md
