"""Loopback ports and readiness polling shared by the engine launchers."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable


def free_port() -> int:
    """A port free on 127.0.0.1 now (the OS picks it; a race with another binder is possible
    but the launchers fail loudly and the caller retries)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_until(ready: Callable[[], bool], timeout_s: float, what: str, step_s: float = 0.1) -> None:
    """Poll ``ready`` until it returns True; raise naming ``what`` after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            if ready():
                return
        except Exception as e:  # noqa: BLE001  (not ready yet: the engine is still starting)
            last = e
        time.sleep(step_s)
    raise TimeoutError(f"{what} not ready after {timeout_s:.0f} s" + (f": {last}" if last else ""))
