"""Runs derivation jobs: claim -> derive (subprocess engines) -> chunk + embed -> one transaction.

The transaction writes the derived Units (idempotent per Unit key, replacing the document's
previous derivation) and marks the job done only while this worker still holds the lease, so a
job finishes exactly once even when a worker is killed mid-way and another takes it over.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import threading
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import orjson

from .. import acting, faults
from ..errors import SCDBError, UnavailableError
from ..storage.protocols import JobQueue, Lease, LeaseLostError
from ..storage.protocols_writes import Word
from . import deferred
from .derive import DerivationError, Derived, DeriveOptions, MediaLimits, derive
from .engine_settings import options_from
from .page_words import chunk_tables, union
from .prepare import Prepared

if TYPE_CHECKING:
    from .pipeline import Ingestor

log = logging.getLogger(__name__)

PROGRESS_DERIVED = 0.5  # the progress a running job reports (derivation is most of the work)


def chunk_words(p: Prepared, table: list[dict[str, Any]] | None) -> list[list[dict[str, Any]]]:
    """Each chunk's word table (D-211); a page chunk's box narrows to its own words' union, so
    a chunk of a long region no longer carries the whole region's box."""
    if not table:
        return [[] for _ in p.chunks]
    spans = p.spans or [(0, len(p.text))]
    tables = chunk_tables(table, spans)
    if len(tables) > 1:
        for i, ((text, loc), t) in enumerate(zip(p.chunks, tables, strict=True)):
            boxes = [w["box"] for w in t if w.get("box")]
            if loc is not None and loc.kind == "bbox" and boxes:
                p.chunks[i] = (text, replace(loc, box=union(boxes)))
    return tables


def derived_hash(d: Derived, source_uri: str, mime: str, object_sha: str) -> str:
    canon = {
        "object": object_sha,
        "text": d.text,
        "modality": d.modality,
        "plane": d.plane,
        "locator": d.locator.to_dict(),
        "source_uri": source_uri,
        "mime": mime,
    }
    return hashlib.sha256(orjson.dumps(canon, option=orjson.OPT_SORT_KEYS)).hexdigest()


class JobRunner:
    def __init__(
        self,
        ingestor: Ingestor,
        queue: JobQueue,
        limits: MediaLimits,
        options: DeriveOptions | None = None,
    ) -> None:
        self.ingestor = ingestor
        self.queue = queue
        self.limits = limits
        self.options = options or options_from(ingestor.deps.settings)

    def run_once(self) -> bool:
        """Claim and run one job; False when there was nothing to do."""
        job = self.queue.claim()
        if job is None:
            return False
        stop = threading.Event()
        beat = threading.Thread(target=self._heartbeat, args=(job, stop), daemon=True)
        beat.start()
        # The job runs as its tenant: confined to it like the request that queued it, and
        # on the cluster that holds it when tenants are spread over several (D-277).
        with acting.acting_for([job.scope]):
            return self._attempt(job, stop, beat)

    def _attempt(self, job: Lease, stop: threading.Event, beat: threading.Thread) -> bool:
        try:
            self._run(job)
        except LeaseLostError:
            log.warning("job %s: lease lost, another worker owns it now", job.job_id)
        except DerivationError as exc:
            # Bad input fails at once; a timeout or an engine crash may pass on another try.
            self._fail(job, exc.message, retry=bool(getattr(exc, "retryable", False)))
        except SCDBError as exc:
            self._fail(job, f"{exc.code}: {exc.message}", retry=True)
        except Exception as exc:  # engine crash, timeout, I/O: retry until max_attempts
            log.exception("job %s failed", job.job_id)
            self._fail(job, f"{type(exc).__name__}: {exc}", retry=True)
        finally:
            stop.set()
            beat.join(timeout=5)
        return True

    def _fail(self, job: Lease, reason: str, retry: bool) -> None:
        # Unreachable database: the lease expires and another attempt runs the job.
        with contextlib.suppress(LeaseLostError, UnavailableError):
            self.queue.fail(job, reason, retry=retry)

    def _heartbeat(self, job: Lease, stop: threading.Event) -> None:
        interval = max(1.0, self.queue.lease_s / 3)
        while not stop.wait(interval):
            try:
                self._renew(job)
            except LeaseLostError:
                return

    def _renew(self, job: Lease) -> None:
        """Extend the lease; raises LeaseLostError once another worker owns the job."""
        try:
            self.queue.heartbeat(job, PROGRESS_DERIVED)
        except LeaseLostError:
            raise
        except Exception:  # a missed heartbeat only risks a takeover, which is safe
            log.debug("heartbeat failed", exc_info=True)

    def _run(self, job: Lease) -> None:
        if job.kind == deferred.KIND:  # text past a request's chunk budget: embed and store
            prepared, mode = deferred.prepared_of(job)
            self.ingestor._chunk_and_embed(self.ingestor._skip_known(prepared))
            self._store(job, prepared, mode)
            return
        ing = self.ingestor
        svc = ing.deps
        pl: dict[str, Any] = json.loads(job.payload_json)
        blob = svc.blobs.path(pl["sha256"])
        derived = derive(blob, pl["mime"], pl["modality"], limits=self.limits, options=self.options)
        faults.point("jobs.after_derive")
        # Every derivation that returns renews the lease, not only the timer: a job taken over
        # during a long derivation stops here (LeaseLostError) instead of embedding for nothing, and
        # the renewal is a step of every run, not a race against the clock.
        self._renew(job)
        if not derived:
            raise DerivationError("nothing could be derived from the object")
        prepared = []
        for i, d in enumerate(derived):
            uri = pl["source_uri"] + d.fragment
            captured = pl.get("captured_at") or d.meta.get("captured_at")
            event_at = None
            if captured is not None:
                event_at = int(captured) + (d.locator.t_start_ms or 0)
            prepared.append(
                Prepared(
                    index=i,
                    scope=job.scope,
                    doc_id=pl["doc_id"],
                    modality=d.modality,
                    plane=d.plane,
                    source_uri=uri,
                    mime=pl["mime"],
                    locator=d.locator,
                    acl_owner=job.acl_owner,
                    acl_groups=list(job.acl_groups),
                    content_hash=derived_hash(d, uri, pl["mime"], pl["sha256"]),
                    text=d.text,
                    event_at=event_at,
                    object_key=pl["object_key"],
                    object_sha=pl["sha256"],
                )
            )
        ing._chunk_and_embed(prepared)
        tables = [
            chunk_words(p, d.meta.get("unit_words")) for p, d in zip(prepared, derived, strict=True)
        ]
        keyframes = [d.meta.get("keyframe_jpeg") for d in derived]
        self._store(job, prepared, "replace", tables, keyframes)

    def _store(
        self,
        job: Lease,
        prepared: list[Prepared],
        mode: str,
        words: list[list[list[dict[str, Any]]]] | None = None,
        keyframes: list[bytes | None] | None = None,
    ) -> None:
        """Write a job's embedded Units and complete it, in one transaction under the lease."""
        ing = self.ingestor
        store = ing.deps.store
        faults.point("jobs.after_embed")
        state = store.principals.named(job.principal)
        if state is None:
            raise DerivationError("the principal that queued this job no longer exists")
        queued_by = state.principal
        pl = json.loads(job.payload_json)  # the key that queued the job, for the audit record
        principal = replace(queued_by, key_id=pl.get("key_id"), key_issuer=pl.get("key_issuer"))
        with store.ordered():
            with store.write() as tx:
                outcomes = ing._write(
                    tx,
                    principal,
                    prepared,
                    mode,
                    check_quota=False,
                    action="ingest.derived",
                )
                for o, tables in zip(outcomes, words or [], strict=False):
                    # One table per stored chunk, its offsets the chunk's own (chunk_words).
                    for uid, table in zip(o.unit_ids, tables, strict=False):
                        if table:
                            tx.words.put(uid, _words(table))
                for o, still in zip(outcomes, keyframes or [], strict=False):
                    if still is not None:
                        for uid in o.unit_ids:  # every chunk of a shot shows its frame
                            tx.keyframes.put(uid, "image/jpeg", still)
                faults.point("jobs.before_complete")
                ids = [u for o in outcomes for u in o.unit_ids]
                tx.jobs.complete(job, json.dumps({"unit_ids": ids, "units": len(ids)}))
            faults.point("jobs.after_complete")
            ing.deps.apply()
            faults.point("jobs.after_apply")


def _words(table: Sequence[dict[str, Any]]) -> list[Word]:
    """A derivation's word table (``derive_base``'s dicts) as the store's records."""
    return [
        Word(
            start=int(w["start"]),
            end=int(w["end"]),
            t_start_ms=w.get("t_start_ms"),
            t_end_ms=w.get("t_end_ms"),
            page=w.get("page"),
            box=tuple(w["box"]) if w.get("box") else None,
            conf=w.get("conf"),
        )
        for w in table
    ]
