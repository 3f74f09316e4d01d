"""Bulk import: Units with precomputed vectors, through the same catalog/outbox/index path.

``superchargedb import units.jsonl --vectors vectors.npy`` (D-64) loads millions of
Units in hours' less time than the API: nothing is embedded, and each batch (default 50,000
Units) is ONE ``BEGIN IMMEDIATE`` transaction holding the Units, their outbox adds, group rows,
docs rows, generation bumps and one audit record (rowid range, count, Merkle root of the content
hashes). After each commit the derived indexes apply the batch's outbox rows under the writer
lock as after an ingest, except that the HNSW add runs in a background thread while the next
batch is validated and written (``IndexSync.apply_pending(background=True)``); they are
checkpointed once at the end instead of every ``SCDB_CHECKPOINT_EVERY`` ops. A crash
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
from ..storage.sqlite import audit
from ..storage.sqlite import units as units_sql
from ..storage.sqlite.bulk import insert_units
from ..types import Principal
from .prepare import Prepared, prepare_unit

if TYPE_CHECKING:
    from ..models.embedder import Embedder
    from ..settings import Settings
    from ..storage.sqlite.catalog import Catalog
    from ..storage.sqlite.index_sync import IndexSync


class BulkTarget(Protocol):
    """The components a bulk import writes through (the wiring's, or the service's)."""

    settings: Settings
    embedder: Embedder
    catalog: Catalog
    sync: IndexSync
    audit_key: bytes


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
    model_id, dim = svc.embedder.model_id, svc.embedder.dim
    created = unchanged = n_batches = offset = 0
    t0 = time.perf_counter()
    apply_s = vector_wait_s = 0.0
    with svc.catalog.locked() as conn:
        old_cache = int(conn.execute("PRAGMA cache_size").fetchone()[0])
        # A batch inserts into every secondary index of a large table at random places; a page
        # cache that holds those indexes keeps each commit from re-reading them (import only).
        kib = max(IMPORT_CACHE_MB * 1024, -old_cache if old_cache < 0 else 0)
        conn.execute(f"PRAGMA cache_size=-{kib}")
    try:
        for records, vectors in batches:
            prepared = [val.prepare(offset + i, r) for i, r in enumerate(records)]
            vecs = check_vectors(vectors, len(prepared), dim, offset)
            now = units_sql.now_ms()
            rows = [_row(p, now, actor, model_id) for p in prepared]
            with svc.catalog.write_lock():
                with svc.catalog.write() as conn:
                    ids = _write_batch(svc, conn, rows, vecs, now, actor)
                # The previous batch's HNSW add ran while this one was validated and written.
                t1 = time.perf_counter()
                svc.sync.wait_vectors()
                t2 = time.perf_counter()
                svc.sync.apply_pending(checkpoint=False, background=True)
                vector_wait_s += t2 - t1
                apply_s += time.perf_counter() - t2
            created += len(ids)
            unchanged += len(rows) - len(ids)
            offset += len(rows)
            n_batches += 1
            if progress is not None:
                progress(len(rows))
        t1 = time.perf_counter()
        with svc.catalog.write_lock():
            svc.sync.wait_vectors()
            vector_wait_s += time.perf_counter() - t1
            t1 = time.perf_counter()
            svc.sync.checkpoint()
        checkpoint_s = time.perf_counter() - t1
    finally:
        with svc.catalog.write_lock():
            # An error leaves the committed batches to the outbox (replayed like a crash).
            try:
                svc.sync.wait_vectors()
            finally:
                with svc.catalog.locked() as conn:
                    conn.execute(f"PRAGMA cache_size={old_cache}")
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


def _write_batch(
    svc: BulkTarget,
    conn: Any,
    rows: list[dict[str, Any]],
    vecs: np.ndarray,
    now: int,
    actor: str,
) -> list[int]:
    """One batch's Units, outbox adds, docs rows, generation bumps and audit record."""
    ids, positions = insert_units(conn, rows, vecs)
    stored = [rows[i] for i in positions]
    docs = {(r["scope"], r["doc_id"], r["acl_owner"]) for r in stored}
    conn.executemany(
        "INSERT OR IGNORE INTO docs(scope, doc_id, acl_owner, created_by, created_at)"
        " VALUES (?,?,?,?,?)",
        [(s, d, o, actor, now) for s, d, o in sorted(docs)],
    )
    scopes = sorted({r["scope"] for r in stored})
    if ids:
        units_sql.bump_generations(conn, scopes)
        audit.append(
            conn,
            svc.audit_key,
            actor,
            "import",
            {
                "units": len(ids),
                "rowids": [ids[0], ids[-1]],
                "unchanged": len(rows) - len(ids),
                "scopes": scopes,
                "merkle_root": audit.merkle_root([r["content_hash"] for r in stored]),
            },
        )
    return ids


def _row(p: Prepared, now: int, actor: str, model_id: str) -> dict[str, Any]:
    event_at = p.event_at if p.event_at is not None else now
    return {
        "unit_id": units_sql.uuid7(),
        "scope": p.scope,
        "doc_id": p.doc_id,
        "modality": p.modality,
        "plane": p.plane,
        "source_uri": p.source_uri,
        "mime": p.mime,
        "text": p.text,
        "acl_owner": p.acl_owner,
        "acl_groups": p.acl_groups,
        "content_hash": p.content_hash,
        "locator": p.locator.to_columns() if p.locator else None,
        "created_at": now,
        "event_at": event_at,
        "created_by": actor,
        "model_id": model_id,
    }
