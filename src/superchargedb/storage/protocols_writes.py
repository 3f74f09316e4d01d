"""The write side's own concepts behind the storage seam: documents, quotas, usage, principals.

``protocols.py`` holds the one write transaction (``WriteTx``) and the Units, jobs and audit in
it; this module adds what the ingest pipeline, the deletes and the meter need beside them, in
plain domain types:

- ``DocWriter``: the stored Units of a document or of an idempotency key, as the write rules
  (``auth/acl.py``) judge them, and the document rows a quota counts (``reserve``);
- ``QuotaLedger``: what a principal holds against its caps (documents, object bytes, pages,
  media time, what queued jobs reserved), read inside the write so a check and the write it
  guards are one transaction (D-18); ``UsageWriter`` adds the request meter's counts;
- ``WordWriter``: a derived Unit's word table (``Word``: char span, time, page box);
- ``ObjectRowWriter``: an object's catalog entry removed in the delete that cascades to its Units;
- ``principals``: the auth store's ``PrincipalReader`` (a job runs as the principal that queued
  it, looked up by name);
- ``BulkLoad``: what a bulk import drives beside the write (the writer tuned for large batches,
  the index apply pipelined with the next batch, one checkpoint at the end);
- ``WriteStore``: what a writer is given: ``write()`` (a ``StoreTx``: ``WriteTx`` plus the two
  above), ``ordered()`` (held across a write and the index apply after it), and the readers.

Every lookup takes a sequence and answers in its order, so a backend serves a whole batch in one
round trip (D-176).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Protocol

from .protocols import JobQueue, WriteTx
from .protocols_auth import PrincipalReader

DocKey = tuple[str, str, str]  # (scope, doc_id, acl_owner): a document (D-17)
IdempotencyKey = tuple[str, str, str, str]  # (scope, doc_id, acl_owner, content_hash): idempotency


@dataclass(frozen=True)
class StoredUnit:
    """A stored Unit as the write rules see it (``acl.may_destroy`` and the idempotency key)."""

    unit_id: str
    scope: str
    doc_id: str
    acl_owner: str
    acl_groups: tuple[str, ...]
    content_hash: str
    plane: str

    def acl_view(self) -> dict[str, object]:
        """The fields ``auth/acl.py`` reads, as the mapping it takes."""
        return {"scope": self.scope, "acl_owner": self.acl_owner, "acl_groups": self.acl_groups}


@dataclass(frozen=True)
class MediaUse:
    """What a principal holds: its objects (each at its full size), the document pages and the
    media time of Units derived from objects."""

    objects: int
    object_bytes: int
    media_pages: int
    media_ms: int


@dataclass(frozen=True)
class UsageCount:
    """Requests and estimated cost one principal made on one route on one day (UTC days)."""

    principal: str
    day: int
    route: str
    requests: int
    cost_micro_usd: int


@dataclass(frozen=True)
class Word:
    """One word of a derived Unit's text: its char span, and where it was heard or seen."""

    start: int
    end: int
    t_start_ms: int | None = None
    t_end_ms: int | None = None
    page: int | None = None
    box: tuple[float, float, float, float] | None = None  # x0, y0, x1, y1 on the page
    conf: float | None = None


class DocReader(Protocol):
    def find(self, keys: Sequence[IdempotencyKey]) -> list[list[StoredUnit]]:
        """Per idempotency key, its stored Units in chunk order (empty: none stored)."""
        ...


class DocWriter(DocReader, Protocol):
    def units_of(self, docs: Sequence[DocKey]) -> list[list[StoredUnit]]:
        """Per document, every Unit stored in it (whoever may read them: the caller judges)."""
        ...

    def in_scopes(
        self, scopes: Sequence[str], *, doc_id: str | None = None, unit_id: str | None = None
    ) -> list[StoredUnit]:
        """Applied Units with ``doc_id`` (or the one ``unit_id``) whose scope lies within one of
        ``scopes`` (at or below it); the ACL is the caller's to judge (``acl.may_destroy``)."""
        ...

    def reserve(self, docs: Iterable[DocKey], created_by: str, at_ms: int) -> None:
        """Count each document against ``created_by``'s quota (once: a known one is kept)."""
        ...


class QuotaLedger(Protocol):
    def docs_used(self, principal: str) -> int:
        """Documents ``principal`` created (what its document quota counts)."""
        ...

    def unknown_docs(self, docs: Sequence[DocKey]) -> set[DocKey]:
        """Those of ``docs`` no quota counts yet (a write of them creates a document)."""
        ...

    def media_use(self, principal: str) -> MediaUse: ...

    def media_reserved(self, principal: str) -> tuple[int, int]:
        """(pages, milliseconds) the principal's queued and running derivations reserved."""
        ...


class UsageWriter(Protocol):
    def add(self, counts: Sequence[UsageCount]) -> None:
        """Add the counts to each (principal, day, route)'s totals."""
        ...


class WordWriter(Protocol):
    def put(self, unit_id: str, words: Sequence[Word]) -> None:
        """Replace the Unit's word table (it goes with the Unit when the Unit is deleted)."""
        ...


class KeyframeWriter(Protocol):
    def put(self, unit_id: str, mime: str, data: bytes) -> None:
        """Keep a video shot's keyframe image (it goes with the Unit when the Unit is deleted)."""
        ...


class ObjectRowWriter(Protocol):
    def remove(self, key: str, owner: str) -> None:
        """Forget ``owner``'s object at ``key`` (its blob is collected once nothing cites it)."""
        ...


class StoreTx(WriteTx, Protocol):
    """The write transaction with the write side's documents, quota and usage in it."""

    @property
    def docs(self) -> DocWriter: ...

    @property
    def quota(self) -> QuotaLedger: ...

    @property
    def usage(self) -> UsageWriter: ...

    @property
    def words(self) -> WordWriter: ...

    @property
    def keyframes(self) -> KeyframeWriter: ...

    @property
    def object_rows(self) -> ObjectRowWriter: ...


class WriteStore(Protocol):
    """What the ingest pipeline, the job runner, the deletes and the meter write through."""

    def write(self) -> AbstractContextManager[StoreTx]:
        """One write transaction: everything done through ``tx`` commits together."""
        ...

    def ordered(self) -> AbstractContextManager[None]:
        """Held across a write and the index apply after it, so operations apply in order."""
        ...

    @property
    def docs(self) -> DocReader: ...

    @property
    def quota(self) -> QuotaLedger: ...

    @property
    def principals(self) -> PrincipalReader: ...

    @property
    def jobs(self) -> JobQueue: ...


class BulkLoad(Protocol):
    """The index side of a bulk import, driven under :meth:`WriteStore.ordered` after each
    batch's commit (D-64): the vector add of one batch runs while the next is written."""

    def tuned(self, cache_mb: int) -> AbstractContextManager[None]:
        """The writer set up for large batches while the import runs (restored after)."""
        ...

    def apply_behind(self) -> None:
        """Apply the committed batch; its vector add may finish in the background."""
        ...

    def wait_behind(self) -> None:
        """Wait for a background vector add (re-raising its error)."""
        ...

    def checkpoint(self) -> None:
        """Persist the derived indexes (after :meth:`wait_behind`)."""
        ...
