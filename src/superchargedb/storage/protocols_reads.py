"""The storage seam's read side for the facade's views: tenant figures and the job listing.

Beside ``protocols.py`` (the Units, indexes, jobs and audit of a backend), these are the
concepts ``stats.py``, ``jobs_view.py`` and the maintenance commands read, in plain domain types
(the same signature test inspects both modules). A read that returns a principal's data takes
the caller's :class:`~superchargedb.readfilter.ReadFilter` and renders it in the backend's own
form; the contract checks (``tests/contract/checks_reads.py``) compare it with the reference
rule. Counts take the grants only: they name no Unit (``stats.py``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

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
    query's filters do not apply to a job)."""

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
