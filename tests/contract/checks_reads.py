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

import pytest

from contract.backends import Kind
from contract.checks import READERS, WORLD, expected, fill, principal, unit, vector
from superchargedb.errors import ConflictError
from superchargedb.readfilter import ReadFilter, may_read, within_any
from superchargedb.storage.protocols import JobSpec
from superchargedb.storage.protocols_reads import (
    AuditTrail,
    CatalogCounts,
    JobListing,
    JobView,
    Maintenance,
)
from superchargedb.storage.sqlite.audit_trail import SqliteAuditTrail
from superchargedb.storage.sqlite.backend import SqliteBackend
from superchargedb.storage.sqlite.counts import SqliteCounts
from superchargedb.storage.sqlite.job_views import SqliteJobViews
from superchargedb.storage.sqlite.maintenance import SqliteMaintenance

Factory = Callable[..., Kind]


@dataclass(frozen=True)
class Reads:
    counts: CatalogCounts
    jobs: JobListing
    maintenance_at: Callable[[Path], Maintenance]  # the whole-store operations of a data dir
    audit: AuditTrail


def sqlite_reads(b: SqliteBackend) -> Reads:
    return Reads(
        SqliteCounts(b.catalog, lambda: b.sync.applied_seq),
        SqliteJobViews(b.catalog),
        SqliteMaintenance,
        SqliteAuditTrail(b.catalog, b.audit_key, None),
    )


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


def check_job_reads_follow_the_filter(kind: Factory, tmp: Path, reads: Opener = reads_of) -> None:
    """``get`` and every page of ``page`` show exactly the jobs the reference rule admits,
    oldest first without a gap or a repeat; a job's output reads back once it is done."""
    b = kind().open(tmp / "store")
    try:
        r = reads(b)
        ids = _enqueue_jobs(b)
        for rf in _readers():
            want = job_expected(rf)
            got = {f"doc-{n}" for n, i in ids.items() if r.jobs.get(i, rf) is not None}
            assert got == want, (rf.principal, "get")
            seen: list[JobView] = []
            after: tuple[int, str] | None = None
            while True:
                page = r.jobs.page(rf, state=None, after=after, limit=3)
                assert len(page) <= 3
                seen += page
                if len(page) < 3:
                    break
                after = (page[-1].created_at, page[-1].job_id)
            assert {j.doc_id for j in seen} == want, (rf.principal, "page")
            assert len(seen) == len(want), (rf.principal, "a job listed twice")
            keys = [(j.created_at, j.job_id) for j in seen]
            assert keys == sorted(keys), (rf.principal, "not oldest first")
        assert r.jobs.get("j_never", _readers()[0]) is None
        lease = b.jobs.claim()
        assert lease is not None
        with b.write() as tx:
            tx.jobs.complete(lease, json.dumps({"unit_ids": ["u-1", "u-2"]}))
        owner = next(o for n, _, _, o, _ in JOBS if ids[n] == lease.job_id)
        scope = next(s for n, s, *_ in JOBS if ids[n] == lease.job_id)
        rf = ReadFilter.of(principal(owner, set(), (scope,)), (scope,), ())
        done = r.jobs.get(lease.job_id, rf)
        assert done is not None and done.state == "done" and done.unit_ids == ("u-1", "u-2")
        assert done.attempts == 1 and done.doc_id is not None and done.error is None
        assert [j.job_id for j in r.jobs.page(rf, state="done", after=None, limit=10)] == [
            lease.job_id
        ]
        assert lease.job_id not in {
            j.job_id for j in r.jobs.page(rf, state="queued", after=None, limit=50)
        }
    finally:
        b.close()


def check_backup_restores_what_was_readable(
    kind: Factory, tmp: Path, reads: Opener = reads_of
) -> None:
    """A backup taken while the store is open restores into an empty data dir with every Unit
    (the manifest says how many), each reader reading exactly what it read before, the audit
    chain intact and the jobs listed as before; a second restore into it is refused."""
    k = kind()
    b = k.open(tmp / "store")
    try:
        fill(b)
        with b.write() as tx:
            tx.audit.append("alice", "contract.before_backup", {"n": 1})
        _enqueue_jobs(b)
        maintenance_at = reads(b).maintenance_at
        m = maintenance_at(tmp / "store").backup(tmp / "backup")
        assert m.units == len(WORLD) and m.audit_head_seq == 1 and m.audit_head_hash
    finally:
        b.close()
    restored = maintenance_at(tmp / "restored").restore(tmp / "backup")
    assert restored == m
    b = k.open(tmp / "restored")
    try:
        r = reads(b)
        assert r.counts.units_total() == len(WORLD)
        for rf in [ReadFilter.of(principal(*x), x[2], ["text"]) for x in READERS]:
            got = {f"u-{n}" for n, *_ in WORLD if b.units.get(f"u-{n}", rf) is not None}
            assert got == expected(rf), (rf.principal, "get after restore")
            listed = {j.doc_id for j in r.jobs.page(rf, state=None, after=None, limit=100)}
            assert listed == job_expected(rf), (rf.principal, "jobs after restore")
        report = b.audit.verify()
        assert report.ok and report.records == 1
    finally:
        b.close()
    with pytest.raises(ConflictError):
        maintenance_at(tmp / "restored").restore(tmp / "backup")


def check_audit_trail_verifies_counts_and_exports(
    kind: Factory, tmp: Path, reads: Opener = reads_of
) -> None:
    """The chain verifies with its head, every record exports in order with its body, and a
    tenant's count takes its actors' tenants (scope roots) exactly: ``acme`` never counts
    ``acme-b``, a bare operator name has no tenant."""
    b = kind().open(tmp / "store")
    try:
        r = reads(b)
        empty = r.audit.verify_chain()
        assert empty.ok and empty.records == 0 and list(r.audit.entries()) == []
        actors: list[Any] = [
            principal("alice", set(), ("acme/alpha",)),
            principal("bob", set(), ("acme-b/x",)),
            principal("carol", set(), ("acme", "beta/x")),
            "operator-tool",
        ]
        hashes = []
        for i, actor in enumerate(actors):
            with b.write() as tx:
                hashes.append(tx.audit.append(actor, "contract.act", {"i": i}))
        report = r.audit.verify_chain()
        assert report.ok and report.records == 4 and report.head == hashes[-1]
        assert report.first_bad_seq is None and report.reason is None
        for tenants, n in [({"acme"}, 2), ({"acme-b"}, 1), ({"beta"}, 1), ({"acm"}, 0), (set(), 0)]:
            assert r.audit.tenant_records(tenants) == n, tenants
        assert r.audit.tenant_records({"acme", "acme-b"}) == 3
        entries = list(r.audit.entries())
        assert [e.seq for e in entries] == [1, 2, 3, 4]
        assert [e.hash for e in entries] == hashes
        assert all(e.prev_hash == p.hash for p, e in zip(entries, entries[1:], strict=False))
        for i, e in enumerate(entries):
            body = json.loads(e.record_json)
            name = actors[i] if isinstance(actors[i], str) else actors[i].name
            assert (body["i"], body["action"], body["actor"], body["seq"]) == (
                i,
                "contract.act",
                name,
                e.seq,
            )
    finally:
        b.close()


CHECKS_READS = {
    f.__name__: f
    for f in (
        check_counts_stay_within_the_scopes,
        check_job_reads_follow_the_filter,
        check_backup_restores_what_was_readable,
        check_audit_trail_verifies_counts_and_exports,
    )
}
