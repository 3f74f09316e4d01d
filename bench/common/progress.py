"""Progress bars on stderr (stdout carries reports and protocols), tqdm imported when used."""

from __future__ import annotations

import sys
from typing import Any


def bar(iterable: Any = None, **kw: Any) -> Any:
    """``tqdm(iterable, **kw)`` writing to stderr."""
    from tqdm import tqdm

    kw.setdefault("file", sys.stderr)
    return tqdm(iterable, **kw)


def write(msg: str) -> None:
    """A line above the running bars."""
    from tqdm import tqdm

    tqdm.write(msg, file=sys.stderr)
