"""The pure helpers of the stack benchmarks (bench/stack_scale.py, bench/common/cgroups.py): how a
run's CPU counters are read and how rounds and goals are summarized. Nothing here is timed."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from bench.common import cgroups
from bench.stack_scale import goals, settings_of, summarize


def test_cpu_stat_lines_parse_and_odd_lines_are_skipped() -> None:
    text = "nr_periods 120\nnr_throttled 7\nthrottled_time 81234567\nbogus\nusage_usec -1\n"
    assert cgroups.parse_stat(text) == {
        "nr_periods": 120,
        "nr_throttled": 7,
        "throttled_time": 81234567,
        "usage_usec": -1,
    }


def test_proc_stat_fields_survive_a_command_name_with_spaces_and_parens() -> None:
    raw = "4242 (weird ) name) S 1 4242 4242 0 -1 4194560 10 0 0 0 17 5 0 0 20 0 3 0 99 1 2\n"
    fields = cgroups.proc_stat_fields(raw)
    assert fields[0] == "S"  # the state, field 3
    assert fields[2] == "4242"  # the process group, field 5
    assert (fields[11], fields[12]) == ("17", "5")  # utime, stime: fields 14 and 15


def test_proc_cpu_counts_a_busy_child_and_group_pids_finds_it() -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", "import time\nt = time.time()\nwhile time.time() - t < 30: pass"],
        start_new_session=True,
    )
    try:
        assert cgroups.group_pids(child.pid) == [child.pid]  # its own session and group
        used = 0.0
        deadline = time.monotonic() + 20  # a spinning process gets CPU, however loaded the box
        while used < 0.1 and time.monotonic() < deadline:
            time.sleep(0.1)
            used = cgroups.proc_cpu_s(child.pid) or 0.0
        assert used >= 0.1
    finally:
        child.kill()
        child.wait()
    assert cgroups.proc_cpu_s(child.pid) is None  # gone
    assert os.getpid() in cgroups.group_pids(os.getpgid(0))


def test_settings_of_maps_environment_names_to_setting_names() -> None:
    env = {"SCDB_DATABASE_URL": "postgresql://x", "SCDB_S3_BUCKET": "b"}
    assert settings_of(env) == {"database_url": "postgresql://x", "s3_bucket": "b"}


def _run(cfg: str, rps: float, p50: float, statuses: dict[str, int]) -> dict[str, object]:
    return {
        "config": cfg,
        "rps": rps,
        "api_cpu_ms_per_request": 10.0,
        "cpu_ms_per_request": 12.0,
        "latency_ms": {"p50": p50, "p95": 2 * p50},
        "statuses": statuses,
    }


def test_summary_takes_the_median_of_rounds_and_counts_non_200s() -> None:
    runs = [
        _run("stack x1", 10.0, 100.0, {"200": 300}),
        _run("stack x1", 12.0, 90.0, {"200": 360, "503": 2}),
        _run("stack x1", 30.0, 80.0, {"200": 900}),
        _run("stack x2", 20.0, 50.0, {"200": 600, "ConnectionResetError": 1}),
    ]
    s = summarize(runs)
    assert list(s) == ["stack x1", "stack x2"]
    assert s["stack x1"]["rps"] == 12.0 and s["stack x1"]["latency_p50_ms"] == 90.0
    assert s["stack x1"]["non_200"] == 2 and s["stack x1"]["rounds"] == 3
    assert s["stack x2"]["non_200"] == 1


def test_goals_compare_the_stack_with_the_embedded_default() -> None:
    def cell(wall: float, inner: float) -> dict[str, object]:
        return {"wall_ms": {"p50": wall}, "server_less_embed_ms": {"p50": inner}}

    lat = {"embedded": {"1%": cell(20.0, 5.0)}, "stack": {"1%": cell(41.0, 20.0)}}
    thr = {
        "all filters": {"stack x1": {"rps": 10.0}, "stack x2": {"rps": 15.0}},
        "1% filter": {"stack x1": {"rps": 10.0}, "stack x2": {"rps": 17.0}},
    }
    g = goals(lat, thr)
    assert g["p50_ratio_1pct"] == 2.05 and not g["p50_ratio_1pct_met"]
    assert g["p50_ratio_1pct_less_embed"] == 4.0
    assert g["two_vs_one_process"] == {
        "all filters": {"ratio": 1.5, "met": False},
        "1% filter": {"ratio": 1.7, "met": True},
    }
