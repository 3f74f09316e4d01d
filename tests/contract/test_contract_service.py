"""The facade's reads and the objects' catalog on every backend kind, and their teeth: each
broken variant of the embedded backend (a subclass overriding one step, never a switch in
production code) fails its check and still passes one it does not touch."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import pytest

from contract.backends import KINDS, IgnoresGroups, LikePrefix, skip_pending, sqlite_kind
from contract.checks_service import CHECKS
from superchargedb.readfilter import ReadFilter
from superchargedb.storage.protocols_service import RouteUsage, StoredObject
from superchargedb.storage.sqlite.backend import SqliteBackend
from superchargedb.storage.sqlite.listing import SqliteListing, SqliteUsage
from superchargedb.storage.sqlite.object_rows import SqliteObjectCatalog, stored_object


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("check", sorted(CHECKS))
def test_backend_keeps_the_service_contract(kind: str, check: str, tmp_path: Path) -> None:
    skip_pending(kind, "service")
    CHECKS[check](KINDS[kind], tmp_path)


class _PastTheWatermark(SqliteListing):
    """The listing forgets the applied watermark: a Unit the indexes do not hold is listed."""

    def __init__(self, catalog: Any, applied: Any, where: Any) -> None:
        super().__init__(catalog, applied, lambda rf, _seq: where(rf, None))


class _ScopeByPrefix(SqliteObjectCatalog):
    """An object's own scope matched as a string prefix: ``acme/alpha`` reads
    ``acme/alphabet``'s objects."""

    def _may_read(self, obj: StoredObject, rf: ReadFilter) -> bool:
        if any(obj.scope.startswith(s) for s in rf.scopes) and (
            obj.acl_owner == rf.principal or set(obj.acl_groups) & rf.groups
        ):
            return True
        return self._cited(obj, rf)


class _CitedByKeyOnly(SqliteObjectCatalog):
    """A Unit derived from an earlier content at the key still opens the object."""

    def _cited(self, obj: StoredObject, rf: ReadFilter) -> bool:
        where, params = self.where(rf, None)
        hit = (
            self.catalog.reader()
            .execute(
                f"SELECT 1 FROM units u WHERE u.object_key = ? AND {where} LIMIT 1",
                (obj.object_key, *params),
            )
            .fetchone()
        )
        return hit is not None


class _NewestFirst(SqliteObjectCatalog):
    """A read takes the newest readable object, not the reader's own one first."""

    def resolve(self, object_key: str, rf: ReadFilter) -> StoredObject | None:
        rows = (
            self.catalog.reader()
            .execute("SELECT * FROM objects WHERE key = ? ORDER BY created_at DESC", (object_key,))
            .fetchall()
        )
        return next((o for o in map(stored_object, rows) if self._may_read(o, rf)), None)


class _CollectsReferenced(SqliteObjectCatalog):
    """The collector removes a blob a Unit still cites (it counts the object rows only)."""

    def collect(self, sha256: str) -> bool:
        with self.catalog.locked() as conn:
            n = conn.execute("SELECT COUNT(*) FROM objects WHERE sha256 = ?", (sha256,))
            if n.fetchone()[0]:
                return False
        try:
            self.blobs.path(sha256).unlink()
        except FileNotFoundError:
            return False
        return True


class _CollectsUnlocked(SqliteObjectCatalog):
    """The collector counts references outside the write lock: a blob a write in flight has
    pinned and is about to name is removed."""

    def collect(self, sha256: str) -> bool:
        return self.blobs.collect(self.catalog.reader(), sha256)


class _UsageAllDays(SqliteUsage):
    """Request counts summed over every day, not the ones asked for."""

    def requests(self, principal: str, day_lo: int, day_hi: int) -> list[RouteUsage]:
        return super().requests(principal, -(2**62), 2**62)


class DoctorSkipsObjects(SqliteBackend):
    """The consistency report leaves the blob store out: a lost blob reads as ok."""

    def doctor(self) -> str:
        from superchargedb.storage.sqlite.doctor import doctor

        return json.dumps(doctor(self.catalog, self.sync.store, self.sync.lexical))


class ListingPastTheWatermark(SqliteBackend):
    @property
    def listing(self) -> SqliteListing:
        return _PastTheWatermark(self.catalog, lambda: self.sync.applied_seq, self._where)


class UsageAllDays(SqliteBackend):
    @property
    def usage(self) -> SqliteUsage:
        return _UsageAllDays(self.catalog)


def _objects_variant(cls: type[SqliteObjectCatalog]) -> type[SqliteBackend]:
    class Variant(SqliteBackend):
        @property
        def object_rows(self) -> SqliteObjectCatalog:
            return cls(self.catalog, self.blobs, self._where)

    Variant.__name__ = cls.__name__.strip("_")
    return Variant


LISTING = "check_listing_follows_the_filter"
USAGE = "check_usage_and_words"
RESOLVE = "check_objects_resolve_by_the_rule"
OBJECT_WRITES = "check_object_writes_and_collection"
REPORTS = "check_backend_reports_its_state"
PINNED = "check_a_pinned_blob_outlives_the_collector"
# variant: (its backend, the check that catches it, a check it does not touch)
BROKEN: dict[str, tuple[type[SqliteBackend], str, str]] = {
    "IgnoresGroups": (IgnoresGroups, LISTING, USAGE),
    "LikePrefix": (LikePrefix, LISTING, USAGE),
    "ListingPastTheWatermark": (ListingPastTheWatermark, LISTING, RESOLVE),
    "UsageAllDays": (UsageAllDays, USAGE, RESOLVE),
    "ScopeByPrefix": (_objects_variant(_ScopeByPrefix), RESOLVE, LISTING),
    "CitedByKeyOnly": (_objects_variant(_CitedByKeyOnly), RESOLVE, LISTING),
    "NewestFirst": (_objects_variant(_NewestFirst), RESOLVE, LISTING),
    "CollectsReferenced": (_objects_variant(_CollectsReferenced), OBJECT_WRITES, USAGE),
    "DoctorSkipsObjects": (DoctorSkipsObjects, REPORTS, LISTING),
    "CollectsUnlocked": (_objects_variant(_CollectsUnlocked), PINNED, LISTING),
}


def test_every_check_has_a_variant() -> None:
    assert {check for _, check, _ in BROKEN.values()} == set(CHECKS)


@pytest.mark.parametrize("variant", sorted(BROKEN))
def test_broken_variant_fails_its_service_check(variant: str, tmp_path: Path) -> None:
    cls, check, _ = BROKEN[variant]
    with pytest.raises(AssertionError):
        CHECKS[check](functools.partial(sqlite_kind, cls), tmp_path)


@pytest.mark.parametrize("variant", sorted(BROKEN))
def test_broken_variant_passes_the_check_it_does_not_touch(variant: str, tmp_path: Path) -> None:
    """Each variant breaks one rule and still runs: a failure above is the rule's."""
    cls, _, untouched = BROKEN[variant]
    CHECKS[untouched](functools.partial(sqlite_kind, cls), tmp_path)
