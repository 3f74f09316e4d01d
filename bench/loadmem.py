"""Memory measurements for bench/load.py: RSS from /proc, resident memory by mapping kind, the
flatness verdict over the overload, and the server's own memory log (``SCDB_MEMORY_LOG``,
src/superchargedb/memstats.py), which says where the memory sits: caches, SQLite, malloc."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import numpy as np

ARENA = 64 * 2**20  # glibc thread arenas: reserved 64 MB-aligned (HEAP_MAX_SIZE on 64-bit)
# Memory-log fields shown in the report (MB unless the name says otherwise).
LOG_FIELDS = (
    "rss_mb",
    "malloc_in_use_mb",
    "malloc_free_mb",
    "malloc_mmap_mb",
    "sqlite_mb",
    "result_cache_mb",
    "candidate_cache_mb",
    "candidate_cache_entries",
    "embed_cache_entries",
    "threads",
    "units_indexed",
    "catalog_db_mb",
    "catalog_wal_mb",
)


def rss_mb(pid: int) -> float | None:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def smaps_summary(pid: int) -> dict[str, float]:
    """Resident MB by kind of mapping: where growth sits (malloc heap, thread arenas, other
    anonymous mappings, files). A thread arena's heap starts on a 64 MB boundary and is mapped
    in two parts (read-write, then PROT_NONE), so it is found by its alignment, not its size."""
    out = {"heap": 0.0, "anon_arenas": 0.0, "anon_other": 0.0, "file": 0.0, "n_anon": 0}
    try:
        with open(f"/proc/{pid}/smaps") as f:
            name, lo = "", 0
            for line in f:
                parts = line.split()
                if "-" in parts[0] and len(parts) >= 5:  # a mapping header
                    name = parts[5] if len(parts) > 5 else ""
                    lo = int(parts[0].split("-")[0], 16)
                elif parts[0] == "Rss:":
                    mb = int(parts[1]) / 1024
                    if name == "[heap]":
                        out["heap"] += mb
                    elif name.startswith("/"):
                        out["file"] += mb
                    elif not name:
                        out["n_anon"] += 1
                        out["anon_arenas" if lo % ARENA == 0 else "anon_other"] += mb
    except OSError:
        pass
    return {k: round(v, 1) for k, v in out.items()}


async def sample_rss(
    pid: int, every: float, series: list[tuple[float, float, str]], phase_name: list[str], t0: float
) -> None:
    while True:
        mb = rss_mb(pid)
        if mb is not None:
            series.append((round(time.monotonic() - t0, 2), round(mb, 1), phase_name[0]))
        await asyncio.sleep(every)


def memory_verdict(
    series: list[tuple[float, float, str]], start: float, end: float, warmup: float
) -> dict[str, Any]:
    """RSS after the warm-up against its level at the end of the warm-up (+-10 %); also the
    deviation from the very start of the overload, so the warm-up's share is visible."""
    pts = [(t, mb) for t, mb, _ in series if start + warmup <= t <= end]
    if len(pts) < 2:
        return {"samples": len(pts), "flat_within_10pct": None}
    first = next((mb for t, mb, _ in series if t >= start), pts[0][1])
    base = float(np.median([mb for _, mb in pts[:3]]))
    lo, hi = min(mb for _, mb in pts), max(mb for _, mb in pts)
    dev = max(hi - base, base - lo) / base
    tail = [mb for t, mb in pts if t >= end - (end - start - warmup) / 4]
    return {
        "samples": len(pts),
        "warmup_s": round(warmup, 1),
        "overload_start_mb": round(first, 1),
        "baseline_mb": round(base, 1),
        "end_mb": round(pts[-1][1], 1),
        "min_mb": round(lo, 1),
        "max_mb": round(hi, 1),
        "last_quarter_mean_mb": round(float(np.mean(tail)), 1) if tail else None,
        "max_deviation_pct": round(dev * 100, 2),
        "max_deviation_from_overload_start_pct": round(
            max(abs(hi - first), abs(first - lo)) / first * 100, 2
        ),
        "flat_within_10pct": dev <= 0.10,
    }


# -- the server's memory log -------------------------------------------------------------------


def read_memlog(path: Path) -> list[dict[str, Any]]:
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return []
    out = []
    for line in lines:
        try:
            out.append(json.loads(line))
        except ValueError:
            continue  # a line cut by the server's exit
    return out


def memlog_window(log: list[dict[str, Any]], wall_start: float, wall_end: float) -> dict[str, Any]:
    """Each field at the first and last sample inside the window, and its change."""
    pts = [s for s in log if wall_start <= s.get("t", 0) <= wall_end]
    if len(pts) < 2:
        return {}
    out: dict[str, Any] = {}
    for k in LOG_FIELDS:
        a, b = pts[0].get(k), pts[-1].get(k)
        if isinstance(a, int | float) and isinstance(b, int | float):
            peak = max(float(s.get(k) or 0.0) for s in pts)
            out[k] = {"start": a, "end": b, "change": round(b - a, 2), "peak": peak}
    return out


def memlog_rows(window: dict[str, Any]) -> str:
    if not window:
        return "(no memory log: run with the server's SCDB_MEMORY_LOG set)\n"
    out = ["| field | at window start | at end | change | peak |", "|---|---|---|---|---|"]
    for k, v in window.items():
        out.append(f"| {k} | {v['start']:g} | {v['end']:g} | {v['change']:+g} | {v['peak']:g} |")
    return "\n".join(out) + "\n"


def plot_memlog(ax: Any, log: list[dict[str, Any]], wall0: float) -> None:
    """The memory log's components over time (same x axis as the RSS plot)."""
    if not log:
        ax.set_title("no memory log")
        return
    t = [s["t"] - wall0 for s in log]
    for k in ("candidate_cache_mb", "result_cache_mb", "sqlite_mb", "malloc_free_mb"):
        ax.plot(t, [s.get(k) or 0.0 for s in log], lw=1, label=k)
    ax.set_xlabel("seconds since start of the load")
    ax.set_ylabel("MB")
    ax.set_title("server memory log: caches, SQLite, free malloc")
    ax.legend(fontsize=7)
