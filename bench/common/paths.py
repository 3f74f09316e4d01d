"""Where the benchmarks read and write inside the checkout."""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "bench" / "results"
# The embedding cache (one .npz per dataset); SCDB_BENCH_CACHE moves it (tests use a temp dir).
CACHE_DIR = Path(os.environ.get("SCDB_BENCH_CACHE") or RESULTS / "cache")
