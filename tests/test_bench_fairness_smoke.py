"""bench/fairness.py end to end on a short run: real server subprocess, raw-socket flood."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.slow


def test_fairness_smoke(tmp_path):
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench.fairness",
            "--seconds",
            "4",
            "--baseline-seconds",
            "3",
            "--out",
            str(tmp_path),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    rep = json.loads((tmp_path / "fairness.json").read_text())
    assert (tmp_path / "fairness.md").read_text().startswith("# Fairness")
    assert rep["verdict"]["server_alive"] and rep["verdict"]["victim_no_503"]
    for cls in ("search", "answer", "ingest", "other"):
        assert rep["flooded"][cls]["requests"] > 0 and "p50_ms" in rep["unloaded"][cls]
    # The flood ran in every class (stalled bodies are only answered after SCDB_BODY_TIMEOUT_S).
    busy = {k.split(",")[0] for k in rep["flood"]["statuses"] if "back_to_back" in k}
    assert busy == {"search", "answer", "ingest", "other"}, rep["flood"]
