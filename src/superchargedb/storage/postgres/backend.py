"""The storage Protocols over one PostgreSQL database (``Backend`` in ``protocols.py``).

A thin layer over the modules beside it (the small readers of ``parts.py``, the search view, the
write transaction of ``writes.py``, the auth and read stores): it owns the connection pool and
the one write path, so that what crosses the seam is plain data. Pool connections are
autocommit: a read is one statement (no BEGIN/COMMIT round trips); whatever needs a transaction
opens one (``write()``, claims, the HNSW scan's ``SET LOCAL``s). Server-side prepared
statements are off, so every statement is planned with its parameters (a generic plan would
hide a filter's selectivity from the planner, and the plane's partial index from the HNSW
scan).

Blobs are the blob store it is given: content-addressed files under ``objects_dir``
(``storage/sqlite/objects.py``; every process must see the same folder) or an S3 bucket
(``storage/s3/objects.py``), the one a server stack runs with (D-205).
"""

from __future__ import annotations

import errno
import json
import logging
import secrets
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psycopg
from pgvector.psycopg import register_vector
from psycopg_pool import ConnectionPool

from ... import acting, positions
from ...errors import ConflictError, ForbiddenError, UnavailableError
from ..protocols import Backend
from ..protocols_auth import AuthStore
from ..protocols_search import SearchStore
from ..protocols_service import ServerBackend
from ..protocols_writes import BulkLoad, WriteStore
from ..sqlite.objects import FileBlobStore, FileObjects
from . import audit as audit_sql
from . import migrations, rls
from . import vectors as vectors_sql
from .audit_trail import PgAuditTrail
from .counts import PgCounts
from .doctor import doctor
from .job_views import PgJobViews
from .lexical_tail import LexicalTail
from .object_catalog import PgObjectCatalog
from .parts import (
    PgAudit,
    PgBulkLoad,
    PgJobs,
    PgKV,
    PgLexical,
    PgOutbox,
    PgUnits,
    PgVectors,
)
from .principals import PgPrincipals
from .replicas import Replica, Replicas
from .search_store import PgSearchStore
from .service_reads import PgKeyframeReader, PgListing, PgUsageReader, PgWordReader
from .sessions import PgSessions
from .sql import OnPool
from .write_rows import PgDocs, PgQuota
from .writes import PgTx, TxConfig

log = logging.getLogger(__name__)

# How long a client is told to wait when the database cannot be reached (a failover takes about
# a second: the standby's promotion, then the pool's reconnect to the writable node).
RETRY_AFTER_S = 1


# Connection failures (class 08), the server shutting down or starting (57P01..03), and a
# write sent to a node that is a standby now (25006: a fenced old primary; the pool's next
# connection finds the writable one). A disk-full or a serialization failure is not one.
_UNREACHABLE = ("57P01", "57P02", "57P03", "25006")


def unreachable(exc: psycopg.Error) -> bool:
    """Whether ``exc`` says the node is gone or read-only, not that the statement failed."""
    state = exc.sqlstate
    if state is None:  # raised by the driver itself: a lost connection, or a pool timeout
        return isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError)
    return state.startswith("08") or state in _UNREACHABLE


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
        self.lexical_tail = LexicalTail(self._conn)  # built on the first search (D-267)
        self.replicas: Replicas | None = None  # hot standbys for searches (D-270)

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
        blobs: FileBlobStore | None = None,
        replica_urls: Sequence[str] = (),
        replica_max_lag_ms: int = 1000,
    ) -> PgBackend:
        """Migrate the database (once, whoever comes first), open a pool and apply what the
        outbox holds unapplied (a process that died between its commit and its replay);
        with ``replica_urls``, a pool per hot standby for searches (``replicas.py``)."""
        with psycopg.connect(url, autocommit=True) as conn:
            migrations.migrate(conn, dim, model_id)
        app = f"scdb-{secrets.token_hex(4)}"
        warned: list[bool] = []

        def configure(conn: psycopg.Connection[Any]) -> None:
            register_vector(conn)
            if not warned and rls.degraded_plans(conn):
                warned.append(True)
                log.warning(
                    "arrayoverlap is not marked LEAKPROOF: group-shared filters cannot use"
                    " their index under row-level security; run the first migration as a"
                    " superuser (docs/deploy.md)"
                )

        def make_pool(target: str, name: str, size: int) -> ConnectionPool[psycopg.Connection[Any]]:
            return ConnectionPool(
                target,
                min_size=1,
                max_size=size,
                kwargs={"autocommit": True, "prepare_threshold": None, "application_name": app},
                configure=configure,
                reset=rls.reset,
                open=True,
                name=name,
            )

        pool = make_pool(url, app, pool_size)
        pool.wait(30)
        b = cls(
            url,
            pool,
            blobs if blobs is not None else FileBlobStore(objects_dir),
            audit_key=audit_key,
            model_id=model_id,
            lease_s=lease_s,
            max_attempts=max_attempts,
            exact_max=exact_max,
            application_name=app,
            audit_anchor=audit_anchor,
        )
        if replica_urls:
            nodes = [
                # Not waited for: a standby that is down is simply not used until it answers.
                Replica(f"replica{i}", make_pool(u, f"{app}-r{i}", pool_size))
                for i, u in enumerate(replica_urls)
            ]
            b.replicas = Replicas(b._conn, nodes, b._conn_on, max_lag_ms=replica_max_lag_ms)
        with acting.as_system():
            b.outbox.replay()
        return b

    def stale_units(self) -> int:
        """Units embedded with another model than this store's (counted up to 1000)."""
        with acting.as_system(), self._conn() as conn:
            row = conn.execute(
                "SELECT count(*) FROM (SELECT 1 FROM units WHERE model_id <> %s LIMIT 1000) s",
                (self.model_id,),
            ).fetchone()
        return int(row[0]) if row else 0

    @staticmethod
    def recorded_model(url: str) -> tuple[int, str] | None:
        """The vectors' dimension and model id a migrated database records, else None."""
        with psycopg.connect(url, autocommit=True) as conn:
            if conn.execute("SELECT to_regclass('meta')").fetchone() in (None, (None,)):
                return None
            got = conn.execute("SELECT key, value FROM meta WHERE key IN ('dim', 'model_id')")
            rows: dict[str, str] = {str(k): str(v) for k, v in got}
        if "dim" not in rows or "model_id" not in rows:
            return None
        return int(rows["dim"]), str(rows["model_id"])

    def _conn(self) -> AbstractContextManager[psycopg.Connection[Any]]:
        """A pooled connection to the primary (see ``_conn_on``)."""
        return self._conn_on(self.pool)

    @contextmanager
    def _conn_on(
        self, pool: ConnectionPool[psycopg.Connection[Any]]
    ) -> Iterator[psycopg.Connection[Any]]:
        """A connection of ``pool``, in the tenant role while a request acts for tenants
        (D-263). A database that cannot be reached (down, or failing over) is a 503 with
        Retry-After, never a driver error (D-272)."""
        tenants = acting.acting_tenants()
        try:
            with pool.connection() as conn:
                if tenants is not None:
                    rls.enter(conn, tenants)
                try:
                    yield conn
                except psycopg.errors.InsufficientPrivilege as exc:
                    # A row outside the acting tenants: the filter above let it through, the
                    # policy did not. Nothing was written (the statement failed whole).
                    raise ForbiddenError("the write is outside your tenants") from exc
        except psycopg.Error as exc:
            if not unreachable(exc):
                raise
            # The idle connections to a node that went away are as dead as this one: drop
            # them now (in the background), not one failed request each.
            pool.check()
            raise UnavailableError(
                "the database is not reachable; retry shortly", retry_after=RETRY_AFTER_S
            ) from exc

    # -- the Protocols' attributes (small objects over this one) ---------------------------
    @property
    def units(self) -> PgUnits:
        return PgUnits(self._conn)

    @property
    def vectors(self) -> PgVectors:
        return PgVectors(self._conn, self.exact_max)

    @property
    def lexical(self) -> PgLexical:
        return PgLexical(self._conn)

    @property
    def audit(self) -> PgAudit:
        return PgAudit(self._conn, self.audit_key)

    @property
    def jobs(self) -> PgJobs:
        return PgJobs(self._conn, self.lease_ms)

    @property
    def search(self) -> PgSearchStore:
        return PgSearchStore(self._conn, self.exact_max, self.lexical_tail, self.replicas)

    @property
    def outbox(self) -> PgOutbox:
        return PgOutbox(self._conn)

    @property
    def objects(self) -> FileObjects:
        return FileObjects(self.blobs)

    @property
    def kv(self) -> PgKV:
        return PgKV(self._conn)

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
        return PgBulkLoad(self.outbox)

    # -- the facade's reads (protocols_service.py) -------------------------------------------
    @property
    def listing(self) -> PgListing:
        return PgListing(self._conn)

    @property
    def usage(self) -> PgUsageReader:
        return PgUsageReader(self._conn)

    @property
    def words(self) -> PgWordReader:
        return PgWordReader(self._conn)

    @property
    def keyframes(self) -> PgKeyframeReader:
        return PgKeyframeReader(self._conn)

    @property
    def object_rows(self) -> PgObjectCatalog:
        return PgObjectCatalog(self._conn, self.blobs)

    @property
    def ready(self) -> bool:
        """Whether this process's lexical index is built (``/readyz`` asks, which starts the
        build in the background: a balancer then routes to warmed processes). Searches before
        it is answered in SQL; an index that could not be built leaves them there."""
        tail = self.lexical_tail
        tail.start()
        return tail.ready or tail.failed

    def sizes(self) -> Mapping[str, float]:
        with acting.as_system(), self._conn() as conn:
            row = conn.execute("SELECT pg_database_size(current_database())").fetchone()
        return {"database_mb": round(int(row[0] if row else 0) / 2**20, 2)}

    def doctor(self) -> str:
        with acting.as_system(), self._conn() as conn:
            report = doctor(
                conn,
                model_id=self.model_id,
                objects_root=self.blobs.root,
                blob_exists=self.blobs.exists,
            )
        return json.dumps(report)

    @contextmanager
    def ordered(self) -> Iterator[None]:
        """Nothing to hold: the outbox's deltas commute and its applier takes its own lock, so
        a write and the apply after it need no order against other writers (D-241)."""
        yield

    @contextmanager
    def write(self) -> Iterator[PgTx]:
        """One transaction; a write that collides with a stored key (a Unit id that exists)
        rolls back whole and raises :class:`ConflictError`, one the server's full disk stops
        raises ``OSError(ENOSPC)`` (no driver error crosses the seam)."""
        try:
            # Pipeline mode: statements whose results nobody reads (inserts) are sent without
            # waiting for each reply; a read (a delete's RETURNING, the audit head) syncs first.
            with self._conn() as conn:
                with conn.pipeline(), conn.transaction(), conn.cursor() as cur:
                    yield PgTx(self.tx_config, cur)
                if self.replicas is not None and positions.tracked():
                    # Where the commit reached: the client's X-Read-After (D-271).
                    row = conn.execute("SELECT pg_current_wal_insert_lsn()").fetchone()
                    if row is not None:
                        positions.wrote(positions.parse(str(row[0])))
        except psycopg.errors.UniqueViolation as exc:
            raise ConflictError(
                "the write collides with a stored key", constraint=exc.diag.constraint_name
            ) from exc
        except psycopg.errors.DiskFull as exc:
            # The server's disk is full (SQLSTATE 53100): the transaction rolled back whole,
            # and the API answers it as any full disk, 507 (storage/disk.py).
            raise OSError(errno.ENOSPC, f"the database has no space left: {exc}") from exc

    def close(self) -> None:
        """Sign the audit head outside the database (when an anchor is kept), then close the
        pool; a database that cannot be reached any more closes without one."""
        try:
            if self.audit_anchor is not None:
                with acting.as_system(), self._conn() as conn:
                    audit_sql.write_anchor(conn, self.audit_key, self.audit_anchor)
        except (psycopg.OperationalError, UnavailableError):
            pass  # the next process to close anchors the head
        finally:
            if self.replicas is not None:
                self.replicas.close()
            self.lexical_tail.close()
            self.pool.close()


if TYPE_CHECKING:  # mypy checks this backend against the seam
    _backend: type[Backend] = PgBackend
    _writes: type[WriteStore] = PgBackend
    _auth: type[AuthStore] = PgBackend
    _server: type[ServerBackend] = PgBackend
    _search: type[SearchStore] = PgSearchStore
    _bulk: type[BulkLoad] = PgBulkLoad
