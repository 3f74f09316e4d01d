"""Read replicas: which hot standby may answer a search's dense leg now (D-270, D-271).

Each API process keeps a pool per standby of ``SCDB_DATABASE_REPLICA_URLS`` and one thread that
every ``poll_ms`` samples the primary's WAL position, then each standby's replayed position.
A standby's staleness is bounded by the samples: if it has replayed at least what the primary
had written at time *t* (a primary sample taken before the standby's), everything committed
before *t* is on it, so it trails by at most ``now - t``. A standby serves a search only when
that bound is within ``max_lag_ms`` and it has replayed the position the client sent back
(``X-Read-After``, ``positions.py``); otherwise the primary answers. A node that is not in
recovery (promoted: it is the primary now) or cannot be reached serves nothing.

What a standby answers is the scan alone: its keys are re-checked against the primary's
current rows (the exact filter, row-level security included) before anything is returned, so
a Unit deleted or re-permissioned on the primary never comes back from a standby however far
it lags; what the bound limits is how late a new Unit may appear. Such responses are not
cached (``Leg.fresh``): an entry keyed by the newest generations must not hold an older view.
"""

from __future__ import annotations

import functools
import itertools
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg_pool import ConnectionPool

from ... import positions

log = logging.getLogger(__name__)

Conn = Callable[[], AbstractContextManager[psycopg.Connection[Any]]]
HISTORY = 256  # primary samples kept: at 100 ms, 25 s of history


def _lsn(value: object) -> int:
    return positions.parse(str(value))


@dataclass(frozen=True)
class _Seen:
    """One standby's last sample: its replayed position, and the time (monotonic) of the
    newest primary sample it covers, None when it covers none (its staleness is unbounded)."""

    replay: int
    covers: float | None


class Replica:
    def __init__(self, name: str, pool: ConnectionPool[psycopg.Connection[Any]]) -> None:
        self.name, self.pool = name, pool
        self.seen: _Seen | None = None  # None: not in recovery, unreachable, or not sampled


class Replicas:
    def __init__(
        self,
        primary: Conn,
        replicas: Sequence[Replica],
        conn_on: Callable[
            [ConnectionPool[psycopg.Connection[Any]]],
            AbstractContextManager[psycopg.Connection[Any]],
        ],
        *,
        max_lag_ms: int,
        poll_ms: int = 100,
    ) -> None:
        self.primary = primary
        self.nodes = list(replicas)
        self.conn_on = conn_on  # a pool's connection, in the request's tenants
        self.max_lag_s = max_lag_ms / 1000
        self.poll_s = poll_ms / 1000
        self._history: deque[tuple[float, int]] = deque(maxlen=HISTORY)
        self._turn = itertools.count()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="scdb-replicas", daemon=True)
        self._thread.start()

    # -- sampling -------------------------------------------------------------------------
    def _run(self) -> None:
        while not self._stop.is_set():
            self.poll()
            self._stop.wait(self.poll_s)

    def poll(self) -> None:
        """One round: the primary's position first, then each standby's."""
        try:
            with self.primary() as conn:
                row = conn.execute("SELECT pg_current_wal_lsn()").fetchone()
            if row is not None:
                self._history.append((time.monotonic(), _lsn(row[0])))
        except Exception:  # the primary down (a failover): standbys are judged by old samples
            log.debug("primary position not read", exc_info=True)
        for node in self.nodes:
            node.seen = self._sample(node)

    def _sample(self, node: Replica) -> _Seen | None:
        try:
            with node.pool.connection(timeout=2) as conn:
                row = conn.execute(
                    "SELECT pg_is_in_recovery(), pg_last_wal_replay_lsn()"
                ).fetchone()
        except Exception:
            log.debug("replica %s not reachable", node.name, exc_info=True)
            return None
        if row is None or not row[0] or row[1] is None:
            return None  # promoted, or not a standby: it answers as no replica
        replay = _lsn(row[1])
        # Every primary sample so far was taken before this one: those at or below its replay
        # position are on it.
        covered = [t for t, lsn in self._history if lsn <= replay]
        return _Seen(replay, max(covered) if covered else None)

    # -- choosing -------------------------------------------------------------------------
    def staleness_s(self, node: Replica) -> float | None:
        """How far ``node`` may trail the primary (seconds), None when nothing bounds it."""
        seen = node.seen
        if seen is None or seen.covers is None:
            return None
        return time.monotonic() - seen.covers

    def pick(self, after: int | None = None) -> tuple[str, Conn] | None:
        """A standby that may answer now (round robin among them), else None: the primary."""
        n = len(self.nodes)
        start = next(self._turn)
        for i in range(n):
            node = self.nodes[(start + i) % n]
            seen, lag = node.seen, self.staleness_s(node)
            if seen is None or lag is None or lag > self.max_lag_s:
                continue
            if after is not None and seen.replay < after:
                continue
            return node.name, functools.partial(self.conn_on, node.pool)
        return None

    def failed(self, name: str) -> None:
        """A standby failed a statement: it serves nothing until it is sampled again."""
        for node in self.nodes:
            if node.name == name:
                node.seen = None

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        for node in self.nodes:
            node.pool.close()
