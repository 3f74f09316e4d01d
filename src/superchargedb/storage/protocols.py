"""The storage seam: what a backend must provide, in plain domain types.

The embedded backend (SQLite + USearch + files, ``sqlite_backend.py``) implements these today;
the server stack (PostgreSQL + pgvector, S3, Valkey) implements the same Protocols beside it.
No SQL text, connection, cursor, rowid, index syntax or ``dict[str, Any]`` crosses them (a test
inspects the signatures), and every backend passes the one contract suite (``tests/contract``).

Reads take a :class:`~superchargedb.readfilter.ReadFilter` and render it in the backend's own
form; a read never returns what the filter does not admit. Writes happen inside one transaction
(``with backend.write() as tx``): Units, their outbox operations, jobs, generations, KV and the
audit record commit together or not at all. The derived indexes follow the outbox:
``backend.outbox.replay()`` applies what was committed (the server calls it after each write,
and a backend replays at start-up what a crash left unapplied).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Protocol

from ..readfilter import ReadFilter
from ..types import Locator, Principal, Vector

if TYPE_CHECKING:
    from .protocols_search import SearchStore

JobState = Literal["queued", "running", "done", "failed"]


@dataclass(frozen=True)
class UnitRecord:
    """One stored Unit (a chunk of a submitted Unit when ``chunk_count > 1``)."""

    unit_id: str
    scope: str
    doc_id: str
    plane: str
    modality: str
    text: str
    acl_owner: str
    acl_groups: tuple[str, ...]
    content_hash: str
    source_uri: str | None = None
    mime: str | None = None
    locator: Locator | None = None
    chunk_index: int = 0
    chunk_count: int = 1
    created_at: int = 0
    event_at: int | None = None
    object_key: str | None = None
    object_sha: str | None = None
    # Written, not read back (a read leaves them at these defaults): the title line later
    # chunks are indexed with, and whose quota and usage count the Unit (empty: the owner).
    context: str = ""
    created_by: str = ""


@dataclass(frozen=True)
class Scored:
    """A ranked hit of one index: higher ``score`` is better, comparable within one list."""

    unit_id: str
    score: float


@dataclass(frozen=True)
class JobSpec:
    kind: str
    scope: str
    principal: str
    acl_owner: str
    acl_groups: tuple[str, ...]
    dedupe_key: str
    payload_json: str  # the job's own arguments, as JSON text (opaque to the store)


@dataclass(frozen=True)
class Lease:
    """A claimed job. ``token`` fences it: once the lease expires and another worker claims
    the job, every call with the old token raises :class:`LeaseLostError`."""

    job_id: str
    kind: str
    token: str
    attempt: int
    payload_json: str
    # Who queued the job and for what: its Units are written as this principal, in this
    # scope, with this owner and these groups.
    principal: str = ""
    scope: str = ""
    acl_owner: str = ""
    acl_groups: tuple[str, ...] = ()
    max_attempts: int = 1


@dataclass(frozen=True)
class JobRecord:
    job_id: str
    kind: str
    state: JobState
    attempts: int
    scope: str
    acl_owner: str
    acl_groups: tuple[str, ...] = ()
    result_json: str | None = None  # a done job's output, as JSON text


@dataclass(frozen=True)
class AuditReport:
    ok: bool
    records: int
    first_bad_seq: int | None = None


@dataclass(frozen=True)
class BlobInfo:
    """A stored blob; content-addressed, so its ETag is its sha256."""

    sha256: str
    size: int

    @property
    def etag(self) -> str:
        return f'"{self.sha256}"'


class LeaseLostError(Exception):
    """The job's lease expired and another worker holds it now."""


# -- reads -------------------------------------------------------------------------------------
class UnitReader(Protocol):
    def get(self, unit_id: str, rf: ReadFilter) -> UnitRecord | None:
        """The Unit when ``rf`` admits it (else None, exactly as for an id that never was)."""
        ...

    def generations(self, scopes: Sequence[str]) -> Mapping[str, int]:
        """Each scope's cache generation (bumped by every write in it or below it)."""
        ...


class VectorIndex(Protocol):
    def search(self, plane: str, vector: Vector, k: int, rf: ReadFilter) -> list[Scored]:
        """The ``k`` nearest Units of ``plane`` that ``rf`` admits (cosine, best first)."""
        ...

    def count(self, plane: str) -> int: ...


class LexicalIndex(Protocol):
    def search(self, query: str, k: int, rf: ReadFilter) -> list[Scored]:
        """BM25 over the Units ``rf`` admits; user text is never index syntax."""
        ...


class AuditLog(Protocol):
    def verify(self) -> AuditReport:
        """Recompute the keyed chain; name the first record that breaks it."""
        ...


class JobQueue(Protocol):
    def claim(self) -> Lease | None:
        """Lease the oldest runnable job (queued, or running with an expired lease)."""
        ...

    def heartbeat(self, lease: Lease, progress: float) -> None:
        """Extend the lease; raises :class:`LeaseLostError` when fenced out."""
        ...

    def fail(self, lease: Lease, error: str, *, retry: bool) -> JobState:
        """Record a failure; requeue while attempts remain. Returns the new state."""
        ...

    def get(self, job_id: str) -> JobRecord | None: ...

    def depth(self) -> Mapping[str, int]: ...

    @property
    def lease_s(self) -> float:
        """How long a lease holds without a heartbeat."""
        ...


class Outbox(Protocol):
    def head(self) -> int:
        """The newest committed outbox sequence number."""
        ...

    def applied(self) -> int:
        """Every operation up to here is applied to the derived indexes."""
        ...

    def replay(self) -> int:
        """Apply every committed operation not yet applied; returns :meth:`applied`."""
        ...


class ObjectStore(Protocol):
    def put(self, chunks: Iterable[bytes], max_bytes: int) -> BlobInfo:
        """Store the bytes (content-addressed; 413 past ``max_bytes``, nothing kept)."""
        ...

    def read(self, sha256: str, start: int = 0, end: int | None = None) -> bytes:
        """Bytes ``[start, end)`` of a blob (``end`` None: to its end)."""
        ...

    def info(self, sha256: str) -> BlobInfo | None: ...


class KV(Protocol):
    def get(self, key: str) -> str | None: ...


# -- writes (inside one transaction) -----------------------------------------------------------
class UnitWriter(Protocol):
    def insert(self, unit: UnitRecord, vector: Vector) -> None:
        """Store a Unit and queue its index add (one outbox operation)."""
        ...

    def insert_many(self, units: Sequence[UnitRecord], vectors: Vector) -> None:
        """:meth:`insert` for a batch (``vectors`` row ``i`` is ``units[i]``'s)."""
        ...

    def import_batch(self, units: Sequence[UnitRecord], vectors: Vector, actor: str) -> int:
        """A bulk import's batch in full: the Units whose idempotency key is new, their index
        adds, the documents they create (for ``actor``), the generations and one ``import``
        audit record naming the backend's own range of rows (D-175). Returns how many were
        stored."""
        ...

    def delete(self, unit_ids: Sequence[str]) -> list[UnitRecord]:
        """Delete Units and queue their index removals; returns what was deleted."""
        ...

    def set_groups(self, unit_ids: Sequence[str], groups: Sequence[str]) -> None:
        """Re-permission Units in place (the indexes re-read the ACL)."""
        ...

    def bump_generations(self, scopes: Iterable[str]) -> None:
        """Invalidate cached results over each scope and every ancestor of it."""
        ...


class JobWriter(Protocol):
    def enqueue(self, spec: JobSpec) -> str:
        """Queue a job; returns its id."""
        ...

    def find(self, dedupe_key: str) -> JobRecord | None:
        """The newest job queued under ``dedupe_key`` that has not failed."""
        ...

    def set_groups(self, job_id: str, groups: Sequence[str]) -> None:
        """Re-permission what a job writes (a done job: the groups its Units were given)."""
        ...

    def complete(self, lease: Lease, result_json: str) -> None:
        """Mark the job done with its output; raises :class:`LeaseLostError` when fenced out."""
        ...


class AuditWriter(Protocol):
    def append(self, actor: Principal | str, action: str, record: Mapping[str, object]) -> str:
        """Chain one record after the current head; returns its hash."""
        ...


class KVWriter(Protocol):
    def set(self, key: str, value: str) -> None: ...


class WriteTx(Protocol):
    @property
    def units(self) -> UnitWriter: ...

    @property
    def jobs(self) -> JobWriter: ...

    @property
    def audit(self) -> AuditWriter: ...

    @property
    def kv(self) -> KVWriter: ...


class Backend(Protocol):
    """One process's handle on a store: the readers, the outbox and the one write path."""

    @property
    def units(self) -> UnitReader: ...

    @property
    def vectors(self) -> VectorIndex: ...

    @property
    def lexical(self) -> LexicalIndex: ...

    @property
    def audit(self) -> AuditLog: ...

    @property
    def jobs(self) -> JobQueue: ...

    @property
    def search(self) -> SearchStore: ...

    @property
    def outbox(self) -> Outbox: ...

    @property
    def objects(self) -> ObjectStore: ...

    @property
    def kv(self) -> KV: ...

    def write(self) -> AbstractContextManager[WriteTx]:
        """One write transaction: everything done through ``tx`` commits together."""
        ...

    def close(self) -> None: ...
