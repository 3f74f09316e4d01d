"""bench/scale.py on ~2k Units: the report's schema and sanity bounds (D-77).

A real run end to end (bulk import, restart, every mode x filter cell, the FTS5 comparison,
plots) on a small slice of the scale data: 240 source documents and 40 real queries (their
embeddings are cached under bench/results/cache after the first run).
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
MODES = ("lexical", "dense", "hybrid")
FILTERS = ("scope/100%", "scope/10%", "scope/1%", "acl/10%", "acl/1%")

# The scale Units are sentences of the eval corpora (SCDB_EVAL_DIR, inherited by the bench).
NO_DATA = evaldir.skip_reason("scifact")
pytestmark = pytest.mark.skipif(NO_DATA is not None, reason=str(NO_DATA))


@pytest.fixture(autouse=True)
def _plots_need_matplotlib() -> None:
    # The report's plots need the bench extra: bash scripts/install_bench.sh
    pytest.importorskip("matplotlib", reason="needs the bench extra: bash scripts/install_bench.sh")


def test_scale_smoke(tmp_path: Path) -> None:
    out = tmp_path / "out"
    cmd = [
        sys.executable,
        "-m",
        "bench.scale",
        "--sizes",
        "2000",
        "--queries",
        "12",
        "--fts5-queries",
        "6",
        "--max-docs",
        "240",
        "--max-queries",
        "40",
        "--out",
        str(out),
        "--data-root",
        str(tmp_path / "data"),
    ]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=1200)
    assert proc.returncode == 0, proc.stderr[-3000:]
    r = json.loads((out / "scale.json").read_text())
    assert r["benchmark"] == "scale" and len(r["sizes"]) == 1
    assert not any(math.isnan(x) for _, x in numbers(r))
    s = r["sizes"][0]
    assert s["units"] == 2000 and s["import"]["created"] == 2000
    assert s["disk_mb"]["total"] > 0 and s["rss_mb_after_search"] > 0
    assert s["lexical_index"]["docs"] == 2000
    for mode in MODES:
        for f in FILTERS:
            cell = s["cells"][f"{mode}/{f}"]
            assert 0 < cell["ms"]["p50"] <= cell["ms"]["p95"] <= cell["ms"]["p99"], (mode, f)
            assert cell["ms"]["n"] == 12 and cell["cpu_ms"]["p50"] > 0
            if mode != "dense":
                assert cell["lexical_backend"] and set(cell["lexical_backend"]) <= {
                    "sparse",
                    "fts5 (phrase)",
                }
        # Every filter level still finds something for the unfiltered queries' vocabulary.
        assert s["cells"][f"{mode}/scope/100%"]["mean_hits"] > 5
    for f in FILTERS:
        assert s["fts5_cells"][f"lexical/{f}"]["lexical_backend"] == ["fts5"]
    assert r["query_embedding_live_ms"]["p50"] > 0
    for name in r["plots"]:
        assert (out / name).stat().st_size > 1000
    md = (out / "scale.md").read_text()
    assert "| 2,000 | scope 1% |" in md and "Goal: hybrid p95" in md
