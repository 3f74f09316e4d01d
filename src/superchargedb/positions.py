"""Commit positions: how a client reads its own writes when reads may go to replicas (D-271).

A backend with read replicas reports, after each write transaction a request commits, the
position the commit reached (PostgreSQL's WAL position, ``0/3001108``); the API returns the
highest one in the ``X-Commit-Position`` response header. A later request that sends it back in
``X-Read-After`` is answered only from a node that has replayed that far (else from the
primary). Positions are opaque to clients; the embedded backend has no replicas and reports
none.

The API opens one :func:`tracking` context a request; a backend calls :func:`wrote` after a
commit and :func:`read_after` where it picks a node. The request's handler runs in a copy of the
context (a thread), so the written positions go into a list that the copy shares.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

_WRITTEN: ContextVar[list[int] | None] = ContextVar("scdb_written_positions", default=None)
_AFTER: ContextVar[int | None] = ContextVar("scdb_read_after", default=None)
_FORMAT = re.compile(r"^([0-9A-Fa-f]{1,8})/([0-9A-Fa-f]{1,8})$")


def parse(text: str) -> int:
    """A position's text (``hi/lo`` in hex, as PostgreSQL writes an LSN) as one integer."""
    m = _FORMAT.match(text.strip())
    if m is None:
        raise ValueError(f"not a commit position: {text[:40]!r} (expected e.g. 0/3001108)")
    return (int(m.group(1), 16) << 32) | int(m.group(2), 16)


def render(position: int) -> str:
    return f"{position >> 32:X}/{position & 0xFFFFFFFF:X}"


@contextmanager
def tracking(read_after: int | None = None) -> Iterator[list[int]]:
    """One request's context: the positions it must read after, and those its writes reach."""
    written: list[int] = []
    t1, t2 = _WRITTEN.set(written), _AFTER.set(read_after)
    try:
        yield written
    finally:
        _WRITTEN.reset(t1)
        _AFTER.reset(t2)


def tracked() -> bool:
    """Whether a request is listening for commit positions (a backend skips asking if not)."""
    return _WRITTEN.get() is not None


def wrote(position: int) -> None:
    written = _WRITTEN.get()
    if written is not None:
        written.append(position)


def read_after() -> int | None:
    return _AFTER.get()
