"""Schema migrations: applied once, also when several processes open a fresh catalog together."""

from __future__ import annotations

import multiprocessing as mp
import sqlite3
from pathlib import Path

from superchargedb.storage.sqlite.migrations import MIGRATIONS, migrate


def _open(path: str, start: object) -> list[str]:
    from superchargedb.storage.sqlite.catalog import Catalog

    start.wait()  # type: ignore[attr-defined]
    cat = Catalog(Path(path))
    names = [r[0] for r in cat.reader().execute("SELECT name FROM schema_migrations")]
    cat.close()
    return names


def test_migrate_is_idempotent(tmp_path):
    conn = sqlite3.connect(tmp_path / "c.db", isolation_level=None)
    assert migrate(conn) == [name for name, _ in MIGRATIONS]
    assert migrate(conn) == []
    rows = conn.execute("SELECT name FROM schema_migrations ORDER BY name").fetchall()
    assert [r[0] for r in rows] == sorted(name for name, _ in MIGRATIONS)


def test_processes_opening_a_fresh_catalog_together_all_succeed(tmp_path):
    """A server and workers starting at once: each sees every migration applied exactly once
    (before the re-check inside the write transaction, the losers failed on 'table exists')."""
    ctx = mp.get_context("spawn")
    # One manager and one pool for the three races: spawning them per race cost most of the
    # time (each spawn imports the package). The barrier makes all four open at the same
    # instant: without the catalog's retry of PRAGMA journal_mode=WAL the losers failed with
    # "database is locked".
    with ctx.Manager() as mgr, ctx.Pool(4) as pool:
        for attempt in range(3):
            path = str(tmp_path / f"race{attempt}.db")
            start = mgr.Barrier(4)
            pending = [pool.apply_async(_open, (path, start)) for _ in range(4)]
            results = [p.get(timeout=120) for p in pending]
            want = sorted(name for name, _ in MIGRATIONS)
            assert all(sorted(r) == want for r in results), results
