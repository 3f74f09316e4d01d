"""The read side's contract on every backend kind, and its teeth: broken variants of the
SQLite read stores (each overriding one step, never a switch in production code) fail it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from contract.backends import KINDS, sqlite_kind
from contract.checks_reads import CHECKS_READS, Reads
from superchargedb.storage.sqlite.backend import SqliteBackend
from superchargedb.storage.sqlite.counts import SqliteCounts


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("check", sorted(CHECKS_READS))
def test_backend_keeps_the_read_contract(kind: str, check: str, tmp_path: Path) -> None:
    CHECKS_READS[check](KINDS[kind], tmp_path)


class CountsLikePrefix(SqliteCounts):
    """``scope LIKE t || '%'``: ``acme/alpha`` also counts ``acme/alphabet``."""

    def _scope(self, scopes: Any) -> tuple[str, list[object]]:
        return "(" + (" OR ".join("scope LIKE ?" for _ in scopes) or "0") + ")", [
            s + "%" for s in scopes
        ]


def _sqlite(
    counts: type[SqliteCounts] = SqliteCounts,
) -> Callable[[SqliteBackend], Reads]:
    def opener(b: SqliteBackend) -> Reads:
        return Reads(counts(b.catalog, lambda: b.sync.applied_seq))

    return opener


BROKEN = {
    "CountsLikePrefix": (_sqlite(counts=CountsLikePrefix), "check_counts_stay_within_the_scopes"),
}


@pytest.mark.parametrize("variant", sorted(BROKEN))
def test_broken_read_store_fails_its_check(variant: str, tmp_path: Path) -> None:
    opener, check = BROKEN[variant]
    with pytest.raises(AssertionError):
        CHECKS_READS[check](sqlite_kind, tmp_path, reads=opener)
