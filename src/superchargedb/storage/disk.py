"""Which storage failures mean "the disk is full", whatever the backend raised.

The API answers those 507 ``insufficient_storage`` (the transaction rolled back, nothing was
written) instead of 500; it registers a handler for each class in ``STORAGE_ERRORS`` without
knowing which engine raises it. A backend adds its own classes and predicate here.
"""

from __future__ import annotations

import errno

from .sqlite.errors import SQLITE_ERRORS, sqlite_disk_full

STORAGE_ERRORS: tuple[type[Exception], ...] = (OSError, *SQLITE_ERRORS)


def is_disk_full(exc: BaseException) -> bool:
    if isinstance(exc, OSError) and exc.errno == errno.ENOSPC:
        return True
    return sqlite_disk_full(exc)
