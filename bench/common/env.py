"""The environment header of every report: commit, Python, platform, CPUs, load average."""

from __future__ import annotations

import os
import platform
from typing import Any

from bench.common.paths import REPO


def git_commit() -> str:
    """The checkout's short commit, or "unknown"."""
    import subprocess

    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        out = ""
    return out or "unknown"


def environment() -> dict[str, Any]:
    try:
        load = [round(x, 2) for x in os.getloadavg()]
    except OSError:
        load = []
    commit = git_commit()
    return {
        "git_commit": commit,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "loadavg": load,
    }
