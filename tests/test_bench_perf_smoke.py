"""Smoke runs of the performance benchmarks on ADI: bench/search_profile.py (with an A/B
second version) and bench/ingest_throughput.py. They assert the reports' schema and sanity
bounds, not speed: every cell ran, no NaN, p95 >= p50 > 0, the hydrate stage is traced and the
untraced rest is small next to it, the API ingest stored exactly the Units the raw side embedded.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from bench.common import evaldir
from report_numbers import numbers

REPO = Path(__file__).resolve().parent.parent
NO_ADI = evaldir.skip_reason("classic-adi")  # the data comes from SCDB_EVAL_DIR
pytestmark = [pytest.mark.slow, pytest.mark.skipif(NO_ADI is not None, reason=str(NO_ADI))]


def _run(module: str, *args: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", f"bench.{module}", *args],
        capture_output=True,
        text=True,
        timeout=1200,
        cwd=REPO,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]


def test_search_profile_smoke(tmp_path: Path) -> None:
    cells = "hybrid/100%/c1,hybrid/1%/c1,hybrid/100%/c8,live/c8,http/c1"
    _run(
        "search_profile",
        *(
            "--dataset",
            str(evaldir.dataset("classic-adi")),
            "--limit-docs",
            "40",
            "--limit-queries",
            "8",
            "--rounds",
            "1",
        ),
        *("--cells", cells, "--label", "now", "--ab", str(REPO / "src"), "--ab-label", "again"),
        *("--out", str(tmp_path)),
    )
    r = json.loads((tmp_path / "search_profile.json").read_text())
    assert r["labels"] == ["now", "again"]
    assert not [x for _, x in numbers(r) if math.isnan(x)]
    for label in r["labels"]:
        cs = r["runs"][label]["cells"]
        assert set(cs) == set(cells.split(","))
        for name, c in cs.items():
            assert c["wall_ms"]["p95"] >= c["wall_ms"]["p50"] > 0, (label, name)
            assert c["qps"] > 0 and c["mean_hits"] > 0, (label, name)
            assert {"vectorize", "d1_fts", "rrf", "hydrate"} <= set(c["stages_p50_ms"]), name
        one = cs["hybrid/100%/c1"]
        # Every stage is traced: what is left is request parsing and response building.
        assert one["untraced_ms"]["p50"] < one["wall_ms"]["p50"] / 2
        assert (
            cs["live/c8"]["stages_p50_ms"]["embed"] > cs["hybrid/100%/c8"]["stages_p50_ms"]["embed"]
        )
    md = (tmp_path / "search_profile.md").read_text()
    assert "hybrid/100%/c1" in md and "again" in md


def test_ingest_throughput_smoke(tmp_path: Path) -> None:
    _run(
        "ingest_throughput",
        *(
            "--dataset",
            str(evaldir.dataset("classic-adi")),
            "--rounds",
            "2",
            "--batch",
            "4",
            "--breakdown",
        ),
        *("--out", str(tmp_path)),
    )
    r = json.loads((tmp_path / "ingest_throughput.json").read_text())
    t = r["totals"]
    assert t["docs"] == 8 and t["units"] >= 8
    assert t["api_units_per_s"] > 0 and t["raw_texts_per_s"] > 0
    assert 0 < t["ratio"] < 5 and not [x for _, x in numbers(r) if math.isnan(x)]
    assert [x["raw_first"] for x in r["rounds"]] == [False, True]  # the order alternates
    assert all(x["units"] == x["raw_texts"] for x in r["rounds"])
    b = r["breakdown_s"]
    assert b["embed"] > 0 and b["total"] >= b["embed"]
    assert r["config"]["onnxruntime"]["intra_op_num_threads"] >= 1
    assert "ratio" in (tmp_path / "ingest_throughput.md").read_text()
