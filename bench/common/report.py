"""Writing a benchmark's report: ``<out>/<stem>.json`` and ``<out>/<stem>.md``, and the command
line a report says it was made by (with no machine's paths in it)."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.common.evaldir import ENV, EvalDirMissing, eval_dir
from bench.common.paths import REPO


def _shown_arg(arg: str) -> str:
    """An argument with the eval folder written as ``$SCDB_EVAL_DIR`` and the checkout's root
    dropped, so a committed report names no machine's path."""
    try:
        root = str(eval_dir())
    except EvalDirMissing:
        root = ""
    if root and arg.startswith(root):
        return f"${ENV}{arg[len(root) :]}"
    repo = str(REPO) + os.sep
    return arg[len(repo) :] if arg.startswith(repo) else arg


def command(module: str, argv: Sequence[str]) -> str:
    """``python -m bench.<module> ARGS``, as the report's ``command`` field."""
    return " ".join([f"python -m bench.{module}", *(_shown_arg(a) for a in argv)])


def write_report(
    out: Path,
    stem: str,
    report: dict[str, Any],
    md: str | None = None,
    indent: int = 2,
    ensure_ascii: bool = True,
) -> list[Path]:
    """The JSON (and Markdown, if given) report; returns the paths written."""
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / f"{stem}.json"]
    paths[0].write_text(json.dumps(report, indent=indent, ensure_ascii=ensure_ascii) + "\n")
    if md is not None:
        paths.append(out / f"{stem}.md")
        paths[1].write_text(md)
    return paths
