"""Documents and Units listing, ACL changes, document replace, usage (D-60, D-61, D-16, D-17).

Mixed into ``Service``. Every listing asks storage's ``Listing`` with the request's one
``ReadFilter`` and pages with opaque keyset cursors (offsets skip or repeat rows when data
changes between pages).
"""

from __future__ import annotations

import base64
import dataclasses
import time
from typing import TYPE_CHECKING, Any

import orjson

from . import faults
from .auth import acl
from .errors import ForbiddenError, GroupForbiddenError, NotFoundError, ValidationError
from .readfilter import ReadFilter
from .types import PLANES, Principal

if TYPE_CHECKING:
    from .ingest.pipeline import Ingestor
    from .storage.protocols import Outbox, UnitRecord
    from .storage.protocols_service import KeyframeReader, Listing, ServiceStore, UsageReader
    from .storage.protocols_writes import Word

MAX_PAGE = 500


def encode_cursor(value: Any) -> str:
    return base64.urlsafe_b64encode(orjson.dumps(value)).decode().rstrip("=")


def decode_cursor(cursor: str | None) -> Any:
    if not cursor:
        return None
    try:
        return orjson.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
    except (ValueError, orjson.JSONDecodeError):
        raise ValidationError("invalid cursor", field="cursor") from None


def page_size(limit: int | None) -> int:
    if limit is None:
        return 100
    if not 1 <= limit <= MAX_PAGE:
        raise ValidationError(f"limit must be between 1 and {MAX_PAGE}", field="limit")
    return limit


def _filter(
    principal: Principal,
    scopes: list[str],
    plane: str | None,
    modality: str | None,
    t_from: int | None,
    t_to: int | None,
) -> ReadFilter:
    """A listing's filter: the visibility rule over ``scopes``, every plane (a listing is not
    narrowed to the tier's planes) or the one asked for, and the optional filters."""
    if plane is not None and plane not in PLANES:
        raise ValidationError(f"unknown plane {plane!r}", field="plane")
    return dataclasses.replace(
        ReadFilter.of(principal, scopes, PLANES if plane is None else (plane,)),
        modalities=() if modality is None else (modality,),
        time_lo_ms=t_from,
        time_hi_ms=t_to,
    )


class DocumentsMixin:
    ingestor: Ingestor
    writes: ServiceStore
    outbox: Outbox
    listing: Listing
    usage_reader: UsageReader
    keyframes: KeyframeReader

    def request_scope(
        self, principal: Principal, header: str | None, query: str | None
    ) -> list[str]:
        raise NotImplementedError

    def _listing(
        self,
        principal: Principal,
        header_scope: str | None,
        query_scope: str | None,
        limit: int | None,
        plane: str | None,
        modality: str | None,
        t_from: int | None,
        t_to: int | None,
    ) -> tuple[list[str], int, ReadFilter]:
        """What every listing starts with: permission, clamped scopes, page size and the
        request's one ``ReadFilter``."""
        if not principal.has("read"):
            raise ForbiddenError("the read permission is required")
        scopes = self.request_scope(principal, header_scope, query_scope)
        n = page_size(limit)
        return scopes, n, _filter(principal, scopes, plane, modality, t_from, t_to)

    def list_docs(
        self,
        principal: Principal,
        header_scope: str | None,
        query_scope: str | None,
        *,
        cursor: str | None = None,
        limit: int | None = None,
        plane: str | None = None,
        modality: str | None = None,
        t_from: int | None = None,
        t_to: int | None = None,
    ) -> dict[str, Any]:
        scopes, n, rf = self._listing(
            principal, header_scope, query_scope, limit, plane, modality, t_from, t_to
        )
        after = decode_cursor(cursor)
        if after is not None and not (isinstance(after, list) and len(after) == 2):
            raise ValidationError("invalid cursor", field="cursor")
        pos = None if after is None else (str(after[0]), str(after[1]))
        rows = self.listing.docs(rf, after=pos, limit=n + 1)
        docs = [
            {
                "doc_id": d.doc_id,
                "scope": d.scope,
                "units": d.units,
                "planes": list(d.planes),
                "modalities": list(d.modalities),
                "source_uri": d.source_uri,
                "created_at": d.created_at,
                "updated_at": d.updated_at,
            }
            for d in rows[:n]
        ]
        nxt = encode_cursor([docs[-1]["scope"], docs[-1]["doc_id"]]) if len(rows) > n else None
        return {"docs": docs, "next_cursor": nxt, "context": {"effective_scopes": scopes}}

    def list_units(
        self,
        principal: Principal,
        header_scope: str | None,
        query_scope: str | None,
        *,
        doc_id: str | None = None,
        cursor: str | None = None,
        limit: int | None = None,
        plane: str | None = None,
        modality: str | None = None,
        t_from: int | None = None,
        t_to: int | None = None,
    ) -> dict[str, Any]:
        scopes, n, rf = self._listing(
            principal, header_scope, query_scope, limit, plane, modality, t_from, t_to
        )
        if doc_id is not None:
            rf = dataclasses.replace(rf, doc_ids=(doc_id,))
        after = decode_cursor(cursor)
        # A backend's key: an int in a 64-bit signed range (a forged 2**63 would overflow).
        if after is not None and (
            isinstance(after, bool) or not isinstance(after, int) or not 0 <= after < 2**63
        ):
            raise ValidationError("invalid cursor", field="cursor")
        rows = self.listing.units(rf, after=after, limit=n + 1)
        shots = [u.unit_id for _, u in rows[:n] if u.modality == "video_shot"]
        stills = self.keyframes.present(shots) if shots else set()
        units = [unit_dict(u, u.unit_id in stills) for _, u in rows[:n]]
        nxt = encode_cursor(rows[n - 1][0]) if len(rows) > n else None
        return {"units": units, "next_cursor": nxt, "context": {"effective_scopes": scopes}}

    def patch_doc(
        self,
        principal: Principal,
        doc_id: str,
        body: Any,
        header_scope: str | None,
        query_scope: str | None,
    ) -> dict[str, Any]:
        """Change a document's ``acl_groups`` in place, audited and effective at once (D-16)."""
        if not principal.has("write"):
            raise ForbiddenError("the write permission is required")
        if not isinstance(body, dict) or set(body) != {"acl_groups"}:
            raise ValidationError('body must be {"acl_groups": [...]}', field="acl_groups")
        groups = body["acl_groups"]
        if (
            not isinstance(groups, list)
            or not all(isinstance(g, str) and 0 < len(g) <= 512 for g in groups)
            or len(groups) > 64
        ):
            raise ValidationError("acl_groups must be a list of up to 64 strings")
        groups = sorted(set(groups))
        scopes = self.request_scope(principal, header_scope, query_scope)
        with self.writes.write() as tx:
            rows = [
                u
                for u in tx.docs.in_scopes(scopes, doc_id=doc_id)
                if acl.may_destroy(principal, u.acl_view())
            ]
            if not rows:
                raise NotFoundError("document not found")
            # Only the owner (or an admin) re-permissions a document.
            mine = [u for u in rows if u.acl_owner == principal.name or principal.has("admin")]
            if not mine:
                raise ForbiddenError("only the document's owner or an admin may change its ACL")
            old = set().union(*(set(u.acl_groups) for u in mine))
            if not acl.may_add_groups(principal, old, groups):
                raise GroupForbiddenError(
                    "you may add only groups you belong to", groups=sorted(set(groups) - old)
                )
            tx.units.set_groups([u.unit_id for u in mine], groups)
            faults.point("acl.after_update")
            tx.units.bump_generations({u.scope for u in mine})
            tx.audit.append(
                principal,
                "doc.acl",
                {"doc_id": doc_id, "units": [u.unit_id for u in mine], "acl_groups": groups},
            )
        faults.point("acl.after_commit")
        with self.writes.ordered():  # the derived indexes see the new ACL before the reply
            self.outbox.replay()
        return {"doc_id": doc_id, "updated": len(mine), "acl_groups": groups}

    def put_doc(
        self, principal: Principal, doc_id: str, body: Any, header_scope: str | None
    ) -> dict[str, Any]:
        """Replace a document's Units atomically (D-17)."""
        if not principal.has("write"):
            raise ForbiddenError("the write permission is required")
        if not isinstance(body, dict) or not isinstance(body.get("units"), list):
            raise ValidationError('body must be an object with a "units" array', field="units")
        if set(body) - {"units"}:
            raise ValidationError("PUT /v1/docs/{doc_id} takes only units")
        if not body["units"]:
            raise ValidationError("units must not be empty", field="units")
        units = []
        for u in body["units"]:
            if isinstance(u, dict):
                if u.get("doc_id", doc_id) != doc_id:
                    raise ValidationError("a unit's doc_id differs from the path", field="doc_id")
                u = {**u, "doc_id": doc_id}
            units.append(u)
        return self.ingestor.ingest(principal, units, header_scope, "replace")

    def documents_used(self, principal: Principal) -> int:
        """Documents the principal created (what its document quota counts)."""
        return self.writes.quota.docs_used(principal.name)

    def usage(
        self, principal: Principal, t_from: int | None = None, t_to: int | None = None
    ) -> dict[str, Any]:
        if not principal.has("read"):
            raise ForbiddenError("the read permission is required")
        used = self.documents_used(principal)
        created = self.usage_reader.units_created(principal.name)
        per_plane = {p: 0 for p in PLANES} | dict(created.per_plane)
        chars = created.text_chars
        now = int(time.time() * 1000)
        lo = t_from if t_from is not None else now - 30 * 86_400_000
        hi = t_to if t_to is not None else now + 1
        day_lo, day_hi = lo // 86_400_000, (hi - 1) // 86_400_000
        reqs: dict[str, int] = {}
        cost = 0.0
        for r in self.usage_reader.requests(principal.name, day_lo, day_hi):
            reqs[r.route] = r.requests
            cost += r.cost_micro_usd / 1e6
        pending = getattr(self, "meter", None)
        if pending is not None:
            for route, n, micro in pending.pending(principal.name, day_lo, day_hi):
                reqs[route] = reqs.get(route, 0) + n
                cost += micro / 1e6
        return {
            "principal": principal.name,
            "tier": principal.tier,
            "documents": {"used": used, "quota": principal.doc_quota},
            "units": {"total": sum(per_plane.values()), "per_plane": per_plane},
            "text_chars": chars,
            "period": {"from": lo, "to": hi},
            "requests": dict(sorted(reqs.items())),
            "est_cost_usd": round(cost, 6),
            **self.object_usage(principal),  # type: ignore[attr-defined]
        }


def unit_dict(u: UnitRecord, keyframe: bool = False) -> dict[str, Any]:
    """A Unit as the API shows it; ``keyframe``: a video shot's keyframe is kept (D-236)."""
    return {
        "unit_id": u.unit_id,
        "text": u.text,
        "scope": u.scope,
        "doc_id": u.doc_id,
        "modality": u.modality,
        "plane": u.plane,
        "source_uri": u.source_uri or "",
        "mime": u.mime,
        "locator": u.locator.to_dict() if u.locator else None,
        "acl_owner": u.acl_owner,
        "acl_groups": list(u.acl_groups),
        "content_hash": u.content_hash,
        "chunk": {"index": u.chunk_index, "count": u.chunk_count},
        "created_at": u.created_at,
        "event_at": u.event_at,
        "t_bucket": None if u.event_at is None else u.event_at // 3_600_000,  # D-20
        "link": unit_link(u),
        "preview": f"/v1/units/{u.unit_id}/preview" if has_preview(u, keyframe) else None,
    }


def unit_link(u: UnitRecord) -> str | None:
    """A URL a UI can open at the exact spot: the object with its ``#page=`` / ``#t=`` fragment."""
    if not u.object_key:
        return None
    uri = u.source_uri or ""
    frag = uri[len(u.object_key) :] if uri.startswith(u.object_key) else ""
    return f"/v1/objects/{u.object_key}{frag}"


def has_preview(u: UnitRecord, keyframe: bool = False) -> bool:
    """A page or an image to draw the box on, or a video shot's kept keyframe (D-236). A shot
    derived before keyframes were kept has none, and advertises none rather than one that
    fails (D-174)."""
    if u.modality == "video_shot":
        return keyframe
    return bool(u.object_key) and u.plane in ("doc_visual", "visual")


def word_dicts(words: list[Word]) -> list[dict[str, Any]]:
    """A word table as the API shows it: only the fields a word has."""
    out: list[dict[str, Any]] = []
    for w in words:
        d: dict[str, Any] = {"start": w.start, "end": w.end}
        if w.t_start_ms is not None:
            d["t_start_ms"], d["t_end_ms"] = w.t_start_ms, w.t_end_ms
        if w.box is not None:
            d["page"], d["box"] = w.page, list(w.box)
        if w.conf is not None:
            d["conf"] = w.conf
        out.append(d)
    return out
