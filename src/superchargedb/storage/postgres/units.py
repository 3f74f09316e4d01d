"""Units on PostgreSQL: insert (row, postings, outbox), delete, re-permission, read, generations.

Every writer takes a cursor of the caller's open write transaction. An insert stores the Unit
with its ``halfvec`` embedding (the HNSW index follows at commit), its postings and BM25 length
(``lexical.py``) and one outbox ``add``; a delete removes the row and its postings and queues a
``remove`` carrying the statistics to take back; an ACL change rewrites the groups and the
length (the ``acl`` tokens are part of it) and queues an ``add`` of the same key, as the embedded
backend does.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import psycopg
from pgvector import HalfVector

from ...readfilter import ReadFilter, ancestors
from ..protocols import UnitRecord, Vector
from ..unit_rows import unit_record
from . import lexical, outbox
from .filter_sql import where_sql
from .sql import refuse_nul

COLUMNS = (
    "unit_id, scope, doc_id, plane, modality, source_uri, mime, text, acl_owner, acl_groups,"
    " content_hash, chunk_idx, n_chunks, loc_kind, loc_start, loc_end, t_start_ms, t_end_ms,"
    " shot_idx, page, bbox_x0, bbox_y0, bbox_x1, bbox_y1, created_at, event_at, object_key,"
    " object_sha"
)


def record(r: Mapping[str, Any]) -> UnitRecord:
    return unit_record(r, r["acl_groups"])  # groups: a text array here


_LOC_COLUMNS = (
    "loc_kind", "loc_start", "loc_end", "t_start_ms", "t_end_ms", "shot_idx", "page",
    "bbox_x0", "bbox_y0", "bbox_x1", "bbox_y1",
)  # fmt: skip
_INSERT_COLUMNS = (
    "unit_id", "scope", "doc_id", "plane", "modality", "source_uri", "mime", "text", "acl_owner",
    "acl_groups", "content_hash", "chunk_idx", "n_chunks", *_LOC_COLUMNS, "created_at",
    "event_at", "object_key", "object_sha", "context", "created_by", "model_id", "terms", "dl",
    "embedding",
)  # fmt: skip


def _insert_sql(skip_existing: bool) -> bytes:
    """One round trip per Unit: the row, its postings (positions as array literals: the lists
    are ragged) and its outbox operation. ``skip_existing``: a Unit whose idempotency key or id
    is stored already is skipped (nothing of it written) instead of failing the write; the
    statement returns the new row's key, or nothing when skipped."""
    names = ", ".join(_INSERT_COLUMNS)
    marks = ", ".join(["%s"] * len(_INSERT_COLUMNS))
    conflict = " ON CONFLICT DO NOTHING" if skip_existing else ""
    return (
        f"WITH u AS (INSERT INTO units({names}) VALUES ({marks}){conflict} RETURNING id),"
        " p AS (INSERT INTO postings(term, unit, tf, pos) SELECT x.t, u.id, x.tf, x.p::integer[]"
        " FROM u, unnest(%s::text[], %s::integer[], %s::text[]) AS x(t, tf, p)),"
        " o AS (INSERT INTO outbox(op, plane, unit, d_docs, d_len, terms, d_df)"
        " SELECT 'add', %s, u.id, 1, %s, %s::text[], 1 FROM u) SELECT id FROM u"
    ).encode()


_INSERT = _insert_sql(False)
_INSERT_NEW = _insert_sql(True)


def _params(unit: UnitRecord, vector: Vector, model_id: str) -> list[object]:
    """The insert's parameters. A NUL byte (which PostgreSQL text cannot hold) is refused
    before anything is written (D-207)."""
    for name, value in vars(unit).items():
        values = value if isinstance(value, tuple) else (value,)
        if any(isinstance(v, str) and "\0" in v for v in values):
            raise ValueError(f"a Unit's {name} may not contain a NUL byte")
    groups = sorted(set(unit.acl_groups))
    posts, n_tokens = lexical.postings(unit.text, unit.context)
    dl = n_tokens + lexical.acl_len(unit.scope, groups)
    event_at = unit.event_at if unit.event_at is not None else unit.created_at
    loc = unit.locator.to_columns() if unit.locator else {}
    terms = sorted(posts)
    return [
        unit.unit_id,
        unit.scope,
        unit.doc_id,
        unit.plane,
        unit.modality,
        unit.source_uri or "",
        unit.mime,
        unit.text,
        unit.acl_owner,
        groups,
        unit.content_hash,
        unit.chunk_index,
        unit.chunk_count,
        *(loc.get(c) for c in _LOC_COLUMNS),
        unit.created_at,
        event_at,
        unit.object_key,
        unit.object_sha,
        unit.context,
        unit.created_by or unit.acl_owner,  # whose quota and usage count it (the owner's)
        model_id,
        terms,
        dl,
        HalfVector(np.asarray(vector, dtype=np.float32).reshape(-1)),
        terms,
        [posts[t][0] for t in terms],
        ["{" + ",".join(map(str, posts[t][1])) + "}" for t in terms],
        unit.plane,
        dl,
        terms,
    ]


def insert(cur: psycopg.Cursor[Any], unit: UnitRecord, vector: Vector, model_id: str) -> None:
    """Store one Unit. Nothing is read back, so inserts stream in the write's pipeline."""
    # The same statement for every Unit: planned once per connection.
    cur.execute(_INSERT, _params(unit, vector, model_id), prepare=True)


def insert_many(
    cur: psycopg.Cursor[Any], units: Sequence[UnitRecord], vectors: Vector, model_id: str
) -> None:
    """:func:`insert` for a batch (``vectors`` row ``i`` is ``units[i]``'s), streamed."""
    if len(units) != len(vectors):
        raise ValueError(f"{len(units)} Units but {len(vectors)} vectors")
    params = [_params(u, v, model_id) for u, v in zip(units, vectors, strict=True)]
    if params:
        cur.executemany(_INSERT, params)


def insert_new(
    cur: psycopg.Cursor[Any], units: Sequence[UnitRecord], vectors: Vector, model_id: str
) -> list[tuple[int, int]]:
    """The Units whose idempotency key (and id) is new, skipping the others: ``(position in
    units, key)`` of each one stored, in order."""
    if len(units) != len(vectors):
        raise ValueError(f"{len(units)} Units but {len(vectors)} vectors")
    params = [_params(u, v, model_id) for u, v in zip(units, vectors, strict=True)]
    if not params:
        return []
    cur.executemany(_INSERT_NEW, params, returning=True)
    out: list[tuple[int, int]] = []
    i = 0
    while True:
        row = cur.fetchone()
        if row is not None:
            out.append((i, int(row[0])))
        i += 1
        if not cur.nextset():
            break
    return out


def delete(cur: psycopg.Cursor[Any], unit_ids: Sequence[str]) -> list[UnitRecord]:
    gone: list[UnitRecord] = []
    for uid in unit_ids:
        if "\0" in uid:
            continue  # no Unit has that id (D-207)
        r = cur.execute(
            f"DELETE FROM units WHERE unit_id = %s RETURNING id, terms, dl, {COLUMNS}".encode(),
            (uid,),
        ).fetchone()
        if r is None:
            continue
        row = dict(zip([d.name for d in cur.description or ()], r, strict=True))
        cur.execute(
            "DELETE FROM postings WHERE term = ANY(%s::text[]) AND unit = %s",
            (row["terms"], row["id"]),
        )
        outbox.append(cur, "remove", row["plane"], row["id"], -1, -row["dl"], row["terms"], -1)
        gone.append(record(row))
    # A document with no Unit left no longer counts against its creator's quota.
    docs = sorted({(u.scope, u.doc_id, u.acl_owner) for u in gone})
    if docs:
        cur.execute(
            "DELETE FROM docs d USING unnest(%s::text[], %s::text[], %s::text[]) AS k(s, doc, o)"
            " WHERE d.scope = k.s AND d.doc_id = k.doc AND d.acl_owner = k.o AND NOT EXISTS"
            " (SELECT 1 FROM units u WHERE u.scope = k.s AND u.doc_id = k.doc"
            " AND u.acl_owner = k.o)",
            ([k[0] for k in docs], [k[1] for k in docs], [k[2] for k in docs]),
        )
    return gone


def set_groups(cur: psycopg.Cursor[Any], unit_ids: Sequence[str], groups: Sequence[str]) -> None:
    refuse_nul("a Unit's groups", list(groups))
    new = sorted(set(groups))
    for uid in unit_ids:
        if "\0" in uid:
            continue
        r = cur.execute(
            "SELECT id, plane, scope, acl_groups FROM units WHERE unit_id = %s FOR UPDATE", (uid,)
        ).fetchone()
        if r is None:
            continue
        key, plane, scope, old = int(r[0]), str(r[1]), str(r[2]), list(r[3])
        delta = lexical.acl_len(scope, new) - lexical.acl_len(scope, old)
        cur.execute(
            "UPDATE units SET acl_groups = %s, dl = dl + %s WHERE id = %s", (new, delta, key)
        )
        outbox.append(cur, "add", plane, key, 0, delta, [], 0)


def bump_generations(cur: psycopg.Cursor[Any], scopes: Iterable[str]) -> None:
    """Each scope and every ancestor, in one sorted statement (row locks in one order)."""
    targets = sorted({a for s in scopes if "\0" not in s for a in ancestors(s)})
    if targets:
        cur.execute(
            "INSERT INTO scope_gens(scope, gen) SELECT s, 1 FROM unnest(%s::text[]) AS s"
            " ON CONFLICT (scope) DO UPDATE SET gen = scope_gens.gen + 1",
            (targets,),
        )


def get(conn: psycopg.Connection[Any], unit_id: str, rf: ReadFilter) -> UnitRecord | None:
    if "\0" in unit_id:
        return None
    where, params = where_sql(rf)
    cur = conn.execute(
        f"SELECT {COLUMNS} FROM units u WHERE u.unit_id = %s AND {where}".encode(),
        [unit_id, *params],
    )
    r = cur.fetchone()
    if r is None:
        return None
    return record(dict(zip([d.name for d in cur.description or ()], r, strict=True)))


def generations(conn: psycopg.Connection[Any], scopes: Sequence[str]) -> dict[str, int]:
    clean = [s for s in scopes if "\0" not in s]
    got = {
        str(s): int(g)
        for s, g in conn.execute(
            "SELECT scope, gen FROM scope_gens WHERE scope = ANY(%s::text[])", (clean,)
        )
    }
    return {s: got.get(s, 0) for s in scopes}
