"""Objects on the facade: PUT, authorized GET/HEAD, DELETE, usage and storage caps.

An object is identified by (key, owner), as a document is: a PUT creates or replaces the caller's
own object at the key and never looks at another owner's, so nobody can squat, overwrite or probe
a key. A read resolves to the caller's own object, else the newest one it may read
(``may_read_object``: its scope within the caller's grants and the ACL matches, or a Unit the
caller can read was derived from exactly this content, D-47). Everything else is a 404.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, cast

from . import faults
from .auth import acl
from .auth.scopes import check_scope, within_any
from .errors import (
    ConflictError,
    ForbiddenError,
    GroupForbiddenError,
    NotFoundError,
    ObjectInUseError,
    QuotaExceededError,
    ScopeForbiddenError,
    ValidationError,
)
from .metering import object_usage
from .readfilter import ReadFilter
from .storage.protocols_service import StoredObject
from .storage.sqlite.objects import FileBlobStore, check_key
from .tenancy import tier_caps
from .types import PLANES, Principal

if TYPE_CHECKING:
    from .settings import Settings
    from .storage.protocols import Outbox
    from .storage.protocols_service import ObjectCatalog, ServiceStore, ServiceTx
    from .storage.protocols_writes import QuotaLedger, StoredUnit, StoreTx

_CT = re.compile(r"[a-z0-9][a-z0-9!#$&^_.+-]*/[a-z0-9][a-z0-9!#$&^_.+-]*")


class ObjectsMixin:
    settings: Settings
    blobs: FileBlobStore
    writes: ServiceStore
    outbox: Outbox
    object_rows: ObjectCatalog

    def object_put_cap(self, principal: Principal, key: str) -> tuple[int, int] | None:
        """``(cap, bytes held)`` for a PUT at ``key`` (None: the tier has no cap).

        Counted over the caller's own objects only; its current object at ``key`` is freed by
        the replace. Read before the body streams, so an upload past the cap stops early.
        """
        cap = tier_caps(self.settings, principal.tier).object_bytes
        if cap is None:
            return None
        return cap, self.object_rows.bytes_held(principal.name, excluding=key)

    def put_object(
        self,
        principal: Principal,
        key: str,
        chunks: Iterable[bytes],
        content_type: str | None,
        header_scope: str | None,
        acl_groups: list[str] | None = None,
        if_match: str | None = None,
    ) -> dict[str, Any]:
        if not principal.has("write"):
            raise ForbiddenError("the write permission is required to store objects")
        check_key(key)
        scope = check_scope(header_scope or principal.active_scope, "scope")
        if not within_any(scope, principal.scopes):
            raise ScopeForbiddenError("X-Aegis-Scope is outside your effective scopes")
        if not key.startswith(scope + "/"):
            raise ScopeForbiddenError(f"object keys must start with the target scope '{scope}/'")
        ctype = (content_type or "application/octet-stream").split(";")[0].strip().lower()
        if not _CT.fullmatch(ctype):
            raise ValidationError("invalid Content-Type", field="content_type")
        groups = sorted(set(acl_groups if acl_groups is not None else principal.groups))
        # Only the caller's own object at the key matters: another owner's is never read here,
        # so a PUT answers the same whether or not someone else stored something at the key.
        mine = self.object_rows.own(key, principal.name)
        if mine is not None:
            self._check_if_match(mine, if_match)  # before the body is stored; again under lock
        # A new object may be shared only with the caller's own groups (a replace keeps the
        # object's groups, so it adds none).
        if mine is None and not acl.may_add_groups(principal, (), groups):
            raise GroupForbiddenError(
                "you may share an object only with groups you belong to",
                groups=sorted(set(groups) - set(principal.groups)),
            )
        staged = self.blobs.stage(chunks, self.settings.max_object_bytes)
        try:
            with self.writes.ordered():
                with self.writes.write() as tx:
                    existing = tx.object_rows.own(key, principal.name)
                    if existing is not None:
                        self._check_if_match(existing, if_match)
                    cap = tier_caps(self.settings, principal.tier).object_bytes
                    held = tx.object_rows.bytes_held(principal.name, excluding=key)
                    if cap is not None and held + staged.size > cap:
                        raise QuotaExceededError(
                            f"storing {staged.size} bytes would exceed your {principal.tier}"
                            f" tier's object storage of {cap} bytes",
                            limit=cap,
                            used=held,
                            requested=staged.size,
                        )
                    # Named inside the write, pinned until the row commits: the collector
                    # never removes a blob this PUT de-duplicates onto (D-245).
                    tx.object_rows.pin(staged.sha256)
                    self.blobs.commit(staged)
                    faults.point("objects.put.before_row")
                    tx.object_rows.put(
                        StoredObject(
                            object_key=key,
                            acl_owner=principal.name,
                            sha256=staged.sha256,
                            size=staged.size,
                            content_type=ctype,
                            scope=scope,
                            acl_groups=tuple(groups),
                            created_by=principal.name,
                        )
                    )
                    faults.point("objects.put.after_row")
                    tx.audit.append(
                        principal,
                        "object.put",
                        {"key": key, "sha256": staged.sha256, "size": staged.size},
                    )
                if existing is not None and existing.sha256 != staged.sha256:
                    self.object_rows.collect(existing.sha256)
        finally:
            self.blobs.discard(staged)
        faults.point("objects.put.after_commit")
        return {
            "key": key,
            "sha256": staged.sha256,
            "size": staged.size,
            "content_type": ctype,
            "etag": f'"{staged.sha256}"',
            "scope": scope,
        }

    @staticmethod
    def _check_if_match(existing: StoredObject, if_match: str | None) -> None:
        if if_match != existing.etag:
            raise ConflictError("objects are immutable: send If-Match with the current ETag")

    @staticmethod
    def _object_filter(principal: Principal) -> ReadFilter:
        """What an object read may see: every grant, every plane (an object's rule is the
        Units' rule over all of the caller's scopes, D-47)."""
        return ReadFilter.of(principal, principal.scopes, PLANES)

    def resolve_object(self, principal: Principal, key: str) -> StoredObject | None:
        """The object a read of ``key`` means: the caller's own, else the newest it may read
        (its scope within the caller's grants and the ACL matches, or a Unit the caller can
        read was derived from this very content). Nothing without ``read``."""
        if not principal.has("read"):
            return None
        return self.object_rows.resolve(key, self._object_filter(principal))

    def object_for_read(self, principal: Principal, key: str) -> StoredObject:
        """The object when the caller may read it; 404 otherwise (existence never shown)."""
        if not principal.has("read"):
            raise ForbiddenError("the read permission is required")
        try:
            check_key(key)
        except ValidationError:
            raise NotFoundError("object not found") from None
        obj = self.resolve_object(principal, key)
        if obj is None:
            raise NotFoundError("object not found")
        return obj

    def delete_object(self, principal: Principal, key: str, cascade: bool) -> dict[str, Any]:
        """``DELETE /v1/objects/{key}``: the caller's own object at the key.

        Units derived from it that the caller can read make it 409 ``object_in_use`` (their
        doc_ids listed), or with ``cascade`` go in the same transaction under one audit record.
        Units the caller cannot read are neither named nor touched: they keep their blob, which
        is collected only once nothing references it.
        """
        if not principal.has("write"):
            raise ForbiddenError("the write permission is required to delete")
        try:
            check_key(key)
        except ValidationError:
            raise NotFoundError("object not found") from None
        with self.writes.ordered():
            obj = self.object_rows.own(key, principal.name)
            if obj is None or not within_any(obj.scope, principal.scopes):
                raise NotFoundError("object not found")
            refs = self._readable_referrers(principal, obj)
            if refs and not cascade:
                doc_ids = sorted({r.doc_id for r in refs})
                raise ObjectInUseError(
                    f"{len(refs)} unit(s) in {len(doc_ids)} document(s) were derived from this"
                    " object: delete them first or send ?cascade=true",
                    doc_ids=doc_ids,
                )
            with self.writes.write() as tx:
                gone = tx.units.delete([r.unit_id for r in refs])
                if gone:
                    tx.units.bump_generations({u.scope for u in gone})
                tx.object_rows.remove(key, principal.name)
                tx.audit.append(
                    principal,
                    "object.delete",
                    {
                        "key": key,
                        "sha256": obj.sha256,
                        "cascade": cascade,
                        "removed": [u.unit_id for u in gone],
                    },
                )
            collected = self.object_rows.collect(obj.sha256)
            if gone:
                self.outbox.replay()
        return {
            "deleted": key,
            "sha256": obj.sha256,
            "units_deleted": len(gone),
            "unit_ids": [u.unit_id for u in gone],
            "doc_ids": sorted({u.doc_id for u in gone}),
            "blob_collected": collected,
        }

    def _readable_referrers(self, principal: Principal, obj: StoredObject) -> list[StoredUnit]:
        """Units derived from this object's content that the caller may see (and so destroy):
        readable ones with ``read``, only its own without it (the owner leg alone)."""
        rf = self._object_filter(principal)
        if not principal.has("read"):
            rf = dataclasses.replace(rf, groups=frozenset())
        return self.object_rows.citing(obj, rf)

    def check_blobs_kept(self, tx: StoreTx, prepared: Iterable[Any]) -> None:
        """In the write, before Units citing a blob are stored: the blob is still there.

        The blob is pinned first (D-245), so one seen here stays until these Units (or the job
        pinning it) commit; one collected since the object was resolved fails the request as a
        whole instead of storing Units that cite missing bytes.
        """
        # The gate exists only in a server, whose write store is this service's ServiceStore.
        rows = cast("ServiceTx", tx).object_rows
        for p in prepared:
            sha = getattr(p, "object_sha", None)
            if sha:
                rows.pin(sha)
            if sha and not self.blobs.exists(sha):
                raise ConflictError(
                    f"the object {p.object_key} was deleted while this request ran;"
                    " nothing was stored"
                )

    def object_usage(self, principal: Principal) -> dict[str, Any]:
        """The caller's stored objects, pages and media minutes against its tier's caps."""
        used = object_usage(self.writes.quota, principal.name)
        caps = tier_caps(self.settings, principal.tier)
        return {
            "objects": {"count": used["objects"], "bytes": used["object_bytes"]},
            "object_bytes": {"used": used["object_bytes"], "cap": caps.object_bytes},
            "media_pages": {"used": used["media_pages"], "cap": caps.media_pages},
            "media_minutes": {"used": used["media_minutes"], "cap": caps.media_minutes},
        }

    def media_caps(self, principal: Principal) -> tuple[int | None, int | None]:
        """The tier's document pages and media minutes caps (None: uncapped)."""
        caps = tier_caps(self.settings, principal.tier)
        return caps.media_pages, caps.media_minutes

    def check_media_reserve(
        self, ledger: QuotaLedger, principal: Principal, pages: int, ms: int
    ) -> None:
        """Inside the ingest's write transaction, before a media job is queued: 402 when what
        the caller's Units hold, plus what its queued and running jobs have reserved, plus this
        job would pass a cap. Counted in the transaction, so concurrent ingests cannot both
        take the last pages."""
        pages_cap, minutes_cap = self.media_caps(principal)
        used = object_usage(ledger, principal.name)
        held_pages, held_ms = ledger.media_reserved(principal.name)
        if pages and pages_cap is not None and used["media_pages"] + held_pages + pages > pages_cap:
            raise QuotaExceededError(
                f"this document's {pages} pages would pass your {principal.tier} tier's"
                f" {pages_cap} document pages ({used['media_pages']} used,"
                f" {held_pages} reserved by queued jobs)",
                limit=pages_cap,
                used=used["media_pages"] + held_pages,
            )
        minutes = (held_ms + ms) / 60_000 + used["media_minutes"]
        if ms and minutes_cap is not None and minutes > minutes_cap:
            raise QuotaExceededError(
                f"this recording's {ms / 60_000:.2f} minutes would pass your {principal.tier}"
                f" tier's {minutes_cap} media minutes ({used['media_minutes']} used,"
                f" {held_ms / 60_000:.2f} reserved by queued jobs)",
                limit=minutes_cap,
                used=round(used["media_minutes"] + held_ms / 60_000, 2),
            )

    def check_media_caps(self, principal: Principal, planes: Iterable[str]) -> None:
        """402 ``quota_exceeded`` when a media ingest would derive into a full allowance."""
        planes = set(planes)
        caps = tier_caps(self.settings, principal.tier)
        if not planes or (caps.media_pages is None and caps.media_minutes is None):
            return
        used = object_usage(self.writes.quota, principal.name)
        pages, minutes = caps.media_pages, caps.media_minutes
        if "doc_visual" in planes and pages is not None and used["media_pages"] >= pages:
            raise QuotaExceededError(
                f"your {principal.tier} tier's {caps.media_pages} document pages are used",
                limit=caps.media_pages,
                used=used["media_pages"],
            )
        if "audio" in planes and minutes is not None and used["media_minutes"] >= minutes:
            raise QuotaExceededError(
                f"your {principal.tier} tier's {caps.media_minutes} media minutes are used",
                limit=caps.media_minutes,
                used=used["media_minutes"],
            )
