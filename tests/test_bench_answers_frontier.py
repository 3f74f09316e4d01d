"""The near-miss frontier benchmark's replay of the gate, on a hand-made table (no model)."""

from __future__ import annotations

from typing import Any

import numpy as np

from bench.answers_frontier import _bigrams, frontier, rates


def _row(half: str, kind: str, passed: Any, failed: Any, offset: int = -1) -> dict[str, Any]:
    r = {"half": half, "kind": kind, "offset": offset}
    return {"r": r, "f": {}, "outs": [passed, failed], "label": 0.0, "fit": False}


def test_bigrams_are_adjacent_stems():
    q = "Who was the Panthers' tackle leader?"
    # 4 of the question's 5 pairs: "who was" is the question's own.
    assert _bigrams(q, "Kuechly was the Panthers' tackle leader in 2015.") == 0.8
    assert _bigrams(q, "Their leader made a tackle.") == 0.0  # the words, not their order


def test_rates_refuse_below_the_threshold_and_a_failed_check_below_the_bar():
    table = [
        _row("calibration", "in", (True, True), (True, True)),  # the check passed
        _row("calibration", "in", None, (True, True)),  # the check failed: needs the bar
        _row("calibration", "oos", None, (False, False)),
        _row("calibration", "near", None, (False, False), offset=0),  # wrong when answered
        _row("calibration", "near", (True, False), (True, False), offset=1),  # right anyway
    ]
    scores = np.array([1.0, 1.0, -1.0, 1.0, 1.0])
    low_bar = rates(table, scores, 0.0, 0.5)["calibration"]
    assert low_bar["false_refusals"] == 0.0 and low_bar["oos_refused"] == 1.0
    assert low_bar["near_ok"] == 0.0  # offset 0 answered wrongly: the worst offset
    high_bar = rates(table, scores, 0.0, 2.0)["calibration"]
    assert high_bar["false_refusals"] == 0.5 and high_bar["near_ok"] == 1.0


def test_frontier_keeps_false_refusals_within_the_bound():
    table = [_row("calibration", "in", (True, True), None) for _ in range(20)]
    table += [_row("calibration", "oos", None, None) for _ in range(20)]
    table += [_row("calibration", "near", (False, False), None, offset=0) for _ in range(10)]
    table += [_row("report", k, (True, True), None, offset=0) for k in ("in", "oos", "near")]
    # Answerable questions score 1..2, near misses 0..1: a threshold between them refuses
    # every near miss and no answerable question.
    scores = np.r_[np.linspace(1, 2, 20), np.full(20, -5.0), np.linspace(0, 0.9, 10), 0, 0, 0]
    chosen = frontier(table, scores)["chosen"]
    assert chosen["calibration"]["false_refusals"] <= 0.045
    assert chosen["calibration"]["near_ok"] == 1.0
