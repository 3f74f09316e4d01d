"""The rows beside the Units on PostgreSQL: documents, quota, usage, word tables, object entries
(``DocWriter``, ``QuotaLedger``, ``UsageWriter``, ``WordWriter``, ``ObjectRowWriter`` of
``protocols_writes.py``), with the embedded backend's semantics (``storage/sqlite/write_rows.py``).

Each lookup takes the whole batch and answers in its order in one statement (D-176): the keys go
in as parallel arrays ``WITH ORDINALITY`` and the rows come back tagged with their key's place.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ..protocols_writes import DocKey, IdempotencyKey, MediaUse, StoredUnit, UsageCount, Word
from . import rls
from .filter_sql import scope_sql
from .sql import Row, Sql, refuse_nul

STORED = "u.unit_id, u.scope, u.doc_id, u.acl_owner, u.acl_groups, u.content_hash, u.plane"


def stored_unit(r: Row) -> StoredUnit:
    return StoredUnit(str(r[0]), str(r[1]), str(r[2]), str(r[3]), tuple(r[4]), str(r[5]), str(r[6]))


def _columns(keys: Sequence[tuple[str, ...]], width: int) -> list[list[str]]:
    return [[k[i] for k in keys] for i in range(width)]


def _clean(keys: Sequence[tuple[str, ...]]) -> list[tuple[int, tuple[str, ...]]]:
    """Keys with their place; one holding a NUL byte names nothing stored (D-207)."""
    return [(i, k) for i, k in enumerate(keys) if not any("\0" in v for v in k)]


class PgDocs:
    """``DocWriter`` (``DocReader`` outside a write)."""

    def __init__(self, sql: Sql) -> None:
        self.sql = sql

    def find(self, keys: Sequence[IdempotencyKey]) -> list[list[StoredUnit]]:
        return self._per_key(keys, "AND u.content_hash = k.h", ", h", 4)

    def units_of(self, docs: Sequence[DocKey]) -> list[list[StoredUnit]]:
        return self._per_key(docs, "", "", 3)

    def _per_key(
        self, keys: Sequence[tuple[str, ...]], extra: str, extra_col: str, width: int
    ) -> list[list[StoredUnit]]:
        out: list[list[StoredUnit]] = [[] for _ in keys]
        placed = _clean(keys)
        if not placed:
            return out
        arrays = _columns([k for _, k in placed], width)
        types = ", ".join(["%s::text[]"] * width)
        rows = self.sql.rows(
            f"SELECT k.n, {STORED} FROM unnest({types}) WITH ORDINALITY"
            f" AS k(s, d, o{extra_col}, n) JOIN units u ON u.scope = k.s AND u.doc_id = k.d"
            f" AND u.acl_owner = k.o {extra} ORDER BY k.n, u.chunk_idx, u.id",
            arrays,
        )
        for r in rows:
            out[placed[int(r[0]) - 1][0]].append(stored_unit(r[1:]))
        return out

    def in_scopes(
        self, scopes: Sequence[str], *, doc_id: str | None = None, unit_id: str | None = None
    ) -> list[StoredUnit]:
        s_sql, params = scope_sql("u.scope", scopes)
        if unit_id is not None:
            if "\0" in unit_id:
                return []
            # By id only once its index operations are applied, as the embedded backend reads
            # a Unit id below its applied watermark: a Unit not applied yet is not there for
            # its reader (D-241).
            where = (
                "u.unit_id = %s AND NOT EXISTS (SELECT 1 FROM outbox o"
                " WHERE o.unit = u.id AND NOT o.applied)"
            )
            first: list[object] = [unit_id]
        else:
            if doc_id is None or "\0" in doc_id:
                return []
            where, first = "u.doc_id = %s", [doc_id]
        rows = self.sql.rows(
            f"SELECT {STORED} FROM units u WHERE {where} AND {s_sql} ORDER BY u.id",
            [*first, *params],
        )
        return [stored_unit(r) for r in rows]

    def reserve(self, docs: Iterable[DocKey], created_by: str, at_ms: int) -> None:
        # One order of row locks for every writer; a key with a NUL byte has no Unit to count.
        keys = [k for _, k in _clean(sorted(set(docs)))]
        if not keys:
            return
        self.sql.do(
            "INSERT INTO docs(scope, doc_id, acl_owner, created_by, created_at)"
            " SELECT s, d, o, %s, %s FROM unnest(%s::text[], %s::text[], %s::text[]) AS k(s, d, o)"
            " ON CONFLICT DO NOTHING",
            [created_by, at_ms, *_columns(keys, 3)],
        )


class PgQuota:
    def __init__(self, sql: Sql) -> None:
        self.sql = sql

    def docs_used(self, principal: str) -> int:
        # A principal's quota counts its documents in every tenant (rls.unbounded_rows).
        q = "SELECT count(*) FROM docs WHERE created_by = %s"
        return int(rls.unbounded_rows(self.sql, q, [principal])[0][0])

    def unknown_docs(self, docs: Sequence[DocKey]) -> set[DocKey]:
        keys = list(dict.fromkeys(docs))
        placed = _clean(keys)
        if not placed:
            return set(keys)
        known = {
            int(r[0])
            for r in self.sql.rows(
                "SELECT k.n FROM unnest(%s::text[], %s::text[], %s::text[]) WITH ORDINALITY"
                " AS k(s, d, o, n) JOIN docs x ON x.scope = k.s AND x.doc_id = k.d"
                " AND x.acl_owner = k.o",
                _columns([k for _, k in placed], 3),
            )
        }
        found = {placed[n - 1][0] for n in known}
        return {k for i, k in enumerate(keys) if i not in found}

    def media_use(self, principal: str) -> MediaUse:
        r = rls.unbounded_rows(
            self.sql,
            "SELECT (SELECT count(*) FROM objects WHERE acl_owner = %s),"
            " (SELECT coalesce(sum(size), 0) FROM objects WHERE acl_owner = %s),"
            " (SELECT count(*) FROM (SELECT DISTINCT scope, doc_id, acl_owner, page FROM units"
            "  WHERE created_by = %s AND object_key IS NOT NULL AND plane = 'doc_visual') p),"
            " (SELECT coalesce(sum(m), 0) FROM (SELECT max(t_end_ms) AS m FROM units"
            "  WHERE created_by = %s AND object_key IS NOT NULL AND t_end_ms IS NOT NULL"
            "  GROUP BY scope, doc_id, acl_owner) t)",
            [principal] * 4,
        )[0]
        return MediaUse(int(r[0]), int(r[1]), int(r[2]), int(r[3]))

    def media_reserved(self, principal: str) -> tuple[int, int]:
        r = rls.unbounded_rows(
            self.sql,
            "SELECT coalesce(sum((p ->> 'cost_pages')::numeric), 0),"
            " coalesce(sum((p ->> 'cost_ms')::numeric), 0)"
            " FROM (SELECT payload::jsonb AS p FROM jobs WHERE principal = %s AND kind = 'derive'"
            " AND state IN ('queued', 'running') AND pg_input_is_valid(payload, 'jsonb')) j",
            [principal],
        )[0]
        return int(r[0]), int(r[1])


class PgUsage:
    def __init__(self, sql: Sql) -> None:
        self.sql = sql

    def add(self, counts: Sequence[UsageCount]) -> None:
        # One row per key (a key twice in one statement would be a conflict with itself).
        total: dict[tuple[str, int, str], list[int]] = {}
        for c in counts:
            refuse_nul("a usage count", c.principal, c.route)
            t = total.setdefault((c.principal, c.day, c.route), [0, 0])
            t[0] += c.requests
            t[1] += c.cost_micro_usd
        if not total:
            return
        keys = sorted(total)
        self.sql.do(
            "INSERT INTO usage_daily(principal, day, route, requests, cost_micro_usd)"
            " SELECT * FROM unnest(%s::text[], %s::integer[], %s::text[], %s::bigint[],"
            " %s::bigint[]) ON CONFLICT (principal, day, route) DO UPDATE SET"
            " requests = usage_daily.requests + excluded.requests,"
            " cost_micro_usd = usage_daily.cost_micro_usd + excluded.cost_micro_usd",
            [
                [k[0] for k in keys],
                [k[1] for k in keys],
                [k[2] for k in keys],
                [total[k][0] for k in keys],
                [total[k][1] for k in keys],
            ],
        )


class PgWords:
    def __init__(self, sql: Sql) -> None:
        self.sql = sql

    def put(self, unit_id: str, words: Sequence[Word]) -> None:
        """Replace the Unit's word table (deleted with the Unit: ``ON DELETE CASCADE``)."""
        if "\0" in unit_id:
            return  # no Unit has that id
        unit = "(SELECT id FROM units WHERE unit_id = %s)"
        self.sql.do(f"DELETE FROM unit_words WHERE unit = {unit}", [unit_id])
        if not words:
            return
        boxes = [w.box or (None, None, None, None) for w in words]
        self.sql.do(
            "INSERT INTO unit_words(unit, idx, char_start, char_end, t_start_ms, t_end_ms, page,"
            f" x0, y0, x1, y1, conf) SELECT {unit}, w.* FROM unnest(%s::integer[],"
            " %s::integer[], %s::integer[], %s::bigint[], %s::bigint[], %s::integer[],"
            " %s::float8[], %s::float8[], %s::float8[], %s::float8[], %s::float8[]) AS w"
            f" WHERE {unit} IS NOT NULL",
            [
                unit_id,
                list(range(len(words))),
                [w.start for w in words],
                [w.end for w in words],
                [w.t_start_ms for w in words],
                [w.t_end_ms for w in words],
                [w.page for w in words],
                *([b[i] for b in boxes] for i in range(4)),
                [w.conf for w in words],
                unit_id,
            ],
        )


class PgObjectRows:
    def __init__(self, sql: Sql) -> None:
        self.sql = sql

    def remove(self, key: str, owner: str) -> None:
        if "\0" in key or "\0" in owner:
            return  # no object is stored under it
        self.sql.do("DELETE FROM objects WHERE key = %s AND acl_owner = %s", [key, owner])


class PgKeyframes:
    """``KeyframeWriter``: a video shot's keyframe, in the write's transaction."""

    def __init__(self, sql: Sql) -> None:
        self.sql = sql

    def put(self, unit_id: str, mime: str, data: bytes) -> None:
        if "\0" in unit_id:
            return  # no Unit has that id
        self.sql.do(
            "INSERT INTO unit_keyframes(unit, mime, data) SELECT id, %s, %s FROM units"
            " WHERE unit_id = %s ON CONFLICT (unit) DO UPDATE SET mime = excluded.mime,"
            " data = excluded.data",
            [mime, data, unit_id],
        )
