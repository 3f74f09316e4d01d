"""Processes known by pid only: detached children that ``stack up`` started and ``stack down``
(a later, unrelated process) stops.

A pid alone is not an identity: after a reboot or a long uptime another program may hold it.
So each reference keeps the process's start time (``/proc/<pid>/stat``), and a pid whose start
time differs is treated as gone: ``stack down`` never signals a stranger. Where ``/proc`` is
missing the start time is ``None`` and the pid alone decides.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any


def _stat(pid: int) -> list[str] | None:
    """The fields of ``/proc/<pid>/stat`` after the command name (state first), or None."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return raw.rsplit(")", 1)[1].split()  # the name may hold spaces and parentheses


def start_time(pid: int) -> str | None:
    fields = _stat(pid)
    return fields[19] if fields and len(fields) > 19 else None  # field 22: starttime


@dataclass(frozen=True)
class ProcRef:
    pid: int
    started: str | None  # /proc start time in clock ticks, None where unknown

    @classmethod
    def of(cls, pid: int) -> ProcRef:
        return cls(pid, start_time(pid))

    def to_json(self) -> dict[str, Any]:
        return {"pid": self.pid, "started": self.started}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> ProcRef:
        return cls(int(d["pid"]), d.get("started"))


def alive(ref: ProcRef) -> bool:
    """The very process ``ref`` names still runs (a zombie or a reused pid does not count)."""
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(ref.pid, os.WNOHANG)  # our own child that exited: reap it, or it stays a zombie
    if not _pid_exists(ref.pid):  # PermissionError counts as there: PostgreSQL runs as postgres
        return False
    fields = _stat(ref.pid)
    if fields is None:
        return not Path("/proc/self/stat").exists()  # no /proc here: the pid alone says
    if fields[0] in ("Z", "X"):
        return False
    return ref.started is None or fields[19] == ref.started


def _pid_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def wait_gone(ref: ProcRef, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while alive(ref):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)
    return True


def _signal(ref: ProcRef, sig: int, group: bool) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        if group:
            os.killpg(ref.pid, sig)
        else:
            os.kill(ref.pid, sig)


def stop(ref: ProcRef, sig: int = signal.SIGTERM, timeout_s: float = 30.0) -> str:
    """Send ``sig``; past ``timeout_s`` SIGKILL the whole process group (each process here leads
    its own session, so the group is it and its children). Returns how it ended."""
    if not alive(ref):
        if not _pid_exists(ref.pid):
            # A pid in use as a group id is never handed out again, so a group still named by it
            # is what the leader left (API processes of a killed parent): ours to end.
            _signal(ref, signal.SIGKILL, group=True)
        return "not running"
    _signal(ref, sig, group=False)
    how = f"stopped ({signal.Signals(sig).name})"
    if not wait_gone(ref, timeout_s):
        how = f"killed (no exit {timeout_s:.0f} s after {signal.Signals(sig).name})"
    # Whatever it started in its group (API processes, PostgreSQL backends) goes with it.
    _signal(ref, signal.SIGKILL, group=True)
    wait_gone(ref, 10.0)
    return how


def spawn_detached(args: list[str], env: dict[str, str], log: Path, cwd: Path) -> ProcRef:
    """Start ``args`` in its own session (no terminal's Ctrl-C reaches it; it outlives us),
    output appended to ``log``."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:
        p = subprocess.Popen(
            args,
            env=env,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    return ProcRef.of(p.pid)
