"""The search path's contract on every backend kind, and its teeth."""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from contract.backends import KINDS, VARIANTS, skip_pending, sqlite_kind
from contract.checks_search import CHECKS
from superchargedb.readfilter import ReadFilter
from superchargedb.storage.protocols_search import HitRow, UnitKey
from superchargedb.storage.sqlite.backend import SqliteBackend
from superchargedb.storage.sqlite.hit_rows import fetch_hit_rows
from superchargedb.storage.sqlite.search_store import SqliteSearchStore, _View


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("check", sorted(CHECKS))
def test_backend_keeps_the_search_contract(kind: str, check: str, tmp_path: Path) -> None:
    skip_pending(kind, "search")
    CHECKS[check](KINDS[kind], tmp_path)


class _TrustingView(_View):
    def recheck(
        self, fused: Sequence[tuple[UnitKey, float]], need: int
    ) -> tuple[list[tuple[UnitKey, float]], Mapping[UnitKey, HitRow]]:
        return list(fused), fetch_hit_rows(self.conn, [k for k, _ in fused])


class _TrustingStore(SqliteSearchStore):
    def view(self, rf: ReadFilter) -> _View:
        return _TrustingView(self, rf)


class TrustsTheIndex(SqliteBackend):
    """The re-check believes the derived index: an ACL change not yet applied shows."""

    def __init__(self, *a: object, **kw: object) -> None:
        super().__init__(*a, **kw)  # type: ignore[arg-type]
        s = self._search
        broken = _TrustingStore.__new__(_TrustingStore)
        broken.__dict__.update(s.__dict__)
        self._search = broken


BROKEN = {
    "IgnoresGroups": "check_search_legs_follow_the_filter",
    "LikePrefix": "check_search_legs_follow_the_filter",
    "AncestorScopes": "check_search_legs_follow_the_filter",
    "TrustsTheIndex": "check_recheck_hides_an_unapplied_acl_change",
}


@pytest.mark.parametrize("variant", sorted(BROKEN))
def test_broken_variant_fails_its_search_check(variant: str, tmp_path: Path) -> None:
    """The filter variants on FTS5, where the catalog's SQL is the only filter (with the sparse
    index its mask still holds the line: two filters must both break), the trusting re-check
    on the sparse index, whose lag it is there to cover."""
    cls = TrustsTheIndex if variant == "TrustsTheIndex" else VARIANTS[variant]
    lexical = "sparse" if variant == "TrustsTheIndex" else "fts5"
    kind = functools.partial(sqlite_kind, cls, lexical=lexical)
    with pytest.raises(AssertionError):
        CHECKS[BROKEN[variant]](kind, tmp_path)
