"""The service facade: the one object the API, the CLI and the tests call.

It holds the parts ``wiring.build_components`` made (the storage backend's Protocols, the cache,
the embedder) and composes the ingest and search pipelines. Nothing here knows about HTTP or
speaks to a database.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError as PydanticValidationError

from . import faults
from .auth import acl
from .auth import principals as principals_mod
from .auth.scopes import check_scope, clamp
from .background import Background
from .components import Components
from .documents import DocumentsMixin, has_preview, unit_dict, word_dicts
from .errors import (
    ForbiddenError,
    NotFoundError,
    UpgradeRequiredError,
    ValidationError,
)
from .ingest.pipeline import Ingestor, required_tier
from .ingest.prepare import pydantic_message
from .jobs_view import JobsMixin
from .models.executor import EmbedExecutor
from .objects_service import ObjectsMixin
from .preview import PreviewSource
from .ratelimit import RefusedKeys
from .readfilter import ReadFilter
from .schemas import AegisQuery
from .search.cache import cache_key
from .tenancy import TenancyMixin
from .types import PLANES, TIER_PLANES, Principal, Trace

if TYPE_CHECKING:
    from .storage.protocols import UnitRecord
    from .storage.protocols_writes import StoreTx

log = logging.getLogger(__name__)


class Service(TenancyMixin, DocumentsMixin, ObjectsMixin, JobsMixin):
    """The facade the API and the CLI call, over parts built by ``wiring.open_service``."""

    def __init__(self, parts: Components, background: Background) -> None:
        self.parts = parts
        self.background = background
        self.settings = parts.settings
        self.lock = parts.lock
        self.embedder = parts.embedder
        self.audit_key = parts.audit_key
        self.audit_anchor = parts.audit_anchor
        self.cache = parts.cache
        self.limiter = parts.limiter
        self.refused_keys = RefusedKeys()
        self.reranker = parts.reranker
        self.searcher = parts.searcher
        self.answerer = parts.answerer
        self.blobs = parts.blobs
        self.writes = parts.writes
        self.bulk = parts.bulk
        self.meter = parts.meter
        self.metrics = parts.metrics
        self.counts = parts.counts
        self.job_views = parts.job_views
        self.audit_trail = parts.audit_trail
        self.auth_store = parts.auth_store
        self.outbox = parts.outbox
        self.vectors = parts.vectors
        self.unit_reader = parts.unit_reader
        self.word_reader = parts.word_reader
        self.keyframes = parts.keyframes
        self.listing = parts.listing
        self.usage_reader = parts.usage_reader
        self.object_rows = parts.object_rows
        self.swept = parts.swept
        self.versions = parts.versions
        self.ingestor: Ingestor  # set by the wiring (it needs this facade as its object gate)
        self._register_gauges()

    def jobs_wakeup(self) -> None:
        self.background.wake.set()

    def memory_gauges(self) -> dict[str, float]:
        """Sizes of the in-process caches and indexes (memstats.MemoryLog)."""
        mb = 2**20
        cand_bytes, cand_entries = self.searcher.store.cache_stats()
        return {
            "result_cache_mb": round(self.cache.nbytes / mb, 2),
            "candidate_cache_mb": round(cand_bytes / mb, 2),
            "candidate_cache_entries": cand_entries,
            "embed_cache_entries": (
                self.embedder.cache_len() if isinstance(self.embedder, EmbedExecutor) else 0
            ),
            "units_indexed": float(sum(self.vectors.count(p) for p in PLANES)),
            **self.parts.backend.sizes(),
        }

    def _register_gauges(self) -> None:
        m = self.metrics

        def index_size() -> dict[tuple[tuple[str, str], ...], float]:
            return {(("plane", p),): float(self.vectors.count(p)) for p in PLANES}

        def outbox_lag() -> dict[tuple[tuple[str, str], ...], float]:
            return {(): float(self.outbox.head() - self.outbox.applied())}

        def cache_stats() -> dict[tuple[tuple[str, str], ...], float]:
            return {(("result", "hit"),): self.cache.hits, (("result", "miss"),): self.cache.misses}

        def wal_bytes() -> dict[tuple[tuple[str, str], ...], float]:
            wal = Path(self.settings.data_dir) / "catalog.db-wal"
            return {(): float(wal.stat().st_size if wal.exists() else 0)}

        m.gauge("scdb_index_vectors", "Live vectors in each plane's index", index_size)
        m.gauge("scdb_outbox_lag", "Outbox operations committed but not yet applied", outbox_lag)
        m.gauge("scdb_cache_lookups", "Result cache lookups by result", cache_stats)
        m.gauge("scdb_wal_bytes", "Size of the SQLite write-ahead log", wal_bytes)

        def queue_depth() -> dict[tuple[tuple[str, str], ...], float]:
            return {(("state", k),): float(v) for k, v in self.writes.jobs.depth().items()}

        m.gauge("scdb_jobs", "Derivation jobs by state (queue depth: queued)", queue_depth)

    def close(self) -> None:
        """Stop the background threads, then close the parts (flush, checkpoint, anchor)."""
        self.background.stop()
        self.parts.close()

    def doctor(self) -> dict[str, Any]:
        report: dict[str, Any] = json.loads(self.parts.backend.doctor())
        return report

    @property
    def ready(self) -> bool:
        return self.parts.backend.ready

    # -- auth ------------------------------------------------------------------------------
    def authenticate(self, authorization: str | None) -> Principal:
        return principals_mod.authenticate(self.auth_store.principals, authorization)

    def request_scope(
        self, principal: Principal, header: str | None, query: str | None
    ) -> list[str]:
        """Scope of a read request: header or ?scope=, clamped to grants (D-3, D-4)."""
        if header is not None and query is not None and header != query:
            raise ValidationError("X-Aegis-Scope and ?scope= disagree", field="scope")
        raw = header if header is not None else query
        requested = check_scope(raw if raw is not None else principal.active_scope, "scope")
        return clamp(requested, principal.scopes)

    # -- ingest ----------------------------------------------------------------------------
    def ingest(
        self, principal: Principal, body: Any, header_scope: str | None = None
    ) -> dict[str, Any]:
        if not principal.has("write"):
            raise ForbiddenError("the write permission is required to ingest")
        if not isinstance(body, dict) or not isinstance(body.get("units"), list):
            raise ValidationError('body must be an object with a "units" array', field="units")
        extra = set(body) - {"units", "mode"}
        if extra:
            raise ValidationError(f"unknown top-level field(s): {sorted(extra)}")
        mode = body.get("mode", "replace")
        if mode not in ("replace", "append"):
            raise ValidationError('mode must be "replace" or "append"', field="mode")
        if not body["units"]:
            raise ValidationError("units must not be empty", field="units")
        return self.ingestor.ingest(principal, body["units"], header_scope, mode)

    # -- search ----------------------------------------------------------------------------
    def parse_query(self, body: Any, endpoint: str) -> AegisQuery:
        if not isinstance(body, dict):
            raise ValidationError("body must be a JSON object (an AegisQuery)")
        if "scope" in body:
            raise ValidationError(
                "scope is not a query field: send X-Aegis-Scope or ?scope=", field="scope"
            )
        try:
            q = AegisQuery.model_validate(body)
        except PydanticValidationError as exc:
            msg, details = pydantic_message(exc)
            raise ValidationError(msg, details=details) from None
        if q.top_k > self.settings.max_top_k:
            raise ValidationError(
                f"top_k {q.top_k} exceeds the limit of {self.settings.max_top_k}", field="top_k"
            )
        if endpoint == "answer" and body.get("answer", True) is not True:
            raise ValidationError("POST /v1/answer needs answer: true (or omit it)", field="answer")
        if endpoint == "search" and q.stream:
            raise ValidationError("stream: true belongs to POST /v1/answer", field="stream")
        if endpoint == "search" and q.answer:
            raise ValidationError("answer: true belongs to POST /v1/answer", field="answer")
        return q

    def answer(
        self,
        principal: Principal,
        body: Any,
        header_scope: str | None = None,
        query_scope: str | None = None,
    ) -> dict[str, Any]:
        """``POST /v1/answer``: the search response plus a verified, cited ``answer``."""
        t0 = time.perf_counter()
        q, rf, key = self._answer_request(principal, body, header_scope, query_scope)
        if (cached := self._cached(key, t0)) is not None:
            return cached
        trace = Trace()
        hits, answer = self.answerer.answer(q, rf, trace, t0)
        return self._finish(key, hits, answer, trace, list(rf.scopes), principal)

    def _answer_request(
        self,
        principal: Principal,
        body: Any,
        header_scope: str | None,
        query_scope: str | None,
    ) -> tuple[AegisQuery, ReadFilter, str]:
        """An answer request checked and its filter built, with its result-cache key (the
        streamed and the plain answer share entries: ``stream`` is not part of the key)."""
        q, rf, gens = self._read_request(principal, body, "answer", header_scope, query_scope)
        key = cache_key(
            "answer",
            q.model_dump(mode="json", exclude={"stream"}),
            list(rf.scopes),
            principal,
            gens,
            f"{self.versions};{self.answerer.chain_version}",
            rf,
        )
        return q, rf, key

    def answer_stream(
        self,
        principal: Principal,
        body: Any,
        header_scope: str | None = None,
        query_scope: str | None = None,
    ) -> Iterator[tuple[str, dict[str, Any]]]:
        """``POST /v1/answer`` with ``stream: true``: the answer's events, each sentence as soon
        as it is checked (D-235). Everything up to the first event runs here, so what fails with
        a status (401/402/403/422), the refusal gate and a model that fails before its first
        sentence are decided before the stream opens (D-37); the rest runs as it is read."""
        t0 = time.perf_counter()
        q, rf, key = self._answer_request(principal, body, header_scope, query_scope)
        if (cached := self._cached(key, t0)) is not None:
            return self.answerer.events(cached)
        trace = Trace()
        run = self.answerer.run(q, rf, trace, t0, stream=True)
        scopes = list(rf.scopes)
        try:
            first = next(run)
        except StopIteration as stop:
            hits, answer = stop.value
            return self.answerer.events(self._finish(key, hits, answer, trace, scopes, principal))

        def rest() -> Iterator[tuple[str, dict[str, Any]]]:
            ev, streamed = first, 0
            while True:
                yield ev
                streamed += 1
                try:
                    ev = next(run)
                except StopIteration as stop:
                    hits, answer = stop.value
                    final = self._finish(key, hits, answer, trace, scopes, principal)
                    break
            yield from self.answerer.events(final, streamed)

        return rest()

    def _read_request(
        self,
        principal: Principal,
        body: Any,
        endpoint: str,
        header_scope: str | None,
        query_scope: str | None,
    ) -> tuple[AegisQuery, ReadFilter, dict[str, int]]:
        """Checks in D-6 order (403 perm, 422 body, 403 scope, 402 tier), the request's
        one ``ReadFilter``, then the generations read at request start for the cache key."""
        if not principal.has("read"):
            raise ForbiddenError(f"the read permission is required for /v1/{endpoint}")
        q = self.parse_query(body, endpoint)
        scopes = self.request_scope(principal, header_scope, query_scope)
        if endpoint == "answer" and principal.tier == "free":
            raise UpgradeRequiredError(
                "grounded answers are a Pro / Enterprise feature", required_tier="pro"
            )
        rf = ReadFilter.of(principal, scopes, self.query_planes(principal, q), q)
        gens = dict(self.unit_reader.generations(scopes))
        return q, rf, gens

    def _cached(self, key: str, t0: float) -> dict[str, Any] | None:
        """A cached response, its trace marked as a hit with this lookup's own latency."""
        cached = self.cache.get(key)
        if cached is None:
            return None
        ms = (time.perf_counter() - t0) * 1000
        cached["trace"] = {**cached["trace"], "cache": "hit", "total_ms": round(ms, 3)}
        return dict(cached)

    def _finish(
        self,
        key: str,
        hits: list[dict[str, Any]],
        answer: dict[str, Any] | None,
        trace: Trace,
        scopes: list[str],
        principal: Principal,
    ) -> dict[str, Any]:
        """Record stage latencies, build the response, cache it."""
        for st in trace.stages:
            if st.skipped is None:
                self.metrics.observe(
                    "scdb_stage_ms", "Search stage latency (ms)", st.ms, stage=st.stage
                )
        context = {"effective_scopes": scopes, "perms": sorted(principal.perms)}
        out = {"hits": hits, "answer": answer, "trace": trace.to_dict(), "context": context}
        if not any(st.degraded or not st.fresh for st in trace.stages):
            self.cache.put(key, out)
        return out

    def query_planes(self, principal: Principal, q: AegisQuery) -> list[str]:
        allowed = TIER_PLANES.get(principal.tier, ())
        if q.planes is None:
            return list(allowed)
        for p in q.planes:
            if p not in allowed:
                raise UpgradeRequiredError(
                    f"the {principal.tier} tier cannot query the {p} plane",
                    required_tier=required_tier(p),
                    plane=p,
                )
        return list(q.planes)

    def search(
        self,
        principal: Principal,
        body: Any,
        header_scope: str | None = None,
        query_scope: str | None = None,
    ) -> dict[str, Any]:
        t0 = time.perf_counter()
        q, rf, gens = self._read_request(principal, body, "search", header_scope, query_scope)
        scopes = list(rf.scopes)
        # Caching off (cache_max_bytes=0): no key to hash (0.07 ms a search).
        key = (
            cache_key(
                "search", q.model_dump(mode="json"), scopes, principal, gens, self.versions, rf
            )
            if self.cache.max_bytes > 0
            else ""
        )
        if key and (cached := self._cached(key, t0)) is not None:
            return cached
        trace = Trace()
        hits = self.searcher.run(q, rf, trace)
        return self._finish(key, hits, None, trace, scopes, principal)

    # -- units -----------------------------------------------------------------------------
    def _visible_unit(self, principal: Principal, unit_id: str) -> UnitRecord | None:
        """The Unit when the caller may read it: within any of its grants, on every plane."""
        rf = ReadFilter.of(principal, principal.scopes, PLANES)
        return self.unit_reader.get(unit_id, rf)

    def get_unit(
        self, principal: Principal, unit_id: str, *, words: bool = False
    ) -> dict[str, Any]:
        """``GET /v1/units/{id}``; with ``words``, the Unit's word table too (char span, times,
        boxes), read only once the Unit's own check passed (else the same 404)."""
        if not principal.has("read"):
            raise ForbiddenError("the read permission is required")
        unit = self._visible_unit(principal, unit_id)
        if unit is None:
            raise NotFoundError("unit not found")
        still = unit.modality == "video_shot" and bool(self.keyframes.present([unit_id]))
        out = unit_dict(unit, still)
        if words:
            table = word_dicts(self.word_reader.of_units([unit_id]).get(unit_id, []))
            out["words"] = [{"text": out["text"][w["start"] : w["end"]], **w} for w in table]
        return out

    def preview_source(self, principal: Principal, unit_id: str) -> PreviewSource:
        """What a preview of the Unit draws, for a caller who may read it (else the same 404
        as a missing id): the page or image a doc_visual / visual Unit came from, and its box.
        The only way to a ``PreviewSource``, so a cached rendering is never served unchecked."""
        if not principal.has("read"):
            raise ForbiddenError("the read permission is required")
        unit = self._visible_unit(principal, unit_id)
        if unit is None:
            raise NotFoundError("unit not found")
        loc = unit.locator
        if unit.modality == "video_shot":  # its keyframe, kept at derivation (D-236)
            kept = self.keyframes.get(unit_id)
            if kept is None:
                raise NotFoundError("this shot has no keyframe (derived before they were kept)")
            return PreviewSource(
                None, "", kept.mime, loc.to_dict() if loc else None, still=kept.data
            )
        if not has_preview(unit):
            raise NotFoundError("this unit has no page or image to preview")
        # The blob the Unit was derived from (kept by the Unit), not whatever the key names now.
        if not unit.object_sha or not self.blobs.exists(unit.object_sha):
            raise NotFoundError("the unit's object is gone")
        blob = self.blobs.path(unit.object_sha)
        with open(blob, "rb") as f:
            head = f.read(8)
        mime = "application/pdf" if head.startswith(b"%PDF") else "image"
        return PreviewSource(blob, unit.object_sha, mime, loc.to_dict() if loc else None)

    def delete_unit(self, principal: Principal, unit_id: str) -> dict[str, Any]:
        if not principal.has("write"):
            raise ForbiddenError("the write permission is required to delete")
        with self.writes.ordered():
            with self.writes.write() as tx:
                hit = tx.docs.in_scopes(principal.scopes, unit_id=unit_id)
                # What the caller may not destroy answers exactly as an id that does not exist.
                if not hit or not acl.may_destroy(principal, hit[0].acl_view()):
                    raise NotFoundError("unit not found")
                u = hit[0]
                # Chunks of one submitted Unit live and die together.
                (chunks,) = tx.docs.find([(u.scope, u.doc_id, u.acl_owner, u.content_hash)])
                siblings = [c.unit_id for c in chunks if acl.may_destroy(principal, c.acl_view())]
                gone = self._delete(tx, principal, siblings, "delete_unit")
            self._deleted()
        return {"deleted": len(gone), "unit_ids": gone}

    def delete_doc(
        self, principal: Principal, doc_id: str, header_scope: str | None, query_scope: str | None
    ) -> dict[str, Any]:
        """Delete the document's Units the caller may destroy (D-124: a delete acts on what
        the caller may destroy); 404 when that is none, the same as for a doc_id nobody has."""
        if not principal.has("write"):
            raise ForbiddenError("the write permission is required to delete")
        scopes = self.request_scope(principal, header_scope, query_scope)
        with self.writes.ordered():
            with self.writes.write() as tx:
                ids = [
                    u.unit_id
                    for u in tx.docs.in_scopes(scopes, doc_id=doc_id)
                    if acl.may_destroy(principal, u.acl_view())
                ]
                if not ids:
                    raise NotFoundError("document not found")
                gone = self._delete(tx, principal, ids, "delete_doc")
            self._deleted()
        return {"deleted": len(gone), "unit_ids": gone}

    @staticmethod
    def _delete(tx: StoreTx, principal: Principal, unit_ids: list[str], action: str) -> list[str]:
        """Delete the Units, bump their scopes, audit once; the ids deleted."""
        gone = tx.units.delete(unit_ids)
        if gone:
            tx.units.bump_generations({u.scope for u in gone})
            tx.audit.append(principal, action, {"removed": [u.unit_id for u in gone]})
        return [u.unit_id for u in gone]

    def _deleted(self) -> None:
        """After a delete's commit, under ``ordered()``: the indexes drop the Units too."""
        faults.point("delete.after_commit")
        self.outbox.replay()
        faults.point("delete.after_apply")
