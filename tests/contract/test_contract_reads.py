"""The read side's contract on every backend kind, and its teeth: broken variants of the
SQLite read stores (each overriding one step, never a switch in production code) fail it."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from contract.backends import KINDS, skip_pending, sqlite_kind
from contract.checks_reads import CHECKS_READS, Reads
from superchargedb.readfilter import ReadFilter, may_read
from superchargedb.storage.protocols_reads import BackupManifest
from superchargedb.storage.sqlite.audit_trail import SqliteAuditTrail
from superchargedb.storage.sqlite.backend import SqliteBackend
from superchargedb.storage.sqlite.counts import SqliteCounts
from superchargedb.storage.sqlite.filter_sql import scope_sql
from superchargedb.storage.sqlite.job_views import SqliteJobViews
from superchargedb.storage.sqlite.maintenance import SqliteMaintenance


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("check", sorted(CHECKS_READS))
def test_backend_keeps_the_read_contract(kind: str, check: str, tmp_path: Path) -> None:
    skip_pending(kind, "reads")
    CHECKS_READS[check](KINDS[kind], tmp_path)


class CountsLikePrefix(SqliteCounts):
    """``scope LIKE t || '%'``: ``acme/alpha`` also counts ``acme/alphabet``."""

    def _scope(self, scopes: Any) -> tuple[str, list[object]]:
        return "(" + (" OR ".join("scope LIKE ?" for _ in scopes) or "0") + ")", [
            s + "%" for s in scopes
        ]


class JobsIgnoreGroups(SqliteJobViews):
    """The listing forgets the ACL leg: every job in scope is listed."""

    def _where(self, rf: ReadFilter) -> tuple[str, list[object]]:
        return scope_sql("j.scope", rf.scopes)


class JobsIgnoreSubmitter(SqliteJobViews):
    """``get`` forgets the submitter leg: a job the reader queued for another owner is hidden."""

    def _visible(self, row: Any, rf: ReadFilter) -> bool:
        groups = json.loads(row["acl_groups"])
        return may_read(rf.scopes, rf.principal, rf.groups, row["scope"], row["acl_owner"], groups)


class JobsSubmitterAnywhere(SqliteJobViews):
    """``get`` lets the submitter see its job outside its grants (scope leg dropped)."""

    def _visible(self, row: Any, rf: ReadFilter) -> bool:
        return row["principal"] == rf.principal or super()._visible(row, rf)


class CopiesTheFile(SqliteMaintenance):
    """A backup that copies ``catalog.db`` as a file: what the WAL holds is lost."""

    def backup(self, dest: Path) -> BackupManifest:
        m = super().backup(dest)
        shutil.copy2(self.data / "catalog.db", dest / "catalog.db")
        return m


class TenantsByPrefix(SqliteAuditTrail):
    """A tenant's count matches actor tenants by string prefix: ``acme`` counts ``acme-b``."""

    def tenant_records(self, tenants: Any) -> int:
        n = 0
        for e in self.entries():
            theirs = json.loads(e.record_json).get("actor_tenants") or []
            n += any(x.startswith(t) for x in theirs for t in tenants)
        return n


def _sqlite(
    counts: type[SqliteCounts] = SqliteCounts,
    jobs: type[SqliteJobViews] = SqliteJobViews,
    maintenance: type[SqliteMaintenance] = SqliteMaintenance,
    trail: type[SqliteAuditTrail] = SqliteAuditTrail,
) -> Callable[[SqliteBackend], Reads]:
    def opener(b: SqliteBackend) -> Reads:
        return Reads(
            counts(b.catalog, lambda: b.sync.applied_seq),
            jobs(b.catalog),
            maintenance,
            trail(b.catalog, b.audit_key, None),
        )

    return opener


COUNTS = "check_counts_stay_within_the_scopes"
JOBS = "check_job_reads_follow_the_filter"
BACKUP = "check_backup_restores_what_was_readable"
AUDIT = "check_audit_trail_verifies_counts_and_exports"
# variant: (its read stores, the check that catches it, a check it does not touch)
BROKEN = {
    "CountsLikePrefix": (_sqlite(counts=CountsLikePrefix), COUNTS, JOBS),
    "JobsIgnoreGroups": (_sqlite(jobs=JobsIgnoreGroups), JOBS, COUNTS),
    "JobsIgnoreSubmitter": (_sqlite(jobs=JobsIgnoreSubmitter), JOBS, COUNTS),
    "JobsSubmitterAnywhere": (_sqlite(jobs=JobsSubmitterAnywhere), JOBS, COUNTS),
    "CopiesTheFile": (_sqlite(maintenance=CopiesTheFile), BACKUP, JOBS),
    "TenantsByPrefix": (_sqlite(trail=TenantsByPrefix), AUDIT, COUNTS),
}


def test_every_check_has_a_variant() -> None:
    assert {check for _, check, _ in BROKEN.values()} == set(CHECKS_READS)


@pytest.mark.parametrize("variant", sorted(BROKEN))
def test_broken_read_store_fails_its_check(variant: str, tmp_path: Path) -> None:
    opener, check, _ = BROKEN[variant]
    with pytest.raises(AssertionError):
        CHECKS_READS[check](sqlite_kind, tmp_path, reads=opener)


@pytest.mark.parametrize("variant", sorted(BROKEN))
def test_broken_read_store_passes_the_check_it_does_not_touch(variant: str, tmp_path: Path) -> None:
    """Each variant breaks one rule: another check passes, so a failure above is the rule's."""
    opener, _, untouched = BROKEN[variant]
    CHECKS_READS[untouched](sqlite_kind, tmp_path, reads=opener)
