"""The memory log and the malloc tuning used by ``superchargedb serve`` (memstats.py)."""

from __future__ import annotations

import json
import sqlite3
import sys
import time
from pathlib import Path

import pytest

from superchargedb import memstats

glibc = pytest.mark.skipif(
    not sys.platform.startswith("linux") or memstats.malloc_stats() == {},
    reason="glibc malloc only",
)


@glibc
def test_sample_reports_rss_malloc_sqlite_and_gauges() -> None:
    conn = sqlite3.connect(":memory:")  # SQLite's allocator counts its memory
    conn.execute("CREATE TABLE t(x)")
    s = memstats.sample(lambda: {"cache_mb": 1.5})
    conn.close()
    assert s["rss_mb"] > 0 and s["threads"] >= 1
    assert s["malloc_in_use_mb"] > 0 and s["malloc_free_mb"] >= 0
    assert s["sqlite_mb"] is not None and s["sqlite_mb"] >= 0
    assert s["cache_mb"] == 1.5


def test_a_failing_gauge_does_not_stop_the_sample() -> None:
    def broken() -> dict[str, float]:
        raise RuntimeError("boom")

    assert "boom" in memstats.sample(broken)["gauge_error"]


def test_memory_log_appends_json_lines(tmp_path: Path) -> None:
    path = tmp_path / "mem.jsonl"
    log = memstats.MemoryLog(path, 0.05, lambda: {"entries": 3.0})
    log.start()
    deadline = time.monotonic() + 10
    while (
        time.monotonic() < deadline
        and len(path.read_text().splitlines() if path.exists() else []) < 3
    ):
        time.sleep(0.05)
    log.stop()
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    assert len(lines) >= 3
    assert all(x["entries"] == 3.0 and "rss_mb" in x for x in lines)


@glibc
def test_malloc_trim_and_trimmer_run() -> None:
    blocks = [bytearray(64 * 1024) for _ in range(2000)]  # ~128 MB below the mmap threshold
    del blocks
    memstats.trim()  # returns whether memory was released; must not fail either way
    t = memstats.Trimmer(0.01)
    t.start()
    time.sleep(0.05)
    t.stop()
    memstats.Trimmer(0).start()  # 0 = off: no thread


@glibc
def test_arena_cap_applies_unless_the_environment_sets_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MALLOC_ARENA_MAX", raising=False)
    assert memstats.limit_arenas(0) is False  # 0 = glibc's default, nothing set
    assert memstats.limit_arenas(8) is True  # glibc's default cap on this machine's cores or more
    monkeypatch.setenv("MALLOC_ARENA_MAX", "4")
    assert memstats.limit_arenas(2) is False  # glibc read the environment itself


def test_freeze_heap_keeps_collecting_new_garbage() -> None:
    """Objects alive at the freeze leave the collector's walk; cycles made later are still
    collected, and garbage that existed before the freeze is collected first, not frozen."""
    import gc
    import weakref

    class Node:
        def __init__(self) -> None:
            self.me = self

    before = Node()
    gone_before = weakref.ref(before)
    del before  # a cycle: only the cyclic collector frees it
    try:
        frozen = memstats.freeze_heap()
        assert frozen > 0 and gc.get_freeze_count() > 0  # frozen ones freed since: fewer
        assert gone_before() is None  # collected by freeze_heap, not frozen
        after = Node()
        gone_after = weakref.ref(after)
        del after
        gc.collect()
        assert gone_after() is None
    finally:
        gc.unfreeze()
