"""Latency percentiles and retrieval metrics over documents."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

import numpy as np


def pct(values: Sequence[float]) -> dict[str, float] | None:
    if not values:
        return None
    a = np.asarray(values, dtype=float)
    return {
        "p50": round(float(np.percentile(a, 50)), 3),
        "p95": round(float(np.percentile(a, 95)), 3),
        "p99": round(float(np.percentile(a, 99)), 3),
        "mean": round(float(a.mean()), 3),
        "n": len(values),
    }


def score(rankings: dict[str, list[str]], qrels: dict[str, dict[str, int]]) -> dict[str, float]:
    from superchargedb.evaluation import mrr_at_k, ndcg_at_k, recall_at_k

    qids = list(rankings)
    out = {
        "ndcg@10": statistics.fmean(ndcg_at_k(rankings[q], qrels[q], 10) for q in qids),
        "recall@100": statistics.fmean(recall_at_k(rankings[q], qrels[q], 100) for q in qids),
        "mrr@10": statistics.fmean(mrr_at_k(rankings[q], qrels[q], 10) for q in qids),
    }
    for k, v in out.items():
        if math.isnan(v):
            raise RuntimeError(f"{k} is NaN")
    return {k: round(v, 4) for k, v in out.items()}
