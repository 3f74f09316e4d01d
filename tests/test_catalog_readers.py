"""Read connections of retired threads are closed (memory and file handles stay bounded).

Thread pools retire idle workers (anyio after 10 s) and start new ones under the next burst; each
thread opens its own reader. Keeping every reader ever opened leaked a connection, its file
handles and its page cache per retired thread, found by bench/load.py's overload phase.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import superchargedb  # noqa: F401  (imports onnxruntime before usearch)
from superchargedb.storage.sqlite.catalog import Catalog


def open_handles(path: Path) -> int:
    return sum(
        os.path.realpath(f"/proc/self/fd/{fd}") == str(path) for fd in os.listdir("/proc/self/fd")
    )


def test_readers_of_finished_threads_are_closed(tmp_path: Path) -> None:
    db = (tmp_path / "catalog.db").resolve()
    cat = Catalog(db, "FULL")
    try:
        before = open_handles(db)

        def read() -> None:
            assert cat.reader().execute("SELECT count(*) FROM units").fetchone() is not None

        for _ in range(40):
            t = threading.Thread(target=read)
            t.start()
            t.join()
        assert open_handles(db) <= before + 1
        # A live thread keeps its reader, and close() still closes it.
        read()
        assert open_handles(db) == before + 1
    finally:
        cat.close()
    assert open_handles(db) == 0


def test_reader_memory_map_is_configurable(tmp_path: Path) -> None:
    """Readers map the file for their reads when asked (SCDB_SQLITE_READER_MMAP_MB), not
    otherwise; the writer never does."""
    db = (tmp_path / "catalog.db").resolve()
    on, off = Catalog(db, "FULL", reader_mmap_mb=64), Catalog(db, "FULL", reader_mmap_mb=0)
    try:
        assert on.reader().execute("PRAGMA mmap_size").fetchone()[0] == 64 * 2**20
        assert off.reader().execute("PRAGMA mmap_size").fetchone()[0] == 0
        with on.write() as w:
            assert w.execute("PRAGMA mmap_size").fetchone()[0] == 0
    finally:
        on.close()
        off.close()
