"""What the ingest pipeline and the job runner are given: components, never the service.

The server and ``superchargedb worker`` each build one :class:`IngestDeps` (the wiring does);
the two differ only in what happens after a commit (the server applies the outbox to its
in-memory indexes at once, a worker leaves that to the server that owns them) and in the object
gate (the server's object service; a worker's jobs read blobs they already pinned).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from ..models.embedder import Embedder
    from ..settings import Settings
    from ..storage.protocols_service import StoredObject
    from ..storage.protocols_writes import QuotaLedger, StoreTx, WriteStore
    from ..storage.sqlite.objects import FileBlobStore
    from ..types import Principal


class ObjectGate(Protocol):
    """The object rules an ingest that cites an object must pass (the object service)."""

    def object_for_read(self, principal: Principal, key: str) -> StoredObject: ...

    def check_media_caps(self, principal: Principal, planes: Iterable[str]) -> None: ...

    def check_blobs_kept(self, tx: StoreTx, prepared: Iterable[Any]) -> None: ...

    def media_caps(self, principal: Principal) -> tuple[int | None, int | None]: ...

    def check_media_reserve(
        self, ledger: QuotaLedger, principal: Principal, pages: int, ms: int
    ) -> None: ...


def _nothing() -> None:
    return None


@dataclass
class IngestDeps:
    settings: Settings
    store: WriteStore  # the one write transaction, the job queue, the write rules' reads
    embedder: Embedder
    blobs: FileBlobStore
    objects: ObjectGate | None = None  # None in a worker: it ingests no object by request
    apply: Callable[[], None] = _nothing  # after a commit, under the write lock
    wake: Callable[[], None] = _nothing  # new jobs were queued
