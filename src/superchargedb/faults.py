"""Named crash points for fault-injection tests.

``point("catalog.after_commit")`` SIGKILLs the current process when the environment variable
``SCDB_CRASH_AT`` names that point (optionally ``name:N`` to crash on the N-th hit). Production
never sets it; the crash-recovery tests do, to prove that every acknowledged write survives.
"""

from __future__ import annotations

import os
import signal
import threading

_lock = threading.Lock()
_hits: dict[str, int] = {}
POINTS: set[str] = set()  # every point ever registered, for the crash-test report


def _target() -> tuple[str, int] | None:
    raw = os.environ.get("SCDB_CRASH_AT")
    if not raw:
        return None
    name, _, nth = raw.partition(":")
    return name, int(nth or 1)


def point(name: str) -> None:
    POINTS.add(name)
    target = _target()
    if target is None or target[0] != name:
        return
    with _lock:
        _hits[name] = _hits.get(name, 0) + 1
        if _hits[name] >= target[1]:
            os.kill(os.getpid(), signal.SIGKILL)
