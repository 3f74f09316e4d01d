"""The work a request did, told back to admission control: tokens it embedded.

Admission (``admission.py``) judges an ingest's latency per embedded token, but only the
pipeline knows how many it embedded. The API opens a ``measured()`` context around each request;
code anywhere below (worker threads included: they run in a copy of the request's context, which
holds the same ``Effort``) calls ``charge_tokens``. Outside a request (jobs, the CLI) it is a no-op.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass


@dataclass
class Effort:
    tokens: int = 0


_CURRENT: ContextVar[Effort | None] = ContextVar("scdb_effort", default=None)


def charge_tokens(n: int) -> None:
    effort = _CURRENT.get()
    if effort is not None:
        effort.tokens += n


@contextmanager
def measured() -> Iterator[Effort]:
    effort = Effort()
    token = _CURRENT.set(effort)
    try:
        yield effort
    finally:
        _CURRENT.reset(token)
