"""SQLite's way of saying the disk is full (``storage/disk.py`` maps it to 507)."""

from __future__ import annotations

import sqlite3

SQLITE_ERRORS: tuple[type[Exception], ...] = (sqlite3.OperationalError,)


def sqlite_disk_full(exc: BaseException) -> bool:
    return isinstance(exc, sqlite3.OperationalError) and "full" in str(exc).lower()
