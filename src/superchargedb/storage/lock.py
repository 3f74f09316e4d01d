"""The data-dir lock: one process owns the embedded store (D-40)."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from ..errors import ConflictError


class DataDirLock:
    def __init__(self, data_dir: Path) -> None:
        self.path = data_dir / "LOCK"
        self._fd: int | None = None

    def acquire(self) -> None:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise ConflictError(
                f"data dir {self.path.parent} is owned by another process "
                "(a running server?); talk to it over HTTP or stop it first"
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None
