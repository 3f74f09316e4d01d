"""The SciFact benchmark end to end on a small slice: real server, real HTTP, real model."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from bench.common import evaldir

REPO = Path(__file__).resolve().parent.parent
NO_DATA = evaldir.skip_reason("scifact")  # SCDB_EVAL_DIR, inherited by the bench
MODES = ("lexical", "dense", "hybrid")


def _finite(x: object) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)


@pytest.mark.slow
@pytest.mark.skipif(NO_DATA is not None, reason=str(NO_DATA))
def test_scifact_bench_smoke(tmp_path: Path) -> None:
    out = tmp_path / "results"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench.scifact",
            "--limit-docs",
            "200",
            "--limit-queries",
            "20",
            "--out",
            str(out),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    report = json.loads((out / "scifact.json").read_text())
    assert (out / "scifact.md").read_text().startswith("# SciFact retrieval benchmark")

    assert report["benchmark"] == "scifact"
    assert report["config"]["limited"] is True
    assert report["config"]["top_k"] == 1000
    ing = report["ingest"]
    assert ing["docs"] == 200
    assert ing["units_stored"] >= ing["docs"]
    assert ing["docs_per_s"] > 0 and ing["units_per_s"] >= ing["docs_per_s"]
    assert 0 < report["queries_scored"] <= 20

    assert set(report["modes"]) == set(MODES)
    for mode in MODES:
        m = report["modes"][mode]
        for key in ("ndcg@10", "recall@100", "mrr@10"):
            assert _finite(m[key]), (mode, key, m[key])
            assert 0.0 <= m[key] <= 1.0, (mode, key, m[key])
        assert 0.0 < m["ndcg@10"] <= 1.0, mode
        assert m["queries"] == report["queries_scored"]
        assert len(m["per_query_ndcg@10"]) == m["queries"]
        lat = m["latency_ms"]
        for name in ("client_wall", "server_total"):
            p = lat[name]
            assert all(_finite(p[k]) for k in ("p50", "p95", "mean")), (mode, name, p)
            assert p["p95"] >= p["p50"] > 0, (mode, name, p)
        # the client waits for the server, so its wall time bounds the server's total
        assert lat["client_wall"]["p50"] >= lat["server_total"]["p50"]
        if mode == "lexical":
            assert lat["embed"] is None  # no query embedding in lexical mode
        else:
            assert lat["embed"]["p95"] >= lat["embed"]["p50"] > 0, mode
    for b in report["baselines"]:
        assert b["compare_to"] in MODES and 0 < b["ndcg@10"] < 1
