"""Documents and Units listing, ACL changes, document replace, usage (D-60, D-61, D-16, D-17).

Mixed into ``Service``. Every listing applies the one visibility predicate in SQL and pages with
opaque keyset cursors (offsets skip or repeat rows when data changes between pages).
"""

from __future__ import annotations

import base64
import time
from typing import TYPE_CHECKING, Any

import orjson

from . import faults
from .auth import acl
from .errors import ForbiddenError, GroupForbiddenError, NotFoundError, ValidationError
from .storage.sqlite import unit_keyframes
from .storage.sqlite import units as units_sql
from .storage.sqlite.filter_sql import visible_sql
from .types import PLANES, Locator, Principal

if TYPE_CHECKING:
    from .ingest.pipeline import Ingestor
    from .storage.protocols_writes import WriteStore
    from .storage.sqlite.catalog import Catalog
    from .storage.sqlite.index_sync import IndexSync

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


def _filters(
    plane: str | None, modality: str | None, t_from: int | None, t_to: int | None
) -> tuple[str, list[object]]:
    parts: list[str] = []
    params: list[object] = []
    if plane is not None:
        if plane not in PLANES:
            raise ValidationError(f"unknown plane {plane!r}", field="plane")
        parts.append("u.plane = ?")
        params.append(plane)
    if modality is not None:
        parts.append("u.modality = ?")
        params.append(modality)
    if t_from is not None:
        parts.append("u.event_at >= ?")
        params.append(t_from)
    if t_to is not None:
        parts.append("u.event_at < ?")
        params.append(t_to)
    return (" AND " + " AND ".join(parts)) if parts else "", params


class DocumentsMixin:
    catalog: Catalog
    sync: IndexSync
    ingestor: Ingestor
    audit_key: bytes
    writes: WriteStore

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
    ) -> tuple[list[str], int, str, list[object], str, list[object]]:
        """What every listing starts with: permission, clamped scopes, page size, the visibility
        predicate and the optional filters."""
        if not principal.has("read"):
            raise ForbiddenError("the read permission is required")
        scopes = self.request_scope(principal, header_scope, query_scope)
        n = page_size(limit)
        vis, params = visible_sql("u", scopes, principal.name, principal.groups)
        extra, fparams = _filters(plane, modality, t_from, t_to)
        return scopes, n, vis, params, extra, fparams

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
        scopes, n, vis, params, extra, fparams = self._listing(
            principal, header_scope, query_scope, limit, plane, modality, t_from, t_to
        )
        after = decode_cursor(cursor)
        cur_sql = ""
        if after is not None:
            if not (isinstance(after, list) and len(after) == 2):
                raise ValidationError("invalid cursor", field="cursor")
            cur_sql = " AND (u.scope, u.doc_id) > (?, ?)"
            fparams += [str(after[0]), str(after[1])]
        rows = (
            self.catalog.reader()
            .execute(
                "SELECT u.scope, u.doc_id, COUNT(*) AS units,"
                " GROUP_CONCAT(DISTINCT u.plane) AS planes,"
                " GROUP_CONCAT(DISTINCT u.modality) AS modalities, MIN(u.created_at) AS created_at,"
                " MAX(u.created_at) AS updated_at, MIN(u.source_uri) AS source_uri"
                f" FROM units u WHERE {vis} AND u.seq <= ?{extra}{cur_sql}"
                " GROUP BY u.scope, u.doc_id ORDER BY u.scope, u.doc_id LIMIT ?",
                (*params, self.sync.applied_seq, *fparams, n + 1),
            )
            .fetchall()
        )
        docs = [
            {
                "doc_id": r["doc_id"],
                "scope": r["scope"],
                "units": r["units"],
                "planes": sorted(r["planes"].split(",")),
                "modalities": sorted(r["modalities"].split(",")),
                "source_uri": r["source_uri"],
                "created_at": r["created_at"],
                "updated_at": r["updated_at"],
            }
            for r in rows[:n]
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
        scopes, n, vis, params, extra, fparams = self._listing(
            principal, header_scope, query_scope, limit, plane, modality, t_from, t_to
        )
        if doc_id is not None:
            extra += " AND u.doc_id = ?"
            fparams.append(doc_id)
        after = decode_cursor(cursor)
        if after is not None:
            # A catalog id: an int in SQLite's 64-bit range (a forged 2**63 would overflow).
            if isinstance(after, bool) or not isinstance(after, int) or not 0 <= after < 2**63:
                raise ValidationError("invalid cursor", field="cursor")
            extra += " AND u.id > ?"
            fparams.append(after)
        rows = (
            self.catalog.reader()
            .execute(
                f"SELECT {units_sql.UNIT_COLUMNS} FROM units u WHERE {vis} AND u.seq <= ?{extra}"
                " ORDER BY u.id LIMIT ?",
                (*params, self.sync.applied_seq, *fparams, n + 1),
            )
            .fetchall()
        )
        shots = [int(r["id"]) for r in rows[:n] if r["modality"] == "video_shot"]
        stills = unit_keyframes.present(self.catalog.reader(), shots) if shots else set()
        units = [unit_dict(r, int(r["id"]) in stills) for r in rows[:n]]
        nxt = encode_cursor(int(rows[n - 1]["id"])) if len(rows) > n else None
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
            self.sync.apply_pending()
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
        return int(
            self.catalog.reader()
            .execute("SELECT COUNT(*) FROM docs WHERE created_by = ?", (principal.name,))
            .fetchone()[0]
        )

    def usage(
        self, principal: Principal, t_from: int | None = None, t_to: int | None = None
    ) -> dict[str, Any]:
        if not principal.has("read"):
            raise ForbiddenError("the read permission is required")
        conn = self.catalog.reader()
        used = self.documents_used(principal)
        per_plane = {p: 0 for p in PLANES}
        chars = 0
        for r in conn.execute(
            "SELECT plane, COUNT(*), SUM(LENGTH(text)) FROM units WHERE created_by = ?"
            " GROUP BY plane",
            (principal.name,),
        ):
            per_plane[r[0]] = r[1]
            chars += r[2] or 0
        now = int(time.time() * 1000)
        lo = t_from if t_from is not None else now - 30 * 86_400_000
        hi = t_to if t_to is not None else now + 1
        day_lo, day_hi = lo // 86_400_000, (hi - 1) // 86_400_000
        reqs: dict[str, int] = {}
        cost = 0.0
        for r in conn.execute(
            "SELECT route, SUM(requests), SUM(cost_micro_usd) FROM usage_daily"
            " WHERE principal = ? AND day BETWEEN ? AND ? GROUP BY route",
            (principal.name, day_lo, day_hi),
        ):
            reqs[r[0]] = int(r[1])
            cost += (r[2] or 0) / 1e6
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


def unit_dict(row: Any, keyframe: bool = False) -> dict[str, Any]:
    """A Unit as the API shows it; ``keyframe``: a video shot's keyframe is kept (D-236)."""
    loc = Locator.from_row(row)
    return {
        "unit_id": row["unit_id"],
        "text": row["text"],
        "scope": row["scope"],
        "doc_id": row["doc_id"],
        "modality": row["modality"],
        "plane": row["plane"],
        "source_uri": row["source_uri"],
        "mime": row["mime"],
        "locator": loc.to_dict() if loc else None,
        "acl_owner": row["acl_owner"],
        "acl_groups": orjson.loads(row["acl_groups"]),
        "content_hash": row["content_hash"],
        "chunk": {"index": row["chunk_idx"], "count": row["n_chunks"]},
        "created_at": row["created_at"],
        "event_at": row["event_at"],
        "t_bucket": row["t_bucket"],
        "link": units_sql.unit_link(row),
        "preview": f"/v1/units/{row['unit_id']}/preview" if has_preview(row, keyframe) else None,
    }


def has_preview(row: Any, keyframe: bool = False) -> bool:
    """A page or an image to draw the box on, or a video shot's kept keyframe (D-236). A shot
    derived before keyframes were kept has none, and advertises none rather than one that
    fails (D-174)."""
    if row["modality"] == "video_shot":
        return keyframe
    return bool(row["object_key"]) and row["plane"] in ("doc_visual", "visual")
