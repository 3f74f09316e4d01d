"""``POST /v1/ingest``: validate -> gate -> chunk -> embed -> one transaction -> apply -> ack.

D-12 to D-18: whole-request failures (401/403/402/413) store nothing; per-Unit failures are
``ok: false`` in ``results[i]``; every valid Unit of the batch commits in ONE transaction with its
outbox rows, quota use, generation bumps and one audit record; the ack follows the in-memory apply.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from .. import effort, faults
from ..auth import acl
from ..auth.scopes import check_scope, within_any
from ..errors import (
    ConflictError,
    ForbiddenError,
    GroupForbiddenError,
    NotFoundError,
    PayloadTooLargeError,
    QuotaExceededError,
    SCDBError,
    ScopeForbiddenError,
    UpgradeRequiredError,
)
from ..storage.ids import merkle_root, now_ms, uuid7
from ..storage.protocols import JobSpec, UnitRecord
from ..storage.protocols_writes import IdempotencyKey, StoredUnit
from ..types import TIER_PLANES, TIERS, Principal
from . import deferred, media_cost, objects_in
from .chunking import chunk_text
from .engine_settings import media_limits, options_from
from .media_cost import MediaCost
from .prepare import Prepared, chunk_prepared, declared_plane, error_result, prepare_unit

if TYPE_CHECKING:
    from ..storage.protocols_writes import StoreTx
    from .deps import IngestDeps, ObjectGate


@dataclass
class _Outcome:
    status: str
    unit_ids: list[str]


def required_tier(plane: str) -> str:
    return next(t for t in TIERS if plane in TIER_PLANES[t])


WRITE_ATTEMPTS = 3  # a batch's write transaction, when it lost a race for a unique key


class Ingestor:
    def __init__(self, deps: IngestDeps) -> None:
        self.deps = deps

    @property
    def objects(self) -> ObjectGate:
        if self.deps.objects is None:
            raise RuntimeError("this process ingests no object by request (a worker)")
        return self.deps.objects

    def ingest(
        self,
        principal: Principal,
        units: Sequence[Any],
        header_scope: str | None,
        mode: str = "replace",
    ) -> dict[str, Any]:
        s = self.deps.settings
        if not principal.has("write"):
            raise ForbiddenError("the write permission is required to ingest")
        if header_scope is not None:
            check_scope(header_scope, "X-Aegis-Scope")
            if not within_any(header_scope, principal.scopes):
                raise ScopeForbiddenError("X-Aegis-Scope is outside your effective scopes")
        if len(units) > s.max_batch_units:
            raise PayloadTooLargeError(
                f"batch of {len(units)} units exceeds the limit of {s.max_batch_units}",
                limit=s.max_batch_units,
            )
        # Tier plane gate on what each Unit asks for, before per-Unit validation: a batch that
        # names a plane its tier lacks is a 402 even when a Unit of it is malformed otherwise.
        allowed = TIER_PLANES.get(principal.tier, ())
        for raw in units:
            asked = declared_plane(raw)
            if asked is not None and asked not in allowed:
                raise UpgradeRequiredError(
                    f"the {principal.tier} tier cannot ingest into the {asked} plane",
                    required_tier=required_tier(asked),
                    plane=asked,
                )
        target = header_scope or principal.active_scope
        results: list[dict[str, Any] | None] = [None] * len(units)
        prepared: list[Prepared] = []
        for i, raw in enumerate(units):
            try:
                prepared.append(
                    prepare_unit(i, raw, principal, target, header_scope, s.max_text_chars)
                )
            except SCDBError as exc:
                results[i] = error_result(exc)
        media: dict[int, tuple[str, tuple[str, ...]]] = {}
        for p in list(prepared):
            if p.object_key is None:
                continue
            try:
                media_info = self._resolve_object(principal, p, units[p.index])
            except SCDBError as exc:
                results[p.index] = error_result(exc)
                prepared.remove(p)
                continue
            if media_info is not None:
                media[p.index] = media_info
        # Again on the planes the derivation of each Unit's content will produce (D-9):
        # the whole batch fails before anything is stored (seed 002).
        for p in prepared:
            for plane in media[p.index][1] if p.index in media else (p.plane,):
                if plane not in allowed:
                    raise UpgradeRequiredError(
                        f"the {principal.tier} tier cannot ingest into the {plane} plane",
                        required_tier=required_tier(plane),
                        plane=plane,
                    )
        self.objects.check_media_caps(principal, {pl for _, pls in media.values() for pl in pls})
        costs = self._media_costs(principal, prepared, media)
        texts = [p for p in prepared if p.index not in media]
        jobs = [p for p in prepared if p.index in media]
        fresh = self._skip_known(texts)
        self._chunk(fresh)
        # Past the request's chunk budget the largest documents are embedded by jobs.
        texts, later = deferred.split(texts, s.ingest_max_chunks)
        put_off = {id(p) for doc in later for p in doc}
        self._chunk_and_embed([p for p in fresh if id(p) not in put_off])
        batch = (prepared, texts, jobs, later)
        for attempt in range(WRITE_ATTEMPTS):
            prepared, texts, jobs, later = batch
            with self.deps.store.ordered():
                try:
                    with self.deps.store.write() as tx:
                        refused = self._admit(tx, principal, prepared)
                        for i, why in refused.items():
                            results[i] = error_result(why)
                        prepared = [p for p in prepared if p.index not in refused]
                        texts = [p for p in texts if p.index not in refused]
                        jobs = [p for p in jobs if p.index not in refused]
                        later = [
                            d
                            for d in ([p for p in doc if p.index not in refused] for doc in later)
                            if d
                        ]
                        self.objects.check_blobs_kept(tx, prepared)
                        self._check_quota(tx, principal, prepared)
                        faults.point("ingest.quota.after_check")
                        outcomes = self._write(tx, principal, texts, mode, check_quota=False)
                        queued = [
                            self._enqueue(tx, principal, p, media[p.index][0], costs.get(p.index))
                            for p in jobs
                        ]
                        for doc in later:
                            job = deferred.enqueue(tx, principal, doc, mode)
                            for p in doc:
                                results[p.index] = job
                except ConflictError as exc:
                    # Two writers raced for one idempotency key or Unit id: a shared database
                    # has no store-wide write lock (D-241), so the loser's transaction rolled
                    # back whole and, run once more, finds the winner's rows (D-247).
                    if attempt + 1 == WRITE_ATTEMPTS or "constraint" not in exc.extra:
                        raise
                    continue
                faults.point("ingest.after_commit")
                self.deps.apply()
                faults.point("ingest.after_apply")
            break
        if queued or later:
            self.deps.wake()
        ingested = 0
        for p, out in zip(texts, outcomes, strict=True):
            res: dict[str, Any] = {"ok": True, "unit_id": out.unit_ids[0], "status": out.status}
            if len(out.unit_ids) > 1:
                res["unit_ids"] = out.unit_ids
            if out.status == "created":
                ingested += len(out.unit_ids)
            results[p.index] = res
        for p, job in zip(jobs, queued, strict=True):
            results[p.index] = job
        return {"ingested": ingested, "results": results}

    def _admit(
        self, tx: StoreTx, principal: Principal, prepared: list[Prepared]
    ) -> dict[int, SCDBError]:
        """Per-Unit refusals of the ACL rules, read in the batch's own transaction.

        A Unit joins the document (scope, doc_id, acl_owner) as the caller may destroy it
        (``acl.may_destroy``); the rest of that document is invisible to the caller and left as
        it is, so the answer is the one a fresh document would get. Its groups may add only
        groups the caller is in (``acl.may_add_groups``) to those that document already has.
        """
        refused: dict[int, SCDBError] = {}
        # Per document: the groups of its Units the caller may destroy, and the content
        # hashes of those it may not.
        keys = list(dict.fromkeys((p.scope, p.doc_id, p.acl_owner) for p in prepared))
        docs: dict[tuple[str, str, str], tuple[set[str], set[str]]] = {}
        for key, stored in zip(keys, tx.docs.units_of(keys), strict=True):
            groups: set[str] = set()
            foreign: set[str] = set()
            for u in stored:
                if acl.may_destroy(principal, u.acl_view()):
                    groups |= set(u.acl_groups)
                else:
                    foreign.add(u.content_hash)
            docs[key] = (groups, foreign)
        for p in prepared:
            old, foreign = docs[(p.scope, p.doc_id, p.acl_owner)]
            if p.content_hash in foreign:
                # The very content is stored where the caller may not touch it (docs/decisions.md
                # "Destroying what one cannot read").
                refused[p.index] = NotFoundError("document not found")
                continue
            if not acl.may_add_groups(principal, old, p.acl_groups):
                added = sorted(set(p.acl_groups) - old - principal.groups)
                refused[p.index] = GroupForbiddenError(
                    "you may add only groups you belong to", groups=added
                )
        return refused

    def _resolve_object(
        self, principal: Principal, p: Prepared, raw: Any
    ) -> tuple[str, tuple[str, ...]] | None:
        """Load a text object into ``p``, or check a media object; None for text."""
        assert p.object_key is not None
        obj = self.objects.object_for_read(principal, p.object_key)
        blob = self.deps.blobs.path(obj.sha256)
        given = isinstance(raw, dict) and "modality" in raw
        sniffed, planes = objects_in.resolve(p, obj, blob, given, self.deps.settings.max_text_chars)
        if p.text:
            return None
        return sniffed, planes

    def _media_costs(
        self,
        principal: Principal,
        prepared: list[Prepared],
        media: dict[int, tuple[str, tuple[str, ...]]],
    ) -> dict[int, MediaCost]:
        """What each media Unit's job will count against a capped allowance (none uncapped)."""
        pages_cap, minutes_cap = self.objects.media_caps(principal)
        if pages_cap is None and minutes_cap is None:
            return {}
        limits = media_limits(self.deps.settings)
        options = options_from(self.deps.settings)
        out: dict[int, MediaCost] = {}
        for p in prepared:
            if p.index in media and p.object_sha:
                sniffed, planes = media[p.index]
                out[p.index] = media_cost.estimate(
                    self.deps.blobs.path(p.object_sha),
                    sniffed,
                    planes,
                    pages=pages_cap is not None,
                    minutes=minutes_cap is not None,
                    limits=limits,
                    options=options,
                )
        return out

    def _enqueue(
        self,
        tx: StoreTx,
        principal: Principal,
        p: Prepared,
        sniffed: str,
        cost: MediaCost | None = None,
    ) -> dict[str, Any]:
        """Queue the derivation of a media Unit (idempotent per request content)."""
        dedupe = hashlib.sha256(
            f"{p.scope}\0{p.doc_id}\0{p.acl_owner}\0{p.content_hash}".encode()
        ).hexdigest()
        prior = tx.jobs.find(dedupe)
        if prior is not None:
            status = "queued" if prior.state in ("queued", "running") else "unchanged"
            out: dict[str, Any] = {"ok": True, "status": status, "job_id": prior.job_id}
            if prior.state == "done":
                ids = json.loads(prior.result_json or "{}").get("unit_ids", [])
                if list(prior.acl_groups) != p.acl_groups and ids:
                    doc = tx.docs.units_of([(p.scope, p.doc_id, p.acl_owner)])[0]
                    mine = [u.unit_id for u in doc if acl.may_destroy(principal, u.acl_view())]
                    tx.units.set_groups(mine, p.acl_groups)
                    tx.jobs.set_groups(prior.job_id, p.acl_groups)
                    tx.units.bump_generations([p.scope])
                    out["status"] = "updated"
                if ids:
                    out["unit_id"] = ids[0]
                    out["unit_ids"] = ids
            return out
        payload = {
            "doc_id": p.doc_id,
            "object_key": p.object_key,
            "sha256": p.object_sha,
            "mime": sniffed,
            "modality": p.modality,
            "source_uri": p.source_uri.split("#", 1)[0],
            "captured_at": p.captured_at,
            "content_hash": p.content_hash,
            # The job's own audit record names the key that queued it, as the request's does.
            "key_id": principal.key_id,
            "key_issuer": principal.key_issuer,
        }
        if cost is not None and (cost.pages or cost.ms):
            # Reserved until the job finishes (then its Units count) or fails (then nothing).
            self.objects.check_media_reserve(tx.quota, principal, cost.pages, cost.ms)
            payload["cost_pages"], payload["cost_ms"] = cost.pages, cost.ms
        job_id = tx.jobs.enqueue(
            JobSpec(
                kind="derive",
                scope=p.scope,
                principal=principal.name,
                acl_owner=p.acl_owner,
                acl_groups=tuple(p.acl_groups),
                dedupe_key=dedupe,
                payload_json=json.dumps(payload),
            )
        )
        # The document is reserved against the quota now; a failed job releases it.
        tx.docs.reserve([(p.scope, p.doc_id, p.acl_owner)], principal.name, now_ms())
        faults.point("ingest.enqueue.after_reserve")
        tx.audit.append(
            principal,
            "ingest.queued",
            {"job_id": job_id, "scope": p.scope, "object": p.object_key},
        )
        return {"ok": True, "status": "queued", "job_id": job_id}

    def _skip_known(self, prepared: list[Prepared]) -> list[Prepared]:
        """Units already stored under the same idempotency key need no embedding."""
        found = self.deps.store.docs.find([_key(p) for p in prepared])
        return [p for p, stored in zip(prepared, found, strict=True) if not stored]

    def _chunk(self, prepared: list[Prepared]) -> None:
        s = self.deps.settings
        for p in prepared:
            if p.chunks:  # chunked already (the request's chunk budget counted them)
                continue
            kind: Literal["prose", "lines"] = "lines" if p.modality in ("code", "log") else "prose"
            chunks = chunk_text(
                p.text,
                self.deps.embedder,
                max_tokens=s.chunk_tokens,
                overlap_tokens=s.chunk_overlap_tokens,
                kind=kind,
            )
            chunk_prepared(p, chunks)

    def _chunk_and_embed(self, prepared: list[Prepared]) -> None:
        emb = self.deps.embedder
        self._chunk(prepared)
        # Chunks after the first are embedded with the document's title line (context).
        texts = [
            f"{p.context}\n{t}" if p.context and ci > 0 else t
            for p in prepared
            for ci, (t, _) in enumerate(p.chunks)
        ]
        effort.charge_tokens(sum(map(emb.count_tokens, texts)))  # admission judges per token
        vecs = emb.embed(texts) if texts else np.zeros((0, emb.dim), np.float32)
        i = 0
        for p in prepared:
            p.vectors = vecs[i : i + len(p.chunks)]
            i += len(p.chunks)

    def _write(
        self,
        tx: StoreTx,
        principal: Principal,
        prepared: list[Prepared],
        mode: str,
        check_quota: bool = True,
        action: str = "ingest",
    ) -> list[_Outcome]:
        if check_quota:
            self._check_quota(tx, principal, prepared)
        now = now_ms()
        outcomes: list[_Outcome] = []
        kept: dict[tuple[str, str, str], set[str]] = {}
        touched_scopes: set[str] = set()
        content_hashes: list[str] = []
        # The stored Units of each idempotency key, in one lookup for the batch; kept current
        # as the batch writes, so a Unit given twice is stored once (as one by one did).
        keys = list(dict.fromkeys(_key(p) for p in prepared))
        stored: dict[IdempotencyKey, list[StoredUnit]] = dict(
            zip(keys, tx.docs.find(keys), strict=True)
        )
        records: list[UnitRecord] = []
        vectors: list[Any] = []
        created: list[tuple[str, str, str]] = []
        for p in prepared:
            doc_key = (p.scope, p.doc_id, p.acl_owner)
            existing = stored[_key(p)]
            if existing:
                ids = [u.unit_id for u in existing]
                status = "unchanged"
                if list(existing[0].acl_groups) != p.acl_groups and acl.may_destroy(
                    principal, existing[0].acl_view()
                ):
                    tx.units.set_groups(ids, p.acl_groups)
                    stored[_key(p)] = [
                        StoredUnit(
                            u.unit_id,
                            u.scope,
                            u.doc_id,
                            u.acl_owner,
                            tuple(p.acl_groups),
                            u.content_hash,
                            u.plane,
                        )
                        for u in existing
                    ]
                    status = "updated"
                    touched_scopes.add(p.scope)
                kept.setdefault(doc_key, set()).update(ids)
                outcomes.append(_Outcome(status, ids))
                continue
            if not p.chunks:  # raced in by a concurrent batch after _skip_known: embed now
                self._chunk_and_embed([p])
            uids = []
            event_at = p.event_at if p.event_at is not None else now
            for ci, ((text, loc), vec) in enumerate(zip(p.chunks, p.vectors, strict=True)):
                uid = uuid7()
                records.append(
                    UnitRecord(
                        unit_id=uid,
                        scope=p.scope,
                        doc_id=p.doc_id,
                        plane=p.plane,
                        modality=p.modality,
                        text=text,
                        acl_owner=p.acl_owner,
                        acl_groups=tuple(p.acl_groups),
                        content_hash=p.content_hash,
                        source_uri=p.source_uri,
                        mime=p.mime,
                        locator=loc,
                        chunk_index=ci,
                        chunk_count=len(p.chunks),
                        created_at=now,
                        event_at=event_at,
                        object_key=p.object_key,
                        object_sha=p.object_sha,
                        context=p.context if ci > 0 else "",
                        created_by=principal.name,
                    )
                )
                vectors.append(vec)
                uids.append(uid)
            stored[_key(p)] = [
                StoredUnit(
                    u, p.scope, p.doc_id, p.acl_owner, tuple(p.acl_groups), p.content_hash, p.plane
                )
                for u in uids
            ]
            created.append(doc_key)
            kept.setdefault(doc_key, set()).update(uids)
            touched_scopes.add(p.scope)
            content_hashes.append(p.content_hash)
            outcomes.append(_Outcome("created", uids))
        if records:
            tx.units.insert_many(records, np.asarray(vectors, dtype=np.float32))
            tx.docs.reserve(dict.fromkeys(created), principal.name, now)
        removed: list[str] = []
        if mode == "replace" and kept:
            docs = list(kept)
            for doc_key, units in zip(docs, tx.docs.units_of(docs), strict=True):
                # Only what the caller may destroy is replaced (_admit).
                keep = kept[doc_key]
                stale = [
                    u.unit_id
                    for u in units
                    if u.unit_id not in keep and acl.may_destroy(principal, u.acl_view())
                ]
                if stale:
                    removed += [u.unit_id for u in tx.units.delete(stale)]
                    faults.point("ingest.replace.after_delete")
                    touched_scopes.add(doc_key[0])
        if touched_scopes:
            tx.units.bump_generations(touched_scopes)
            record = {
                "scopes": sorted(touched_scopes),
                "created": [u for o in outcomes if o.status == "created" for u in o.unit_ids],
                "updated": [u for o in outcomes if o.status == "updated" for u in o.unit_ids],
                "removed": removed,
                "merkle_root": merkle_root(content_hashes),
            }
            tx.audit.append(principal, action, record)
        return outcomes

    def _check_quota(self, tx: StoreTx, principal: Principal, prepared: list[Prepared]) -> None:
        """Quota = distinct documents created; checked in the batch transaction (D-18)."""
        if principal.doc_quota is None:
            return
        new_docs = tx.quota.unknown_docs([(p.scope, p.doc_id, p.acl_owner) for p in prepared])
        if not new_docs:
            return
        used = tx.quota.docs_used(principal.name)
        if used + len(new_docs) > principal.doc_quota:
            raise QuotaExceededError(
                f"document quota exceeded: {used} used of {principal.doc_quota}, "
                f"{len(new_docs)} requested",
                limit=principal.doc_quota,
                used=used,
                requested=len(new_docs),
            )


def _key(p: Prepared) -> IdempotencyKey:
    return (p.scope, p.doc_id, p.acl_owner, p.content_hash)
