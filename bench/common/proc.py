"""Running a bench module in a child Python (``python -m bench.<name>``) from anywhere: the
child gets the checkout's root through PYTHONPATH, never by editing its import path in code."""

from __future__ import annotations

import os
import sys

from bench.common.paths import REPO


def module_cmd(module: str, *args: str) -> list[str]:
    return [sys.executable, "-m", f"bench.{module}", *args]


def child_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """``env`` (default: this process's) with the checkout's root first on PYTHONPATH."""
    out = dict(os.environ if env is None else env)
    parts = [p for p in out.get("PYTHONPATH", "").split(os.pathsep) if p]
    out["PYTHONPATH"] = os.pathsep.join([str(REPO), *(p for p in parts if p != str(REPO))])
    return out
