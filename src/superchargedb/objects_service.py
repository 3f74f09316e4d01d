"""Objects on the facade: PUT, authorized GET/HEAD, DELETE, usage and storage caps.

An object is identified by (key, owner), as a document is: a PUT creates or replaces the caller's
own object at the key and never looks at another owner's, so nobody can squat, overwrite or probe
a key. A read resolves to the caller's own object, else the newest one it may read
(``may_read_object``: its scope within the caller's grants and the ACL matches, or a Unit the
caller can read was derived from exactly this content, D-47). Everything else is a 404.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

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
from .storage.sqlite import audit
from .storage.sqlite.filter_sql import scope_sql, visible_sql
from .storage.sqlite.objects import FileBlobStore, check_key
from .storage.sqlite.units import now_ms
from .tenancy import tier_caps
from .types import Principal

if TYPE_CHECKING:
    from .settings import Settings
    from .storage.protocols_writes import QuotaLedger, WriteStore
    from .storage.sqlite.catalog import Catalog

_CT = re.compile(r"[a-z0-9][a-z0-9!#$&^_.+-]*/[a-z0-9][a-z0-9!#$&^_.+-]*")


class ObjectsMixin:
    catalog: Catalog
    settings: Settings
    blobs: FileBlobStore
    audit_key: bytes
    sync: Any
    writes: WriteStore

    def object_put_cap(self, principal: Principal, key: str) -> tuple[int, int] | None:
        """``(cap, bytes held)`` for a PUT at ``key`` (None: the tier has no cap).

        Counted over the caller's own objects only; its current object at ``key`` is freed by
        the replace. Read before the body streams, so an upload past the cap stops early.
        """
        cap = tier_caps(self.settings, principal.tier).object_bytes
        if cap is None:
            return None
        return cap, self._bytes_held(self.catalog.reader(), principal, key)

    def _bytes_held(self, conn: Any, principal: Principal, key: str) -> int:
        return int(
            conn.execute(
                "SELECT COALESCE(SUM(size), 0) FROM objects WHERE acl_owner = ? AND key != ?",
                (principal.name, key),
            ).fetchone()[0]
        )

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
        mine = self._own_object(self.catalog.reader(), principal, key)
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
            with self.catalog.write_lock():
                with self.catalog.write() as conn:
                    existing = self._own_object(conn, principal, key)
                    if existing is not None:
                        self._check_if_match(existing, if_match)
                    cap = tier_caps(self.settings, principal.tier).object_bytes
                    held = self._bytes_held(conn, principal, key)
                    if cap is not None and held + staged.size > cap:
                        raise QuotaExceededError(
                            f"storing {staged.size} bytes would exceed your {principal.tier}"
                            f" tier's object storage of {cap} bytes",
                            limit=cap,
                            used=held,
                            requested=staged.size,
                        )
                    # Named under the write lock, with the row committed before it is released:
                    # the collector runs under the same lock (FileBlobStore.commit).
                    self.blobs.commit(staged)
                    faults.point("objects.put.before_row")
                    conn.execute(
                        "INSERT INTO objects(key, acl_owner, sha256, size, content_type, scope,"
                        " acl_groups, created_by, created_at) VALUES (?,?,?,?,?,?,?,?,?)"
                        " ON CONFLICT(key, acl_owner) DO UPDATE SET sha256 = excluded.sha256,"
                        " size = excluded.size, content_type = excluded.content_type,"
                        " created_at = excluded.created_at",
                        (
                            key,
                            principal.name,
                            staged.sha256,
                            staged.size,
                            ctype,
                            scope,
                            json.dumps(groups),
                            principal.name,
                            self._next_stamp(conn, key),
                        ),
                    )
                    faults.point("objects.put.after_row")
                    audit.append(
                        conn,
                        self.audit_key,
                        principal,
                        "object.put",
                        {"key": key, "sha256": staged.sha256, "size": staged.size},
                    )
                if existing is not None and existing["sha256"] != staged.sha256:
                    with self.catalog.locked() as wconn:
                        self.blobs.collect(wconn, str(existing["sha256"]))
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
    def _next_stamp(conn: Any, key: str) -> int:
        """Now, but later than every write at ``key`` so far: "the newest object" a read
        resolves to is always the last one written, even within one millisecond."""
        last = conn.execute("SELECT MAX(created_at) FROM objects WHERE key = ?", (key,)).fetchone()
        return max(now_ms(), int(last[0] or 0) + 1)

    @staticmethod
    def _check_if_match(existing: Any, if_match: str | None) -> None:
        if if_match != f'"{existing["sha256"]}"':
            raise ConflictError("objects are immutable: send If-Match with the current ETag")

    @staticmethod
    def _own_object(conn: Any, principal: Principal, key: str) -> Any:
        return conn.execute(
            "SELECT * FROM objects WHERE key = ? AND acl_owner = ?", (key, principal.name)
        ).fetchone()

    def may_read_object(self, principal: Principal, row: Any) -> bool:
        """The one rule for reading an object (GET, HEAD, ``source_uri``, media jobs).

        With ``read``: the object's scope lies within the caller's grants and the caller owns
        it or shares one of its groups; or a Unit the caller can read was derived from this
        very content (same key and blob), which is what that Unit cites.
        """
        if not principal.has("read"):
            return False
        own_scope = within_any(row["scope"], principal.scopes)
        groups = set(json.loads(row["acl_groups"]))
        if own_scope and (row["acl_owner"] == principal.name or groups & principal.groups):
            return True
        vis, params = visible_sql("u", principal.scopes, principal.name, principal.groups)
        hit = (
            self.catalog.reader()
            .execute(
                f"SELECT 1 FROM units u WHERE u.object_key = ? AND u.object_sha = ? AND {vis}"
                " LIMIT 1",
                (row["key"], row["sha256"], *params),
            )
            .fetchone()
        )
        return hit is not None

    def resolve_object(self, principal: Principal, key: str) -> Any:
        """The object a read of ``key`` means: the caller's own, else the newest it may read."""
        rows = (
            self.catalog.reader()
            .execute(
                "SELECT * FROM objects WHERE key = ?"
                " ORDER BY acl_owner = ? DESC, created_at DESC, acl_owner",
                (key, principal.name),
            )
            .fetchall()
        )
        return next((r for r in rows if self.may_read_object(principal, r)), None)

    def object_for_read(self, principal: Principal, key: str) -> Any:
        """The object's row when the caller may read it; 404 otherwise (existence never shown)."""
        if not principal.has("read"):
            raise ForbiddenError("the read permission is required")
        try:
            check_key(key)
        except ValidationError:
            raise NotFoundError("object not found") from None
        row = self.resolve_object(principal, key)
        if row is None:
            raise NotFoundError("object not found")
        return row

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
            row = self._own_object(self.catalog.reader(), principal, key)
            if row is None or not within_any(row["scope"], principal.scopes):
                raise NotFoundError("object not found")
            refs = self._readable_referrers(principal, row)
            if refs and not cascade:
                doc_ids = sorted({str(r["doc_id"]) for r in refs})
                raise ObjectInUseError(
                    f"{len(refs)} unit(s) in {len(doc_ids)} document(s) were derived from this"
                    " object: delete them first or send ?cascade=true",
                    doc_ids=doc_ids,
                )
            with self.writes.write() as tx:
                gone = tx.units.delete([str(r["unit_id"]) for r in refs])
                if gone:
                    tx.units.bump_generations({u.scope for u in gone})
                tx.object_rows.remove(key, principal.name)
                tx.audit.append(
                    principal,
                    "object.delete",
                    {
                        "key": key,
                        "sha256": row["sha256"],
                        "cascade": cascade,
                        "removed": [u.unit_id for u in gone],
                    },
                )
            with self.catalog.locked() as wconn:
                collected = self.blobs.collect(wconn, str(row["sha256"]))
            if gone:
                self.sync.apply_pending()
        return {
            "deleted": key,
            "sha256": row["sha256"],
            "units_deleted": len(gone),
            "unit_ids": [u.unit_id for u in gone],
            "doc_ids": sorted({u.doc_id for u in gone}),
            "blob_collected": collected,
        }

    def _readable_referrers(self, principal: Principal, row: Any) -> list[Any]:
        """Units derived from this object's content that the caller may see (and so destroy):
        readable ones with ``read``, only its own without it."""
        if principal.has("read"):
            vis, params = visible_sql("u", principal.scopes, principal.name, principal.groups)
        else:
            s_sql, params = scope_sql("u.scope", principal.scopes)
            vis = f"{s_sql} AND u.acl_owner = ?"
            params.append(principal.name)
        return (
            self.catalog.reader()
            .execute(
                f"SELECT u.id, u.unit_id, u.doc_id FROM units u WHERE u.object_key = ?"
                f" AND u.object_sha = ? AND {vis} ORDER BY u.id",
                (row["key"], row["sha256"], *params),
            )
            .fetchall()
        )

    def check_blobs_kept(self, prepared: Iterable[Any]) -> None:
        """Under the write lock, before Units citing a blob are stored: the blob is still there.

        The collector runs under the same lock, so a blob seen here stays until these Units
        (or the job pinning it) commit; one collected since the object was resolved fails the
        request as a whole instead of storing Units that cite missing bytes.
        """
        for p in prepared:
            sha = getattr(p, "object_sha", None)
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
