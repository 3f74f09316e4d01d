"""The evaluation data's folder: ``--eval-dir`` or ``SCDB_EVAL_DIR``, never a default path.

The corpora (SciFact, ADI, XQuAD, ...) are not part of the repository, so where they are is the
caller's to say. A benchmark without it stops with a message naming the setting; a test that
needs the data skips with a reason naming it (``skip_reason``).

    python -m bench.common.evaldir scifact      # prints the dataset's folder, or why not (exit 2)
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

ENV = "SCDB_EVAL_DIR"


class EvalDirMissing(SystemExit):
    """The eval folder is not set or not there: a benchmark stops with this message (exit 1)."""


def eval_dir(given: Path | str | None = None) -> Path:
    """``given`` (``--eval-dir``) if set, else ``$SCDB_EVAL_DIR``; stops if neither is set."""
    raw = str(given) if given else os.environ.get(ENV, "")
    if not raw:
        raise EvalDirMissing(
            f"the evaluation data's folder is not set: set {ENV} (or pass --eval-dir) to the"
            " folder that holds the datasets (scifact/, classic-adi/, xquad-en/, ...)"
        )
    path = Path(raw).expanduser()
    if not path.is_dir():
        raise EvalDirMissing(f"{ENV} / --eval-dir {path} is not a folder")
    return path.resolve()


def dataset(name: str, given: Path | str | None = None) -> Path:
    """The folder ``name`` inside the eval folder; stops, naming the setting, if it is missing."""
    path = eval_dir(given) / name
    if not path.exists():
        raise EvalDirMissing(f"{path} not found ({ENV} / --eval-dir has no {name}/)")
    return path


def add_argument(ap: argparse.ArgumentParser) -> None:
    ap.add_argument(
        "--eval-dir",
        type=Path,
        help=f"the evaluation data's folder (default: ${ENV}; there is no built-in default)",
    )


def dataset_arg(args: argparse.Namespace, name: str) -> Path:
    """``args.dataset`` when given, else ``name`` under ``args.eval_dir`` / ``SCDB_EVAL_DIR``."""
    given = getattr(args, "dataset", None)
    return Path(given).resolve() if given else dataset(name, getattr(args, "eval_dir", None))


def skip_reason(name: str = "") -> str | None:
    """Why a test needing ``name`` (a dataset folder, or the eval folder itself) must skip."""
    try:
        dataset(name) if name else eval_dir()
    except EvalDirMissing as e:
        return f"needs the evaluation data: {e.code}"
    return None


def shown(path: Path | str) -> str:
    """``path`` as a report shows it: relative to the eval folder (``$SCDB_EVAL_DIR/scifact``),
    so a report names no machine's path."""
    p = Path(path).resolve()
    try:
        return f"${ENV}/{p.relative_to(eval_dir())}"
    except (EvalDirMissing, ValueError):
        return p.name if p.is_absolute() else str(path)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Print a dataset's folder inside the eval folder.")
    ap.add_argument("name", nargs="?", default="")
    add_argument(ap)
    args = ap.parse_args(argv)
    try:
        print(dataset(args.name, args.eval_dir) if args.name else eval_dir(args.eval_dir))
    except EvalDirMissing as e:
        print(e.code, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
