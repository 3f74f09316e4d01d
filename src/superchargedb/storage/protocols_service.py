"""The service facade's own reads and the objects' catalog behind the storage seam, and the one
backend a server process takes its parts from.

Beside the Units, indexes and write transaction (``protocols.py``, ``protocols_writes.py``),
these are what ``documents.py``, ``objects_service.py`` and ``service.py`` read, in plain domain
types:

- ``Listing``: the documents and Units a reader may list, paged by a keyset position;
- ``UsageReader``: what a principal's Units hold and the requests the meter counted;
- ``WordReader``: derived Units' word tables (``protocols_writes.Word``), by Unit id;
- ``ObjectCatalog``: objects by (key, owner) (D-47): the caller's own one, what a read of a
  key resolves to, the Units cited from an object's content, the blob collector;
  ``ObjectRowsWriter`` is its side inside the write transaction (``ServiceTx.object_rows``,
  which ``ServiceStore.write()`` gives);
- ``ServerBackend``: everything a server's parts are taken from (``wiring.py`` opens one).

Every read that returns Units, documents or objects takes the caller's
:class:`~superchargedb.readfilter.ReadFilter` and applies the visibility rule in the backend's
own form (D-230); the contract checks (``tests/contract/checks_service.py``) compare each with
:meth:`ReadFilter.admits`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Protocol

from ..readfilter import ReadFilter
from .protocols import Outbox, UnitReader, UnitRecord, VectorIndex
from .protocols_auth import AuthStore, AuthTx
from .protocols_reads import AuditTrail, CatalogCounts, JobListing
from .protocols_search import SearchStore, UnitKey
from .protocols_writes import BulkLoad, ObjectRowWriter, StoredUnit, StoreTx, Word, WriteStore


@dataclass(frozen=True)
class DocSummary:
    """One document as a reader lists it, counted over the Units that reader may see."""

    scope: str
    doc_id: str
    units: int
    planes: tuple[str, ...]  # sorted
    modalities: tuple[str, ...]  # sorted
    source_uri: str | None  # the least one of its Units'
    created_at: int  # its oldest Unit's
    updated_at: int  # its newest Unit's


@dataclass(frozen=True)
class UnitUsage:
    """The Units a principal created: how many in each plane (only planes holding one) and
    their text's length in characters."""

    per_plane: Mapping[str, int]
    text_chars: int


@dataclass(frozen=True)
class RouteUsage:
    """A principal's flushed request counts on one route over some days."""

    route: str
    requests: int
    cost_micro_usd: int


@dataclass(frozen=True)
class StoredObject:
    """An object's catalog entry: identified by (``object_key``, ``acl_owner``), its bytes by
    ``sha256``. ``created_at`` orders the writes at one key (the newest is the last written)."""

    object_key: str
    acl_owner: str
    sha256: str
    size: int
    content_type: str
    scope: str
    acl_groups: tuple[str, ...]
    created_by: str
    created_at: int = 0

    @property
    def etag(self) -> str:
        return f'"{self.sha256}"'


class Listing(Protocol):
    """What ``GET /v1/docs`` and ``GET /v1/units`` list: Units ``rf`` admits that the indexes
    already hold (a Unit committed but not yet applied is not listed)."""

    def docs(
        self, rf: ReadFilter, *, after: tuple[str, str] | None, limit: int
    ) -> list[DocSummary]:
        """Up to ``limit`` documents holding an admitted Unit, by ``(scope, doc_id)``, after
        the keyset position ``after``."""
        ...

    def units(
        self, rf: ReadFilter, *, after: UnitKey | None, limit: int
    ) -> list[tuple[UnitKey, UnitRecord]]:
        """Up to ``limit`` admitted Units in the backend's storage order, after the key
        ``after`` (each with its key: the next page's position)."""
        ...


class UsageReader(Protocol):
    def units_created(self, principal: str) -> UnitUsage:
        """The Units ``principal`` created (its quota's and usage's count)."""
        ...

    def requests(self, principal: str, day_lo: int, day_hi: int) -> list[RouteUsage]:
        """Flushed request counts per route over UTC days ``day_lo`` to ``day_hi`` (both
        included)."""
        ...


class WordReader(Protocol):
    def of_units(self, unit_ids: Sequence[str]) -> Mapping[str, list[Word]]:
        """The word tables of Units the caller may already read (absent: no words)."""
        ...


@dataclass(frozen=True)
class Keyframe:
    """A video shot's kept keyframe image (D-236)."""

    mime: str
    data: bytes


class KeyframeReader(Protocol):
    def present(self, unit_ids: Sequence[str]) -> set[str]:
        """Those of the Units (already readable by the caller) that keep a keyframe."""
        ...

    def get(self, unit_id: str) -> Keyframe | None:
        """The Unit's keyframe (the caller has checked the Unit's read)."""
        ...


class ObjectRows(Protocol):
    def own(self, object_key: str, owner: str) -> StoredObject | None:
        """``owner``'s object at the key (never another owner's)."""
        ...

    def bytes_held(self, owner: str, *, excluding: str) -> int:
        """The sizes of ``owner``'s objects but the one at ``excluding`` (a replace frees it)."""
        ...


class ObjectRowsWriter(ObjectRows, ObjectRowWriter, Protocol):
    """The objects inside the one write transaction: reads see its own writes."""

    def pin(self, sha256: str) -> None:
        """Keep the blob from the collector until this transaction ends: taken before a write
        names a blob that may already be stored (a PUT de-duplicating onto it, Units citing
        it), so :meth:`ObjectCatalog.collect` never removes it in between (D-245)."""
        ...

    def put(self, obj: StoredObject) -> StoredObject:
        """Create or replace ``obj.acl_owner``'s object at its key (a replace keeps scope,
        groups and creator); stamps ``created_at`` later than every write at the key so far,
        even within one millisecond. Returns what is stored."""
        ...


class ObjectCatalog(ObjectRows, Protocol):
    def resolve(self, object_key: str, rf: ReadFilter) -> StoredObject | None:
        """What a read of the key means: ``rf.principal``'s own object, else the newest one,
        that ``rf`` may read: its scope within ``rf.scopes`` and its owner the reader or a
        group shared, or a Unit ``rf`` admits was derived from exactly its content (D-47)."""
        ...

    def citing(self, obj: StoredObject, rf: ReadFilter) -> list[StoredUnit]:
        """Units ``rf`` admits derived from exactly this content (the object's key and blob),
        in storage order; committed ones, applied or not."""
        ...

    def collect(self, sha256: str) -> bool:
        """Remove the blob once nothing references it (run after the commit that dropped a
        reference, in write order); True when removed."""
        ...


class ServiceTx(StoreTx, AuthTx, Protocol):
    """The one write transaction with the objects' catalog in it."""

    @property
    def object_rows(self) -> ObjectRowsWriter: ...


class ServiceStore(WriteStore, Protocol):
    """What the facade writes through: the write side with the objects' catalog in ``tx``."""

    def write(self) -> AbstractContextManager[ServiceTx]:
        """One write transaction: everything done through ``tx`` commits together."""
        ...


class ServerBackend(ServiceStore, AuthStore, Protocol):
    """One server process's store: every part the wiring builds above storage comes from it."""

    def write(self) -> AbstractContextManager[ServiceTx]:
        """One write transaction: everything done through ``tx`` commits together."""
        ...

    @property
    def units(self) -> UnitReader: ...

    @property
    def vectors(self) -> VectorIndex: ...

    @property
    def search(self) -> SearchStore: ...

    @property
    def outbox(self) -> Outbox: ...

    @property
    def bulk(self) -> BulkLoad: ...

    @property
    def counts(self) -> CatalogCounts: ...

    @property
    def job_views(self) -> JobListing: ...

    @property
    def audit_trail(self) -> AuditTrail: ...

    @property
    def listing(self) -> Listing: ...

    @property
    def usage(self) -> UsageReader: ...

    @property
    def words(self) -> WordReader: ...

    @property
    def keyframes(self) -> KeyframeReader: ...

    @property
    def object_rows(self) -> ObjectCatalog: ...

    @property
    def ready(self) -> bool:
        """The derived indexes are loaded: reads may be served."""
        ...

    def sizes(self) -> Mapping[str, float]:
        """The store's own memory and file sizes for the memory log (names ending ``_mb``)."""
        ...

    def doctor(self) -> str:
        """The store's consistency report (``superchargedb doctor``), as JSON text: an object
        whose ``ok`` is false when data is lost or an index disagrees with the catalog."""
        ...

    def close(self) -> None:
        """Persist the derived indexes, sign the audit head and release everything (the
        threads are stopped first)."""
        ...
