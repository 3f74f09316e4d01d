"""Bulk import: Units with precomputed vectors, through the same catalog/outbox/index path.

``superchargedb import units.jsonl --vectors vectors.npy`` (D-64) loads millions of
Units in hours' less time than the API: nothing is embedded, and each batch (default 50,000
Units) is ONE write transaction (``tx.units.import_batch``, D-175) holding the Units, their
outbox adds, group rows, docs rows, generation bumps and one audit record (the backend's row
range, count, Merkle root of the content hashes). After each commit the derived indexes apply the
batch's outbox rows under ``ordered()`` as after an ingest, except that the HNSW add runs in a
background thread while the next batch is validated and written (``BulkLoad.apply_behind``);
they are checkpointed once at the end instead of every ``SCDB_CHECKPOINT_EVERY`` ops. A crash
mid-import leaves whole batches: the next start replays their outbox rows, and running the
import again skips what is stored (idempotency keys).

Each record is validated like an ingested Unit (same schema, scope grammar, content hash and
defaults) by the operator: any scope, any owner, no quota. A record is stored as ONE Unit: its
vector must be the configured model's embedding of its text (the import cannot chunk a vector).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from ..auth.admin import OPERATOR
from ..errors import SCDBError, ValidationError
from ..storage.ids import now_ms, uuid7
from ..storage.protocols import UnitRecord
from ..types import Principal
from .prepare import Prepared, prepare_unit

if TYPE_CHECKING:
    from ..models.embedder import Embedder
    from ..settings import Settings
    from ..storage.protocols_writes import BulkLoad, WriteStore


class BulkTarget(Protocol):
    """The components a bulk import writes through (the wiring's, or the service's)."""

    settings: Settings
    embedder: Embedder
    bulk: BulkLoad

    @property
    def writes(self) -> WriteStore: ...  # read-only: a richer store (the service's) fits


DEFAULT_BATCH = 50_000
IMPORT_CACHE_MB = 256  # the writer's SQLite page cache while an import runs


class Validator:
    """Validates import records as the operator would ingest them (one Unit each)."""

    def __init__(self, default_owner: str | None, max_text_chars: int) -> None:
        self.default_owner = default_owner
        self.max_text_chars = max_text_chars
        self._principals: dict[str, Principal] = {}

    def _principal(self, scope: str) -> Principal:
        # The operator may write anywhere; prepare_unit checks scopes against a grant list, so
        # grant it the record's own root.
        root = scope.split("/", 1)[0]
        p = self._principals.get(root)
        if p is None:
            p = dataclasses.replace(
                OPERATOR, name=self.default_owner or OPERATOR.name, scopes=(root,)
            )
            self._principals[root] = p
        return p

    def prepare(self, i: int, raw: Any) -> Prepared:
        """One record; raises ValidationError naming record ``i``."""
        try:
            if not isinstance(raw, dict):
                raise ValidationError("each record must be a JSON object")
            if not isinstance(raw.get("text"), str):
                raise ValidationError("text is required (import does not derive media)")
            if not isinstance(raw.get("scope"), str):
                raise ValidationError("scope is required", field="scope")
            if raw.get("acl_owner") is None and self.default_owner is None:
                raise ValidationError("acl_owner is required (or pass --owner)")
            p = prepare_unit(
                i, raw, self._principal(raw["scope"]), raw["scope"], None, self.max_text_chars
            )
        except SCDBError as exc:
            raise ValidationError(f"record {i}: {exc.message}", record=i) from None
        return p


def check_vectors(vectors: np.ndarray, n: int, dim: int, first: int = 0) -> np.ndarray:
    """Unit-length float32 rows, or a ValidationError naming the first bad row."""
    v = np.asarray(vectors, dtype=np.float32)
    if v.shape != (n, dim):
        raise ValidationError(f"vectors have shape {v.shape}, expected ({n}, {dim})")
    norms = np.linalg.norm(v, axis=1)
    bad = np.flatnonzero(~np.isfinite(norms) | (norms == 0.0))
    if bad.size:
        raise ValidationError(f"vector of record {first + int(bad[0])} is zero or not finite")
    return v / norms[:, None]


def import_batches(
    svc: BulkTarget,
    batches: Iterable[tuple[Sequence[Any], np.ndarray]],
    *,
    default_owner: str | None = None,
    actor: str = OPERATOR.name,
    progress: Callable[[int], None] | None = None,
) -> dict[str, Any]:
    """Import ``(records, vectors)`` batches; returns counts and timings."""
    val = Validator(default_owner, svc.settings.max_text_chars)
    dim = svc.embedder.dim
    store, bulk = svc.writes, svc.bulk
    created = unchanged = n_batches = offset = 0
    t0 = time.perf_counter()
    apply_s = vector_wait_s = 0.0
    with bulk.tuned(IMPORT_CACHE_MB):
        try:
            for records, vectors in batches:
                prepared = [val.prepare(offset + i, r) for i, r in enumerate(records)]
                vecs = check_vectors(vectors, len(prepared), dim, offset)
                now = now_ms()
                units = [_unit(p, now, actor) for p in prepared]
                with store.ordered():
                    with store.write() as tx:
                        stored = tx.units.import_batch(units, vecs, actor)
                    # The previous batch's HNSW add ran while this one was validated and written.
                    t1 = time.perf_counter()
                    bulk.wait_behind()
                    t2 = time.perf_counter()
                    bulk.apply_behind()
                    vector_wait_s += t2 - t1
                    apply_s += time.perf_counter() - t2
                created += stored
                unchanged += len(units) - stored
                offset += len(units)
                n_batches += 1
                if progress is not None:
                    progress(len(units))
            t1 = time.perf_counter()
            with store.ordered():
                bulk.wait_behind()
                vector_wait_s += time.perf_counter() - t1
                t1 = time.perf_counter()
                bulk.checkpoint()
            checkpoint_s = time.perf_counter() - t1
        finally:
            # An error leaves the committed batches to the outbox (replayed like a crash).
            with store.ordered():
                bulk.wait_behind()
    return {
        "records": offset,
        "created": created,
        "unchanged": unchanged,
        "batches": n_batches,
        "seconds": round(time.perf_counter() - t0, 3),
        "index_apply_s": round(apply_s, 3),
        "vector_wait_s": round(vector_wait_s, 3),
        "checkpoint_s": round(checkpoint_s, 3),
    }


def _unit(p: Prepared, now: int, actor: str) -> UnitRecord:
    """One record as the one Unit it is stored as (the import cannot chunk a vector)."""
    return UnitRecord(
        unit_id=uuid7(),
        scope=p.scope,
        doc_id=p.doc_id,
        plane=p.plane,
        modality=p.modality,
        text=p.text,
        acl_owner=p.acl_owner,
        acl_groups=tuple(p.acl_groups),
        content_hash=p.content_hash,
        source_uri=p.source_uri,
        mime=p.mime,
        locator=p.locator,
        created_at=now,
        event_at=p.event_at if p.event_at is not None else now,
        created_by=actor,
    )
