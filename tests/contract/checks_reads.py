"""The read side's contract (``storage/protocols_reads.py``): tenant counts and the job listing.

Each check takes a :class:`~backends.Kind` factory, a fresh directory and how to open the read
stores over an opened backend (``reads_of``, by the backend's type: the server stack adds its
opener to ``OPENERS``). Writes go through ``storage/protocols.py`` only; the oracle is the
reference rule (``readfilter``): the isolation cases of ``checks.WORLD`` (owner-only,
group-shared, the ``/`` boundary, look-alike scopes, parent and child scopes).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from contract.backends import Kind
from contract.checks import READERS, WORLD, principal, unit, vector
from superchargedb.readfilter import ReadFilter, may_read, within_any
from superchargedb.storage.protocols import JobSpec
from superchargedb.storage.protocols_reads import CatalogCounts
from superchargedb.storage.sqlite.backend import SqliteBackend
from superchargedb.storage.sqlite.counts import SqliteCounts

Factory = Callable[..., Kind]


@dataclass(frozen=True)
class Reads:
    counts: CatalogCounts


def sqlite_reads(b: SqliteBackend) -> Reads:
    return Reads(SqliteCounts(b.catalog, lambda: b.sync.applied_seq))


OPENERS: dict[type, Callable[[Any], Reads]] = {SqliteBackend: sqlite_reads}


def reads_of(b: Any) -> Reads:
    for cls in type(b).__mro__:
        if cls in OPENERS:
            return OPENERS[cls](b)
    raise NotImplementedError(f"no read stores for {type(b).__name__}: add it to OPENERS")


Opener = Callable[[Any], Reads]

# Jobs: every Unit of the world as a job its owner submitted, and two that a reader submitted
# for another owner without sharing a group: visible to the submitter only within its grants.
JOBS = [(name, scope, owner, owner, groups) for name, scope, owner, groups in WORLD] + [
    ("carol_submitted", "acme/alpha", "carol", "dave", ()),
    ("carol_outside", "acme/alphabet", "carol", "dave", ()),
]


def job_expected(rf: ReadFilter) -> set[str]:
    """The reference rule: the Units' visibility plus the submitter, within the grants."""
    return {
        f"doc-{name}"
        for name, scope, submitter, owner, groups in JOBS
        if may_read(rf.scopes, rf.principal, rf.groups, scope, owner, groups)
        or (submitter == rf.principal and within_any(scope, rf.scopes))
    }


def _enqueue_jobs(b: Any) -> dict[str, str]:
    ids = {}
    with b.write() as tx:
        for name, scope, submitter, owner, groups in JOBS:
            spec = JobSpec(
                "embed",
                scope,
                submitter,
                owner,
                groups,
                f"dedupe-{name}",
                json.dumps({"doc_id": f"doc-{name}"}),
            )
            ids[name] = tx.jobs.enqueue(spec)
    return ids


def _readers() -> list[ReadFilter]:
    return [
        ReadFilter.of(principal(name, groups, scopes), scopes, ())
        for name, groups, scopes in READERS
    ]


def check_counts_stay_within_the_scopes(kind: Factory, tmp: Path, reads: Opener = reads_of) -> None:
    """Counts of Units, jobs and outbox lag within some scopes take the ``/`` boundary: a
    child scope counts, a look-alike (``acme/alphabet``, ``acme/alpha-b``, ``acme/alpha0``), a
    parent or another tenant never does."""
    b = kind().open(tmp / "store")
    try:
        r = reads(b)
        with b.write() as tx:
            for i, (name, scope, owner, groups) in enumerate(WORLD):
                tx.units.insert(unit(name, scope, owner, groups), vector(i))
        _enqueue_jobs(b)
        for scopes in [("acme/alpha",), ("acme/alpha/x", "beta"), ("acme",), ("acme/alphabet",)]:
            want = sum(within_any(scope, scopes) for _, scope, _, _ in WORLD)
            want_jobs = sum(within_any(scope, scopes) for _, scope, *_ in JOBS)
            c = r.counts.within(scopes)
            assert sum(c.units_by_plane.values()) == want, scopes
            assert dict(c.units_by_plane) == ({"text": want} if want else {}), scopes
            assert dict(c.jobs_by_state) == ({"queued": want_jobs} if want_jobs else {}), scopes
            assert c.outbox_lag == want, (scopes, "nothing applied yet")
            assert (c.documents, c.objects, c.object_bytes) == (0, 0, 0), scopes
        b.outbox.replay()
        assert r.counts.within(("acme",)).outbox_lag == 0
        assert r.counts.within(()).units_by_plane == {}
        assert r.counts.units_total() == len(WORLD)
    finally:
        b.close()


CHECKS_READS = {f.__name__: f for f in (check_counts_stay_within_the_scopes,)}
