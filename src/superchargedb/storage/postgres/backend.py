"""The storage Protocols over one PostgreSQL database (``Backend`` in ``protocols.py``).

A thin layer over the modules beside it (units, vectors, lexical, outbox, jobs, audit): it owns
the connection pool and the one write path, and turns rows into domain records so that what
crosses the seam is plain data. Pool connections are autocommit: a read is one statement (no
BEGIN/COMMIT round trips); whatever needs a transaction opens one (``write()``, claims, the
HNSW scan's ``SET LOCAL``s). Server-side prepared statements are off, so every statement is
planned with its parameters (a generic plan would hide a filter's selectivity from the
planner, and the plane's partial index from the HNSW scan).

Blobs are the embedded file store (``storage/sqlite/objects.py``: content-addressed files under
``objects_dir``) until the S3 store lands (D-205).
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psycopg
from pgvector.psycopg import register_vector
from psycopg_pool import ConnectionPool

from ...errors import ConflictError
from ...readfilter import ReadFilter
from ..protocols import (
    AuditReport,
    Backend,
    BlobInfo,
    JobRecord,
    JobState,
    Lease,
    Scored,
    UnitRecord,
    Vector,
)
from ..protocols_auth import AuthStore
from ..protocols_search import SearchStore
from ..protocols_writes import BulkLoad, WriteStore
from ..sqlite.objects import FileBlobStore
from . import audit as audit_sql
from . import jobs as jobs_sql
from . import lexical as lexical_sql
from . import migrations
from . import outbox as outbox_sql
from . import units as units_sql
from . import vectors as vectors_sql
from .audit_trail import PgAuditTrail
from .counts import PgCounts
from .job_views import PgJobViews
from .principals import PgPrincipals
from .search_store import PgSearchStore
from .sessions import PgSessions
from .sql import OnPool
from .write_rows import PgDocs, PgQuota
from .writes import PgTx, TxConfig


class PgBackend:
    """One process's handle on a PostgreSQL store; any number of them share one database."""

    def __init__(
        self,
        url: str,
        pool: ConnectionPool[psycopg.Connection[Any]],
        blobs: FileBlobStore,
        *,
        audit_key: bytes,
        model_id: str,
        lease_s: float,
        max_attempts: int,
        exact_max: int,
        application_name: str,
        audit_anchor: Path | None = None,
    ) -> None:
        self.url, self.pool, self.blobs = url, pool, blobs
        self.audit_key, self.model_id = audit_key, model_id
        self.lease_ms = int(lease_s * 1000)
        self.max_attempts, self.exact_max = max_attempts, exact_max
        self.application_name = application_name
        self.audit_anchor = audit_anchor  # the signed audit head kept outside the database
        self.tx_config = TxConfig(model_id, audit_key, max_attempts)

    @classmethod
    def open(
        cls,
        url: str,
        *,
        dim: int,
        model_id: str,
        audit_key: bytes,
        objects_dir: Path,
        lease_s: float = 300.0,
        max_attempts: int = 3,
        exact_max: int = vectors_sql.EXACT_MAX,
        pool_size: int = 8,
        audit_anchor: Path | None = None,
    ) -> PgBackend:
        """Migrate the database (once, whoever comes first), open a pool and apply what the
        outbox holds unapplied (a process that died between its commit and its replay)."""
        with psycopg.connect(url, autocommit=True) as conn:
            migrations.migrate(conn, dim, model_id)
        app = f"scdb-{secrets.token_hex(4)}"

        def configure(conn: psycopg.Connection[Any]) -> None:
            register_vector(conn)

        pool: ConnectionPool[psycopg.Connection[Any]] = ConnectionPool(
            url,
            min_size=1,
            max_size=pool_size,
            kwargs={"autocommit": True, "prepare_threshold": None, "application_name": app},
            configure=configure,
            open=True,
            name=app,
        )
        pool.wait(30)
        b = cls(
            url,
            pool,
            FileBlobStore(objects_dir),
            audit_key=audit_key,
            model_id=model_id,
            lease_s=lease_s,
            max_attempts=max_attempts,
            exact_max=exact_max,
            application_name=app,
            audit_anchor=audit_anchor,
        )
        b.outbox.replay()
        return b

    @contextmanager
    def _conn(self) -> Iterator[psycopg.Connection[Any]]:
        with self.pool.connection() as conn:
            yield conn

    # -- the Protocols' attributes (small objects over this one) ---------------------------
    @property
    def units(self) -> _Units:
        return _Units(self)

    @property
    def vectors(self) -> _Vectors:
        return _Vectors(self)

    @property
    def lexical(self) -> _Lexical:
        return _Lexical(self)

    @property
    def audit(self) -> _Audit:
        return _Audit(self)

    @property
    def jobs(self) -> _Jobs:
        return _Jobs(self)

    @property
    def search(self) -> PgSearchStore:
        return PgSearchStore(self._conn, self.exact_max)

    @property
    def outbox(self) -> _Outbox:
        return _Outbox(self)

    @property
    def objects(self) -> _Objects:
        return _Objects(self.blobs)

    @property
    def kv(self) -> _KV:
        return _KV(self)

    @property
    def docs(self) -> PgDocs:
        return PgDocs(OnPool(self._conn))

    @property
    def quota(self) -> PgQuota:
        return PgQuota(OnPool(self._conn))

    @property
    def principals(self) -> PgPrincipals:
        return PgPrincipals(OnPool(self._conn))

    @property
    def sessions(self) -> PgSessions:
        return PgSessions(OnPool(self._conn))

    @property
    def counts(self) -> PgCounts:
        return PgCounts(self._conn)

    @property
    def job_views(self) -> PgJobViews:
        return PgJobViews(self._conn)

    @property
    def audit_trail(self) -> PgAuditTrail:
        return PgAuditTrail(self._conn, self.audit_key, self.audit_anchor)

    @property
    def bulk(self) -> PgBulkLoad:
        return PgBulkLoad(self)

    @contextmanager
    def ordered(self) -> Iterator[None]:
        """Nothing to hold: the outbox's deltas commute and its applier takes its own lock, so
        a write and the apply after it need no order against other writers (D-241)."""
        yield

    @contextmanager
    def write(self) -> Iterator[PgTx]:
        """One transaction; a write that collides with a stored key (a Unit id that exists)
        rolls back whole and raises :class:`ConflictError` (no driver error crosses the seam)."""
        try:
            # Pipeline mode: statements whose results nobody reads (inserts) are sent without
            # waiting for each reply; a read (a delete's RETURNING, the audit head) syncs first.
            with self._conn() as conn, conn.pipeline(), conn.transaction(), conn.cursor() as cur:
                yield PgTx(self.tx_config, cur)
        except psycopg.errors.UniqueViolation as exc:
            raise ConflictError(
                "the write collides with a stored key", constraint=exc.diag.constraint_name
            ) from exc

    def close(self) -> None:
        self.pool.close()


class _Part:
    def __init__(self, b: PgBackend) -> None:
        self.b = b


class _Units(_Part):
    def get(self, unit_id: str, rf: ReadFilter) -> UnitRecord | None:
        with self.b._conn() as conn:
            return units_sql.get(conn, unit_id, rf)

    def generations(self, scopes: Sequence[str]) -> Mapping[str, int]:
        with self.b._conn() as conn:
            return units_sql.generations(conn, scopes)


class _Vectors(_Part):
    def search(self, plane: str, vector: Vector, k: int, rf: ReadFilter) -> list[Scored]:
        with self.b._conn() as conn:
            return vectors_sql.search(conn, plane, vector, k, rf, self.b.exact_max)[0]

    def search_planned(
        self, plane: str, vector: Vector, k: int, rf: ReadFilter
    ) -> tuple[list[Scored], vectors_sql.Plan]:
        """:meth:`search` and the plan it took (benchmarks and plan tests)."""
        with self.b._conn() as conn:
            return vectors_sql.search(conn, plane, vector, k, rf, self.b.exact_max)

    def explain(self, plane: str, vector: Vector, k: int, rf: ReadFilter) -> tuple[str, str]:
        """The plan :meth:`search` takes here and PostgreSQL's EXPLAIN of its statement."""
        with self.b._conn() as conn:
            return vectors_sql.explain(conn, plane, vector, k, rf, self.b.exact_max)

    def count(self, plane: str) -> int:
        with self.b._conn() as conn:
            return vectors_sql.count(conn, plane)


class _Lexical(_Part):
    def search(self, query: str, k: int, rf: ReadFilter) -> list[Scored]:
        with self.b._conn() as conn:
            return lexical_sql.search(conn, query, k, rf)


class _Outbox(_Part):
    def head(self) -> int:
        with self.b._conn() as conn:
            return outbox_sql.head(conn)

    def applied(self) -> int:
        with self.b._conn() as conn:
            return outbox_sql.applied(conn)

    def replay(self) -> int:
        with self.b._conn() as conn:
            return outbox_sql.replay(conn)


class _Audit(_Part):
    def verify(self) -> AuditReport:
        with self.b._conn() as conn:
            return audit_sql.verify(conn, self.b.audit_key)


class _Jobs(_Part):
    @property
    def lease_s(self) -> float:
        return self.b.lease_ms / 1000

    def claim(self) -> Lease | None:
        with self.b._conn() as conn:
            return jobs_sql.claim(conn, self.b.lease_ms)

    def heartbeat(self, lease: Lease, progress: float) -> None:
        with self.b._conn() as conn:
            jobs_sql.heartbeat(conn, lease, progress, self.b.lease_ms)

    def fail(self, lease: Lease, error: str, *, retry: bool) -> JobState:
        with self.b._conn() as conn:
            return jobs_sql.fail(conn, lease, error, retry=retry)

    def get(self, job_id: str) -> JobRecord | None:
        with self.b._conn() as conn:
            return jobs_sql.get(conn, job_id)

    def depth(self) -> Mapping[str, int]:
        with self.b._conn() as conn:
            return jobs_sql.depth(conn)


class PgBulkLoad(_Part):
    """``BulkLoad``: nothing trails a commit here but the BM25 statistics (the HNSW entries and
    postings are written in the batch's own transaction), so the apply is the outbox replay and
    there is nothing to wait for or to checkpoint (D-241)."""

    @contextmanager
    def tuned(self, cache_mb: int) -> Iterator[None]:
        yield  # the server's shared buffers serve every connection; nothing per writer

    def apply_behind(self) -> None:
        self.b.outbox.replay()

    def wait_behind(self) -> None:
        pass

    def checkpoint(self) -> None:
        self.b.outbox.replay()  # durable at each commit; the statistics caught up


class _KV(_Part):
    def get(self, key: str) -> str | None:
        with self.b._conn() as conn:
            row = conn.execute("SELECT value FROM kv WHERE key = %s", (key,)).fetchone()
        return None if row is None else str(row[0])


class _Objects:
    """The ObjectStore over the embedded file blob store (D-205)."""

    def __init__(self, blobs: FileBlobStore) -> None:
        self.blobs = blobs

    def put(self, chunks: Iterable[bytes], max_bytes: int) -> BlobInfo:
        sha, size = self.blobs.put(chunks, max_bytes)  # 413 past max_bytes, nothing kept
        return BlobInfo(sha, size)

    def read(self, sha256: str, start: int = 0, end: int | None = None) -> bytes:
        with open(self.blobs.path(sha256), "rb") as f:
            f.seek(start)
            return f.read(-1 if end is None else max(0, end - start))

    def info(self, sha256: str) -> BlobInfo | None:
        if not self.blobs.exists(sha256):
            return None
        return BlobInfo(sha256, self.blobs.path(sha256).stat().st_size)


if TYPE_CHECKING:  # mypy checks this backend against the seam
    _backend: type[Backend] = PgBackend
    _writes: type[WriteStore] = PgBackend
    _auth: type[AuthStore] = PgBackend
    _search: type[SearchStore] = PgSearchStore
    _bulk: type[BulkLoad] = PgBulkLoad
