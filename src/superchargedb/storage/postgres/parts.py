"""The backend's small readers (``UnitReader``, ``VectorIndex``, ``LexicalIndex``, ``Outbox``,
``AuditLog``, ``JobQueue``, ``KV``, ``ObjectStore``, ``BulkLoad``): each call one pooled
autocommit statement (a claim, a heartbeat and the HNSW scan open their own transaction) over
the modules beside this one; what they return is plain domain records."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager

from ...readfilter import ReadFilter
from ..protocols import (
    AuditReport,
    JobRecord,
    JobState,
    Lease,
    Scored,
    UnitRecord,
    Vector,
)
from . import audit as audit_sql
from . import jobs as jobs_sql
from . import lexical as lexical_sql
from . import outbox as outbox_sql
from . import units as units_sql
from . import vectors as vectors_sql
from .sql import Conn


class _Part:
    def __init__(self, conn: Conn) -> None:
        self.conn = conn


class PgUnits(_Part):
    def get(self, unit_id: str, rf: ReadFilter) -> UnitRecord | None:
        with self.conn() as conn:
            return units_sql.get(conn, unit_id, rf)

    def generations(self, scopes: Sequence[str]) -> Mapping[str, int]:
        with self.conn() as conn:
            return units_sql.generations(conn, scopes)


class PgVectors(_Part):
    def __init__(self, conn: Conn, exact_max: int) -> None:
        super().__init__(conn)
        self.exact_max = exact_max

    def search(self, plane: str, vector: Vector, k: int, rf: ReadFilter) -> list[Scored]:
        with self.conn() as conn:
            return vectors_sql.search(conn, plane, vector, k, rf, self.exact_max)[0]

    def search_planned(
        self, plane: str, vector: Vector, k: int, rf: ReadFilter
    ) -> tuple[list[Scored], vectors_sql.Plan]:
        """:meth:`search` and the plan it took (benchmarks and plan tests)."""
        with self.conn() as conn:
            return vectors_sql.search(conn, plane, vector, k, rf, self.exact_max)

    def explain(self, plane: str, vector: Vector, k: int, rf: ReadFilter) -> tuple[str, str]:
        """The plan :meth:`search` takes here and PostgreSQL's EXPLAIN of its statement."""
        with self.conn() as conn:
            return vectors_sql.explain(conn, plane, vector, k, rf, self.exact_max)

    def count(self, plane: str) -> int:
        with self.conn() as conn:
            return vectors_sql.count(conn, plane)


class PgLexical(_Part):
    def search(self, query: str, k: int, rf: ReadFilter) -> list[Scored]:
        with self.conn() as conn:
            return lexical_sql.search(conn, query, k, rf)


class PgOutbox(_Part):
    def head(self) -> int:
        with self.conn() as conn:
            return outbox_sql.head(conn)

    def applied(self) -> int:
        with self.conn() as conn:
            return outbox_sql.applied(conn)

    def replay(self) -> int:
        with self.conn() as conn:
            return outbox_sql.replay(conn)


class PgAudit(_Part):
    def __init__(self, conn: Conn, key: bytes) -> None:
        super().__init__(conn)
        self.key = key

    def verify(self) -> AuditReport:
        with self.conn() as conn:
            return audit_sql.verify(conn, self.key)


class PgJobs(_Part):
    def __init__(self, conn: Conn, lease_ms: int) -> None:
        super().__init__(conn)
        self.lease_ms = lease_ms

    @property
    def lease_s(self) -> float:
        return self.lease_ms / 1000

    def claim(self) -> Lease | None:
        with self.conn() as conn:
            return jobs_sql.claim(conn, self.lease_ms)

    def heartbeat(self, lease: Lease, progress: float) -> None:
        with self.conn() as conn:
            jobs_sql.heartbeat(conn, lease, progress, self.lease_ms)

    def fail(self, lease: Lease, error: str, *, retry: bool) -> JobState:
        with self.conn() as conn:
            return jobs_sql.fail(conn, lease, error, retry=retry)

    def get(self, job_id: str) -> JobRecord | None:
        with self.conn() as conn:
            return jobs_sql.get(conn, job_id)

    def depth(self) -> Mapping[str, int]:
        with self.conn() as conn:
            return jobs_sql.depth(conn)


class PgBulkLoad:
    """``BulkLoad``: nothing trails a commit here but the BM25 statistics (the HNSW entries and
    postings are written in the batch's own transaction), so the apply is the outbox replay and
    there is nothing to wait for or to checkpoint (D-241)."""

    def __init__(self, outbox: PgOutbox) -> None:
        self.outbox = outbox

    @contextmanager
    def tuned(self, cache_mb: int) -> Iterator[None]:
        yield  # the server's shared buffers serve every connection; nothing per writer

    def apply_behind(self) -> None:
        self.outbox.replay()

    def wait_behind(self) -> None:
        pass

    def checkpoint(self) -> None:
        self.outbox.replay()  # durable at each commit; the statistics caught up


class PgKV(_Part):
    def get(self, key: str) -> str | None:
        with self.conn() as conn:
            row = conn.execute("SELECT value FROM kv WHERE key = %s", (key,)).fetchone()
        return None if row is None else str(row[0])
