"""`bench/peers.py --scale` on 2,000 Units: the latency-only report's schema and sanity bounds.

The 100k / 1M runs are benchmarks (hours here), not tests; this checks that the --scale path
still runs end to end for every system: each peer ran, every filtered cell holds only hits inside
its filter, p99 >= p95 >= p50 > 0, the faster-peer ratios are the quotients of the cells they
name, no NaN, and the report files and plots are written.
"""

from __future__ import annotations

import importlib.util
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from bench.common import evaldir
from report_numbers import numbers

REPO = Path(__file__).resolve().parent.parent
MISSING = [m for m in ("lancedb", "txtai", "matplotlib") if importlib.util.find_spec(m) is None]
SYSTEMS = ("ours", "lancedb", "txtai")
# The scale Units are sentences of the eval corpora (SCDB_EVAL_DIR, inherited by the bench).
NO_DATA = evaldir.skip_reason("scifact")
CELLS = ("hybrid/1%/c1", "hybrid/10%/c1", "hybrid/100%/c1", "hybrid/100%/c8")


@pytest.mark.slow
@pytest.mark.skipif(NO_DATA is not None, reason=str(NO_DATA))
@pytest.mark.skipif(
    bool(MISSING),
    reason=f"bench extra not installed ({', '.join(MISSING)} missing):"
    " run scripts/install_bench.sh",
)
def test_peers_scale_smoke(tmp_path: Path) -> None:
    out = tmp_path / "out"
    (tmp_path / "work").mkdir()
    cmd = [sys.executable, "-m", "bench.peers", "--scale", "2000"]
    cmd += ["--limit-queries", "10", "--rounds", "1", "--out", str(out), "--max-docs", "240"]
    cmd += ["--work-dir", str(tmp_path / "work"), "--cache-dir", str(tmp_path / "cache")]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=1200)
    assert proc.returncode == 0, proc.stderr[-3000:]
    r = json.loads((out / "peers_scale2000.json").read_text())
    assert r["dataset"]["scale"] == 2000 and r["dataset"]["units"] == 2000
    for s in SYSTEMS:
        rep = r["systems"][s]
        assert rep["ran"] is True, (s, rep)
        assert rep["docs"] == 2000, s
        for cell in CELLS:
            p = rep["latency_ms"][cell]
            assert p["p99"] >= p["p95"] >= p["p50"] > 0, (s, cell, p)
            assert p["n"] > 0, (s, cell)
            assert rep["filter_violations"][cell] == 0, (s, cell)
    for key, v in r["vs_faster_peer"].items():
        cell, pct = key.split(":")
        assert v["ours_ms"] == r["systems"]["ours"]["latency_ms"][cell][pct], key
        assert v["peer_ms"] == r["systems"][v["peer"]]["latency_ms"][cell][pct], key
        assert v["ratio"] == pytest.approx(v["ours_ms"] / v["peer_ms"], abs=1e-3), key
    nan = [p for p, x in numbers(r) if math.isnan(x) or math.isinf(x)]
    assert not nan, nan
    md = (out / "peers_scale2000.md").read_text()
    assert "Against the faster peer" in md
    # The cells run ours like the peers (no snippets); our default is measured paired, apart.
    assert "snippets: false" in r["systems"]["ours"]["config"]["hits"]
    snip = r["snippets"]
    assert snip["n"] == 10 and snip["with_ms"]["p50"] > 0 and snip["without_ms"]["p50"] > 0
    assert "Our default hits, with snippets" in md
    for png in r["plots"]:
        assert (out / png).stat().st_size > 1000, png
