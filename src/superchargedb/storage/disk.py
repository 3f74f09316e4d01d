"""Which storage failures mean "the disk is full", whatever the backend raised.

The API answers those 507 ``insufficient_storage`` (the transaction rolled back, nothing was
written) instead of 500; it registers a handler for each class in ``STORAGE_ERRORS`` without
knowing which engine raises it.
"""

from __future__ import annotations

import errno
import sqlite3

STORAGE_ERRORS: tuple[type[Exception], ...] = (OSError, sqlite3.OperationalError)


def is_disk_full(exc: BaseException) -> bool:
    if isinstance(exc, OSError) and exc.errno == errno.ENOSPC:
        return True
    return isinstance(exc, sqlite3.OperationalError) and "full" in str(exc).lower()
