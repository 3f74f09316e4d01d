"""bench/load.py end to end on a short run: real server subprocess, real HTTP, real model.

Tight limits are passed to the server so that both kinds of refusal occur in a few seconds:
the smoke then checks that each carries Retry-After, besides the report's schema."""

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
LEVEL_KEYS = {
    "name",
    "workers",
    "seconds",
    "requests",
    "throughput_per_s",
    "ok_per_s",
    "latency_ok_ms",
    "latency_all_ms",
    "statuses",
    "rate_429",
    "rate_503",
    "rate_other_4xx",
    "failures",
    "failure_rate",
    "timeouts",
    "server_errors_non_503",
    "shed",
    "retry_after_share",
    "by_op",
    "latency_shed_ms",
    "probe_ms",
    "error_types",
}


@pytest.mark.slow
@pytest.mark.skipif(NO_DATA is not None, reason=str(NO_DATA))
def test_load_bench_smoke(tmp_path: Path) -> None:
    out = tmp_path / "results"
    cmd = [
        sys.executable, "-m", "bench.load", "--levels", "1,4", "--level-seconds", "4",
        "--overload-seconds", "15", "--scifact-docs", "40", "--principals", "2",
        "--rss-interval", "1", "--memory-log-interval", "1", "--out", str(out),
        "--server-env", "SCDB_INFLIGHT_SEARCH=1", "--server-env", "SCDB_QUEUE_SEARCH=0",
        "--server-env", "SCDB_INFLIGHT_ANSWER=1", "--server-env", "SCDB_QUEUE_ANSWER=0",
        "--server-env", "SCDB_QUEUE_WAIT_S=0.5",
        "--server-env", "SCDB_RATE_KEY_RPS=4", "--server-env", "SCDB_RATE_KEY_BURST=2",
    ]  # fmt: skip
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=1500)
    assert proc.returncode == 0, proc.stderr[-4000:]
    rep = json.loads((out / "load.json").read_text())
    assert (out / "load.md").read_text().startswith("# Load benchmark")
    assert rep["benchmark"] == "load" and rep["config"]["levels"] == [1, 4]
    assert rep["setup"]["scifact_docs"] == 40 and rep["setup"]["units_stored"] >= 40

    rows = [*rep["levels"], rep["overload"]]
    assert [r["workers"] for r in rows] == [1, 4, 4]
    for r in rows:
        assert set(r) >= LEVEL_KEYS, LEVEL_KEYS - set(r)
        assert r["requests"] > 0 and r["ok_per_s"] > 0
        assert r["server_errors_non_503"] == 0, r["statuses"]
        assert r["timeouts"] == 0 and r["failures"] == 0, r["statuses"]
        lat = r["latency_ok_ms"]
        assert 0 < lat["p50"] <= lat["p95"] <= lat["p99"] <= lat["max"]
        assert math.isclose(sum(r["statuses"].values()), r["requests"]) and set(r["by_op"]) == {
            "search",
            "answer",
            "ingest",
        }
        if r["shed"]:
            assert r["retry_after_share"] == 1.0
            assert 0 < r["latency_shed_ms"]["p50"] <= r["latency_shed_ms"]["max"]
        assert r["probe_ms"]["p50"] is not None and r["probe_ms"]["p50"] > 0
        assert r["error_types"] == {}
    # The tight limits make both refusals happen (a rate-limited request no longer takes a
    # slot, so the slots themselves are one with no queue); each said when to come back.
    statuses = [r["statuses"] for r in rows]
    assert sum(s.get("429", 0) for s in statuses) > 0
    assert sum(s.get("503", 0) for s in statuses) > 0

    mem = rep["overload"]["memory"]
    assert mem["samples"] >= 5 and 0 < mem["min_mb"] <= mem["baseline_mb"] <= mem["max_mb"]
    assert isinstance(mem["flat_within_10pct"], bool)
    assert len(rep["rss_series"]) >= 10
    # The server's own memory log: where the memory sits, over the overload window too.
    assert len(rep["memory_log"]) >= 5
    assert all(x["rss_mb"] > 0 and "candidate_cache_mb" in x for x in rep["memory_log"])
    win = mem["log_window"]
    assert win["rss_mb"]["peak"] >= win["rss_mb"]["start"] > 0
    assert win["candidate_cache_mb"]["peak"] <= 128  # SCDB_CANDIDATE_CACHE_MAX_BYTES

    cons = rep["consistency"]
    assert cons["violations"] == [], cons["violations"]
    assert cons["reads"] > 0 and cons["read_after_ack_checks"] > 0 and cons["batches_acked"] > 0

    v = rep["verdict"]
    assert v["server_alive"] and v["no_failures"] and v["no_timeouts"] and v["no_5xx_but_503"]
    assert v["retry_after_on_all_429_503"] and v["consistent"]
    if "plot" not in rep:  # the note says why there is no plot (matplotlib missing)
        assert (out / "load.png").stat().st_size > 10_000
