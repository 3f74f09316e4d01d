"""The SQLite catalog: the source of truth (D-90).

One writer connection guarded by a lock (every write is an explicit ``BEGIN IMMEDIATE``
transaction, D-45); one reader connection per thread, so reads never hold the writer.

Each connection has its own page cache, so the catalog's memory is ``writer_cache_mb +
threads x reader_cache_mb`` at most (``SCDB_SQLITE_CACHE_MB``, ``SCDB_SQLITE_READER_CACHE_MB``).
Readers get a small one: there is one per worker thread (up to 40 under load), the OS page cache
already holds the file for all of them, and 64 MB each let the catalog alone grow towards
2.5 GB as every thread touched more of a growing file.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
import time
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ... import faults
from .migrations import migrate


class _Reader:
    """A thread's read connection, closed when the thread ends and drops its thread-local.

    Worker pools retire idle threads (anyio after 10 s): a list holding every reader ever opened
    kept each dead thread's connection, its file handles and page cache (up to 64 MB) forever.
    """

    __slots__ = ("conn", "__weakref__")

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.conn.close()


def _set_wal(conn: sqlite3.Connection, wait_s: float = 30.0) -> None:
    """``journal_mode=WAL``, retried while another process holds the lock it needs.

    Changing the journal mode of a fresh database takes an exclusive lock, and SQLite answers
    "database is locked" at once (no busy handler) to the loser of a simultaneous open: a
    server and its workers starting together on a new data dir failed there.
    """
    deadline = time.monotonic() + wait_s
    delay = 0.005
    while True:
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc).lower() or time.monotonic() > deadline:
                raise
            time.sleep(delay)
            delay = min(delay * 2, 0.2)


def _connect(path: Path, synchronous: str, cache_mb: int) -> sqlite3.Connection:
    conn = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False, timeout=30)
    conn.row_factory = sqlite3.Row
    _set_wal(conn)
    conn.execute(f"PRAGMA synchronous={synchronous}")
    conn.execute("PRAGMA foreign_keys=ON")
    conn.execute("PRAGMA busy_timeout=30000")
    conn.execute("PRAGMA wal_autocheckpoint=1000")
    conn.execute("PRAGMA journal_size_limit=67108864")
    conn.execute(f"PRAGMA cache_size=-{int(cache_mb) * 1024}")  # negative: KiB, not pages
    return conn


class Catalog:
    """Connections to ``catalog.db``; SQL for each concept lives in its own module."""

    def __init__(
        self,
        path: Path,
        synchronous: str = "FULL",
        *,
        writer_cache_mb: int = 64,
        reader_cache_mb: int = 8,
        reader_mmap_mb: int = 0,
    ) -> None:
        self.path = path
        self._synchronous = synchronous
        self._reader_cache_mb = reader_cache_mb
        self._reader_mmap_mb = reader_mmap_mb
        self._writer = _connect(path, synchronous, writer_cache_mb)
        self._write_lock = threading.RLock()
        self._local = threading.local()
        self._readers: weakref.WeakSet[_Reader] = weakref.WeakSet()
        self._readers_lock = threading.Lock()
        migrate(self._writer)

    def reader(self) -> sqlite3.Connection:
        """This thread's read connection (autocommit: each statement sees the latest commit)."""
        r = getattr(self._local, "reader", None)
        if r is None:
            conn = _connect(self.path, self._synchronous, self._reader_cache_mb)
            conn.execute("PRAGMA query_only=ON")
            if self._reader_mmap_mb > 0:
                # Reads through a shared memory map instead of a read() into this connection's
                # small page cache per page: a search's random hit rows (the re-check and the
                # hydration, 200 rowid lookups) cost half the CPU. Pages are the OS cache's,
                # shared by every reader thread; writes still go through the WAL.
                conn.execute(f"PRAGMA mmap_size={int(self._reader_mmap_mb) * 2**20}")
            r = self._local.reader = _Reader(conn)
            with self._readers_lock:
                self._readers.add(r)
        return r.conn

    @contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """One serialized write transaction; commits on success, rolls back on any error."""
        with self._write_lock:
            conn = self._writer
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            faults.point("catalog.before_commit")
            conn.execute("COMMIT")
            faults.point("catalog.after_commit")

    def write_lock(self) -> threading.RLock:
        """Held across a write and its in-memory index apply, so ops apply in seq order."""
        return self._write_lock

    @contextmanager
    def locked(self) -> Iterator[sqlite3.Connection]:
        """The writer connection without a transaction (for post-commit work kept in order)."""
        with self._write_lock:
            yield self._writer

    def kv_get(self, key: str) -> str | None:
        row = self.reader().execute("SELECT value FROM kv WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    @staticmethod
    def kv_set(conn: sqlite3.Connection, key: str, value: str) -> None:
        conn.execute(
            "INSERT INTO kv(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = ?",
            (key, value, value),
        )

    def integrity_ok(self) -> bool:
        row = self.reader().execute("PRAGMA integrity_check").fetchone()
        return row is not None and row[0] == "ok"

    def close(self) -> None:
        with self._readers_lock:
            for r in list(self._readers):
                r.conn.close()
            self._readers.clear()
        with self._write_lock:
            self._writer.close()
