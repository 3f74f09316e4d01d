"""Where the server's memory sits: a debug log for finding growth (``SCDB_MEMORY_LOG``).

RSS alone cannot tell a leak from a cache filling or from allocator fragmentation, so each
sample puts side by side: RSS, what glibc malloc holds in use and free across all arenas
(``mallinfo2``: free bytes it keeps are fragmentation, not data), what SQLite holds (page caches
of every connection, ``sqlite3_memory_used``), the thread count (a reader connection and its page
cache live per thread), the sizes of the server's own caches, and, when tracemalloc runs
(``PYTHONTRACEMALLOC=1``), the Python allocation sites that grew most since the first sample.

One JSON object per line, appended every ``SCDB_MEMORY_LOG_INTERVAL_S``; ``bench/load.py
--memory-log`` turns it on and summarizes first vs last sample in its report.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import json
import logging
import os
import threading
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)


class _MallInfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena",  # bytes from sbrk (main arena)
            "ordblks",
            "smblks",
            "hblks",
            "hblkhd",  # bytes in mmapped chunks
            "usmblks",
            "fsmblks",
            "uordblks",  # bytes in use
            "fordblks",  # free bytes held by malloc
            "keepcost",
        )
    ]


def _lib(name: str) -> Any:
    path = ctypes.util.find_library(name)
    if path is None:
        return None
    try:
        return ctypes.CDLL(path)  # the copy already loaded (dlopen shares it)
    except OSError:
        return None


_LIBC = _lib("c")
_SQLITE = _lib("sqlite3")


def malloc_stats() -> dict[str, float]:
    """glibc's view of the heap in MB (empty off glibc)."""
    fn = getattr(_LIBC, "mallinfo2", None)
    if fn is None:
        return {}
    fn.restype = _MallInfo2
    mi = fn()
    mb = 1024 * 1024
    return {
        "malloc_in_use_mb": round((mi.uordblks + mi.hblkhd) / mb, 1),
        "malloc_free_mb": round(mi.fordblks / mb, 1),
        "malloc_mmap_mb": round(mi.hblkhd / mb, 1),
    }


def sqlite_mb() -> float | None:
    """Bytes SQLite has allocated (all connections: page caches, statements, schema)."""
    fn = getattr(_SQLITE, "sqlite3_memory_used", None)
    if fn is None:
        return None
    fn.restype = ctypes.c_int64
    return round(int(fn()) / 2**20, 1)


def proc_status() -> dict[str, float]:
    out: dict[str, float] = {}
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    out["rss_mb"] = round(int(line.split()[1]) / 1024, 1)
                elif line.startswith("Threads:"):
                    out["threads"] = int(line.split()[1])
    except OSError:
        pass
    return out


def sample(gauges: Callable[[], dict[str, float]] | None = None) -> dict[str, Any]:
    s: dict[str, Any] = {"t": round(time.time(), 1), **proc_status(), **malloc_stats()}
    s["sqlite_mb"] = sqlite_mb()
    s["py_threads"] = threading.active_count()
    if gauges is not None:
        try:
            s.update(gauges())
        except Exception as e:  # a gauge must not stop the log
            s["gauge_error"] = repr(e)
    if tracemalloc.is_tracing():
        s["tracemalloc_mb"] = round(tracemalloc.get_traced_memory()[0] / 2**20, 1)
    return s


class MemoryLog:
    """A daemon thread appending :func:`sample` lines (plus tracemalloc growth) to a file."""

    def __init__(
        self,
        path: Path,
        interval_s: float,
        gauges: Callable[[], dict[str, float]] | None = None,
        top: int = 15,
    ) -> None:
        self.path, self.interval_s, self.gauges, self.top = path, interval_s, gauges, top
        self._stop = threading.Event()
        self._first: tracemalloc.Snapshot | None = None
        self._thread = threading.Thread(target=self._loop, name="scdb-memlog", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _growth(self) -> list[str]:
        snap = tracemalloc.take_snapshot().filter_traces(
            [tracemalloc.Filter(False, tracemalloc.__file__)]
        )
        if self._first is None:
            self._first = snap
            return []
        stats = snap.compare_to(self._first, "lineno")[: self.top]
        return [f"{st.size_diff / 2**20:+.2f} MB {st.count_diff:+d} {st.traceback}" for st in stats]

    def _loop(self) -> None:
        while True:
            try:
                s = sample(self.gauges)
                if tracemalloc.is_tracing():
                    s["tracemalloc_growth"] = self._growth()
                with open(self.path, "a") as f:
                    f.write(json.dumps(s) + "\n")
            except Exception:
                log.exception("memory log sample failed")
            if self._stop.wait(self.interval_s):
                return


# -- glibc malloc tuning (``superchargedb serve``) -------------------------------------------

_M_ARENA_MAX = -8  # mallopt parameter number (malloc.h)


def limit_arenas(n: int) -> bool:
    """Cap glibc's malloc arenas at ``n`` (0: leave glibc's default of 8 per core).

    Each thread that meets a locked arena gets its own, up to 8 x cores; under load the 40
    worker threads spread short-lived allocations (request bodies, JSON, numpy temporaries)
    over many arenas, whose freed space stays resident and is reused by none of the others. Set
    before the server starts its threads, like ``MALLOC_ARENA_MAX`` in the environment (which
    glibc reads itself and which this leaves alone when set)."""
    if n <= 0 or "MALLOC_ARENA_MAX" in os.environ:
        return False
    fn = getattr(_LIBC, "mallopt", None)
    return bool(fn is not None and fn(_M_ARENA_MAX, int(n)) == 1)


def trim() -> bool:
    """Give free heap memory back to the OS (every arena; glibc's ``malloc_trim(0)``)."""
    fn = getattr(_LIBC, "malloc_trim", None)
    return bool(fn is not None and fn(0) == 1)


class Trimmer:
    """A daemon thread calling :func:`trim` every ``interval_s`` (glibc returns freed memory
    at the top of the main heap only; free pages inside arenas stay resident until trimmed)."""

    def __init__(self, interval_s: float) -> None:
        self.interval_s = interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="scdb-malloc-trim", daemon=True)

    def start(self) -> None:
        if self.interval_s > 0 and getattr(_LIBC, "malloc_trim", None) is not None:
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            trim()


# -- cyclic garbage collector (``superchargedb serve``) ----------------------------------------


def freeze_heap() -> int:
    """Put every object alive now out of the cyclic collector's reach (``gc.freeze``); returns
    how many.

    A full collection walks every tracked object: after opening a 100k-Unit data dir that cost
    74-90 ms of CPU each time (measured), a pause for whichever request triggered it. What a
    Service holds once open (index dictionaries, modules, caches' structures) lives as long as
    the process; frozen, a full collection took 0.3 ms. Garbage is collected first, so none is
    frozen; objects created later are collected as before, and frozen ones are still freed by
    reference counting when dropped.
    """
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()
