"""Objects on the facade: PUT (write, scope-prefixed key, audited) and authorized GET.

A GET is allowed when the caller can read the object itself (its scope within the caller's
grants and the ACL matches) or any Unit derived from it (DECISIONS 47). Everything else is a 404.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from . import faults
from .auth.acl import scope_sql, visible_sql
from .auth.scopes import check_scope, within_any
from .documents import decode_cursor, encode_cursor, page_size
from .errors import (
    ConflictError,
    ForbiddenError,
    NotFoundError,
    ScopeForbiddenError,
    ValidationError,
)
from .storage import audit
from .storage.objects import FileBlobStore, check_key
from .storage.units import now_ms
from .types import Principal

if TYPE_CHECKING:
    from .settings import Settings
    from .storage.catalog import Catalog

_CT = re.compile(r"[a-z0-9][a-z0-9!#$&^_.+-]*/[a-z0-9][a-z0-9!#$&^_.+-]*")


class ObjectsMixin:
    catalog: Catalog
    settings: Settings
    blobs: FileBlobStore
    audit_key: bytes

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
        existing = self._object_row(key)
        if existing is not None and not self._may_read_object(principal, existing):
            raise ForbiddenError("the key is taken")  # says nothing about what is there
        if existing is not None and if_match != f'"{existing["sha256"]}"':
            raise ConflictError("objects are immutable: send If-Match with the current ETag")
        sha, size = self.blobs.put(chunks, self.settings.max_object_bytes)
        faults.point("objects.put.before_row")
        with self.catalog.write_lock(), self.catalog.write() as conn:
            conn.execute(
                "INSERT INTO objects(key, sha256, size, content_type, scope, acl_owner, acl_groups,"
                " created_by, created_at) VALUES (?,?,?,?,?,?,?,?,?)"
                " ON CONFLICT(key) DO UPDATE SET sha256 = excluded.sha256, size = excluded.size,"
                " content_type = excluded.content_type, created_at = excluded.created_at",
                (
                    key,
                    sha,
                    size,
                    ctype,
                    scope,
                    principal.name,
                    json.dumps(groups),
                    principal.name,
                    now_ms(),
                ),
            )
            faults.point("objects.put.after_row")
            audit.append(
                conn,
                self.audit_key,
                principal,
                "object.put",
                {"key": key, "sha256": sha, "size": size},
            )
        faults.point("objects.put.after_commit")
        return {
            "key": key,
            "sha256": sha,
            "size": size,
            "content_type": ctype,
            "etag": f'"{sha}"',
            "scope": scope,
        }

    def _object_row(self, key: str) -> Any:
        return (
            self.catalog.reader().execute("SELECT * FROM objects WHERE key = ?", (key,)).fetchone()
        )

    def _may_read_object(self, principal: Principal, row: Any) -> bool:
        own_scope = within_any(row["scope"], principal.scopes)
        groups = set(json.loads(row["acl_groups"]))
        if own_scope and (row["acl_owner"] == principal.name or groups & principal.groups):
            return True
        vis, params = visible_sql("u", principal.scopes, principal.name, principal.groups)
        hit = (
            self.catalog.reader()
            .execute(
                f"SELECT 1 FROM units u WHERE u.object_key = ? AND {vis} LIMIT 1",
                (row["key"], *params),
            )
            .fetchone()
        )
        return hit is not None

    def object_for_read(self, principal: Principal, key: str) -> Any:
        """The object's row when the caller may read it; 404 otherwise (existence never shown)."""
        if not principal.has("read"):
            raise ForbiddenError("the read permission is required")
        try:
            check_key(key)
        except ValidationError:
            raise NotFoundError("object not found") from None
        row = self._object_row(key)
        if row is None or not self._may_read_object(principal, row):
            raise NotFoundError("object not found")
        return row

    def get_job(self, principal: Principal, job_id: str) -> dict[str, Any]:
        """A derivation job's progress and output; 404 unless the caller could read its Units."""
        if not principal.has("read"):
            raise ForbiddenError("the read permission is required")
        row = self.catalog.reader().execute("SELECT * FROM jobs WHERE id = ?", (job_id,)).fetchone()
        if row is None or not within_any(row["scope"], principal.scopes):
            raise NotFoundError("job not found")
        groups = set(json.loads(row["acl_groups"]))
        mine = row["principal"] == principal.name or row["acl_owner"] == principal.name
        if not (mine or groups & principal.groups):
            raise NotFoundError("job not found")
        return job_dict(row)

    def list_jobs(
        self,
        principal: Principal,
        state: str | None = None,
        cursor: str | None = None,
        limit: int | None = None,
    ) -> dict[str, Any]:
        """``GET /v1/jobs``: the jobs ``get_job`` would show the caller, oldest first, by keyset."""
        if not principal.has("read"):
            raise ForbiddenError("the read permission is required")
        if state is not None and state not in JOB_STATES:
            raise ValidationError(f"state must be one of {list(JOB_STATES)}", field="state")
        n = page_size(limit)
        # The same rule as get_job, in SQL: within the grants, and submitted by the caller,
        # owned by it or shared with one of its groups.
        s_sql, params = scope_sql("j.scope", principal.scopes)
        groups = sorted(principal.groups)
        who = "j.principal = ? OR j.acl_owner = ?"
        if groups:
            who += (
                " OR EXISTS (SELECT 1 FROM json_each(j.acl_groups) g"
                f" WHERE g.value IN ({','.join('?' * len(groups))}))"
            )
        sql = f"SELECT * FROM jobs j WHERE {s_sql} AND ({who})"
        params += [principal.name, principal.name, *groups]
        if state is not None:
            sql += " AND j.state = ?"
            params.append(state)
        after = decode_cursor(cursor)
        if after is not None:
            ok = isinstance(after, list) and len(after) == 2
            if not ok or not isinstance(after[0], int) or not isinstance(after[1], str):
                raise ValidationError("invalid cursor", field="cursor")
            if not 0 <= after[0] < 2**63:
                raise ValidationError("invalid cursor", field="cursor")
            sql += " AND (j.created_at, j.id) > (?, ?)"
            params += after
        sql += " ORDER BY j.created_at, j.id LIMIT ?"
        rows = self.catalog.reader().execute(sql, (*params, n + 1)).fetchall()
        jobs = [job_dict(r) for r in rows[:n]]
        last = rows[n - 1] if len(rows) > n else None
        nxt = encode_cursor([last["created_at"], last["id"]]) if last is not None else None
        return {"jobs": jobs, "next_cursor": nxt}


JOB_STATES = ("queued", "running", "done", "failed")


def job_dict(row: Any) -> dict[str, Any]:
    result = json.loads(row["result"]) if row["result"] else {}
    return {
        "job_id": row["id"],
        "kind": row["kind"],
        "state": row["state"],
        "progress": row["progress"],
        "attempts": row["attempts"],
        "max_attempts": row["max_attempts"],
        "error": row["error"],
        "unit_ids": result.get("unit_ids", []),
        "scope": row["scope"],
        "doc_id": json.loads(row["payload"]).get("doc_id"),
        "created_at": row["created_at"],
        "updated_at": row["updated_at"],
    }
