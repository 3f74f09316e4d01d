"""The storage seam's read side for the facade's views: tenant figures, the job listing, the
audit trail as admins read it and the whole-store maintenance of the offline CLI.

Beside ``protocols.py`` (the Units, indexes, jobs and audit of a backend), these are the
concepts ``stats.py``, ``jobs_view.py``, ``tenancy.py`` and ``cli/maintenance.py`` use, in
plain domain types (the same signature test inspects both modules). A read that returns a
principal's data takes the caller's :class:`~superchargedb.readfilter.ReadFilter` and renders
it in the backend's own form; the contract checks (``tests/contract/checks_reads.py``) compare
it with the reference rule. Counts take the grants only: they name no Unit (D-186).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from ..models.embedder import Embedder
from ..readfilter import ReadFilter
from .protocols import JobState


@dataclass(frozen=True)
class TenantCounts:
    """What lies within some scopes, read in one snapshot (the figures agree)."""

    units_by_plane: Mapping[str, int]  # only the planes that hold a Unit
    documents: int
    jobs_by_state: Mapping[str, int]  # only the states that hold a job
    outbox_lag: int  # committed Units in the scopes the indexes have not applied yet
    objects: int
    object_bytes: int


class CatalogCounts(Protocol):
    def within(self, scopes: Sequence[str]) -> TenantCounts:
        """Counts of what lies in ``scopes`` or below them, on the ``/`` boundary (D-2)."""
        ...

    def units_total(self) -> int:
        """Every stored Unit (the operator's figure: a restore checks it)."""
        ...


@dataclass(frozen=True)
class JobView:
    """A derivation job as its reader sees it: progress and output, no lease or payload."""

    job_id: str
    kind: str
    state: JobState
    progress: float
    attempts: int
    max_attempts: int
    error: str | None
    unit_ids: tuple[str, ...]  # the Units it derived (once done)
    scope: str
    doc_id: str | None
    created_at: int
    updated_at: int


class JobListing(Protocol):
    """Jobs a reader may see: within ``rf.scopes``, and submitted by ``rf.principal``, owned by
    it or shared with one of ``rf.groups`` (the Units' rule plus the submitter; planes and the
    query's filters do not apply to a job: D-185)."""

    def get(self, job_id: str, rf: ReadFilter) -> JobView | None:
        """The job when ``rf`` may see it (else None, exactly as for an id that never was)."""
        ...

    def page(
        self,
        rf: ReadFilter,
        *,
        state: JobState | None,
        after: tuple[int, str] | None,
        limit: int,
    ) -> list[JobView]:
        """Up to ``limit`` visible jobs, oldest first by ``(created_at, job_id)``, after the
        keyset position ``after``."""
        ...


@dataclass(frozen=True)
class BackupManifest:
    """What a backup holds (its ``manifest.json``): a restore checks its Unit count."""

    format: int
    created_at: int
    source: str
    units: int
    objects: int
    model_id: str | None
    audit_head_seq: int | None
    audit_head_hash: str | None
    seconds: float


class Maintenance(Protocol):
    """Whole-store operations on one data dir (``superchargedb backup``, ``restore``,
    ``reindex``): each backend does them in its own way."""

    def backup(self, dest: Path) -> BackupManifest:
        """A consistent copy into the empty or missing ``dest``, safe while a server runs."""
        ...

    def restore(self, src: Path) -> BackupManifest:
        """Lay the backup ``src`` into this empty data dir (opening it rebuilds the indexes)."""
        ...

    def reindex(self, embedder: Embedder, progress: Callable[[int, int], None]) -> int:
        """Re-embed every Unit stored with another model than ``embedder``'s, holding the
        data dir (no server runs meanwhile); ``progress(done, total)`` once before the first
        batch (``done`` 0) and after each. The indexes are rebuilt on the next start. Returns
        how many were re-embedded."""
        ...

    def rederive(self) -> int:
        """Queue again the newest finished derivation of each media request whose Units lack
        word tables (derived before they were kept, D-215), holding the data dir; returns how
        many jobs were queued (a worker or the next server runs them)."""
        ...


@dataclass(frozen=True)
class ChainReport:
    """The audit chain recomputed: ``head`` is the newest record's hash when it verifies;
    ``first_bad_seq`` and ``reason`` name the first break when not (``first_bad_seq`` None:
    the signed anchor itself is bad). A store that keeps several chains (a directory and its
    clusters, D-278) reports each in ``chains``, and ``ok`` when every one verifies."""

    ok: bool
    records: int
    head: str | None = None
    first_bad_seq: int | None = None
    reason: str | None = None
    chains: Mapping[str, ChainReport] = field(default_factory=dict)


@dataclass(frozen=True)
class AuditEntry:
    """One record of the chain as stored: its body is canonical JSON text, exported as is."""

    seq: int
    prev_hash: str
    hash: str
    record_json: str


class AuditTrail(Protocol):
    """The audit chain as the admin endpoints read it (``protocols.AuditWriter`` appends)."""

    def verify_chain(self) -> ChainReport:
        """Recompute the keyed chain and check it against its signed anchor, when there is
        one (truncation and a rewritten head are caught too)."""
        ...

    def tenant_records(self, tenants: Collection[str]) -> int:
        """How many records principals of ``tenants`` (scope roots) made: the record's own
        ``actor_tenants``, or for a record from before them its actor's scopes now."""
        ...

    def entries(self) -> Iterator[AuditEntry]:
        """Every record, in chain order (streamed)."""
        ...
