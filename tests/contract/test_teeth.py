"""The contract suite has teeth: each broken variant of the embedded backend fails the check
that guards the rule it breaks (and a check that could not fail would show up here)."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

from contract.backends import VARIANTS, sqlite_kind
from contract.checks import CHECKS

CAUGHT_BY = {
    "IgnoresGroups": "check_reads_follow_the_filter",
    "LikePrefix": "check_reads_follow_the_filter",
    "AncestorScopes": "check_reads_follow_the_filter",
    "DropsOutbox": "check_outbox_replays_after_a_crash",
    "ClaimsTwice": "check_job_lease_is_fenced",
    "ForksAudit": "check_audit_has_one_chain_under_two_writers",
}


def test_every_variant_is_mapped() -> None:
    assert set(CAUGHT_BY) == set(VARIANTS)


@pytest.mark.parametrize("variant", sorted(CAUGHT_BY))
def test_broken_variant_fails_its_check(variant: str, tmp_path: Path) -> None:
    kind = functools.partial(sqlite_kind, VARIANTS[variant])
    with pytest.raises(AssertionError):
        CHECKS[CAUGHT_BY[variant]](kind, tmp_path)


@pytest.mark.parametrize("variant", sorted(CAUGHT_BY))
def test_broken_variant_passes_the_other_checks_it_does_not_touch(
    variant: str, tmp_path: Path
) -> None:
    """Each variant breaks one rule: the objects check (which no variant touches) passes, so a
    failure above is the rule's, not a variant that cannot run at all."""
    kind = functools.partial(sqlite_kind, VARIANTS[variant])
    CHECKS["check_objects_range_and_etag"](kind, tmp_path)
