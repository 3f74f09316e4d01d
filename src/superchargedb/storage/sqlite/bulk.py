"""SQL for bulk import: many Units, their outbox adds and group rows in one statement each.

``insert_units`` is the batch form of ``units.insert_unit``: it assigns catalog ids and outbox
seqs itself (the caller holds the writer lock inside one ``BEGIN IMMEDIATE`` transaction, so
``sqlite_sequence`` cannot move under it), so that each Unit's ``seq`` column is written with the
row instead of by a second ``UPDATE`` per Unit. A row whose idempotency key already exists is
skipped (``ON CONFLICT DO NOTHING``) and gets no outbox row, exactly as an unchanged ingest.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from typing import Any

import numpy as np

from .acl_tokens import acl_tokens

# The columns written for every imported Unit, in this order (the rest keep their defaults).
COLUMNS = (
    "id, unit_id, scope, doc_id, modality, plane, source_uri, mime, text, acl, acl_owner,"
    " acl_groups, content_hash, chunk_idx, n_chunks, context, loc_kind, loc_start, loc_end,"
    " t_start_ms, t_end_ms, shot_idx, page, bbox_x0, bbox_y0, bbox_x1, bbox_y1, created_at,"
    " event_at, t_bucket, created_by, seq, model_id, embedding"
)
_N_COLS = COLUMNS.count(",") + 1
_LOC_COLS = (
    "loc_kind",
    "loc_start",
    "loc_end",
    "t_start_ms",
    "t_end_ms",
    "shot_idx",
    "page",
    "bbox_x0",
    "bbox_y0",
    "bbox_x1",
    "bbox_y1",
)


def _top(conn: sqlite3.Connection, table: str) -> int:
    row = conn.execute("SELECT seq FROM sqlite_sequence WHERE name = ?", (table,)).fetchone()
    return int(row[0]) if row else 0


def insert_units(
    conn: sqlite3.Connection, rows: Sequence[dict[str, Any]], vectors: np.ndarray
) -> tuple[list[int], list[int]]:
    """Insert ``rows`` (the columns of ``units.insert_unit``) with their f16 ``vectors``.

    Returns ``(ids, positions)``: the catalog ids actually inserted, ascending, and the index in
    ``rows`` of each; skipped duplicates are absent. Runs inside the caller's write transaction.
    """
    if len(rows) != len(vectors):
        raise ValueError(f"{len(rows)} rows but {len(vectors)} vectors")
    base_id = max(_top(conn, "units"), _max(conn, "units", "id"))
    base_seq = max(_top(conn, "outbox"), _max(conn, "outbox", "seq"))
    f16 = np.ascontiguousarray(vectors, dtype=np.float16)
    # Units of an import share few (scope, owner, groups) triples; hash each triple's tokens once.
    acls: dict[tuple[str, str, tuple[str, ...]], str] = {}
    values = []
    for i, r in enumerate(rows):
        groups = r["acl_groups"]
        triple = (r["scope"], r["acl_owner"], tuple(groups))
        acl = acls.get(triple)
        if acl is None:
            acl = acls[triple] = acl_tokens(r["scope"], r["acl_owner"], groups)
        loc = r.get("locator") or {}
        values.append(
            (
                base_id + 1 + i,
                r["unit_id"],
                r["scope"],
                r["doc_id"],
                r["modality"],
                r["plane"],
                r["source_uri"],
                r["mime"],
                r["text"],
                acl,
                r["acl_owner"],
                json.dumps(groups),
                r["content_hash"],
                0,
                1,
                r.get("context", ""),
                *(loc.get(c) for c in _LOC_COLS),
                r["created_at"],
                r["event_at"],
                r["event_at"] // 3_600_000,
                r["created_by"],
                base_seq + 1 + i,
                r["model_id"],
                f16[i].tobytes(),
            )
        )
    marks = ",".join("?" * _N_COLS)
    conn.executemany(
        f"INSERT INTO units({COLUMNS}) VALUES ({marks}) ON CONFLICT DO NOTHING", values
    )
    got = conn.execute(
        "SELECT id, seq, plane FROM units WHERE id > ? AND id <= ? ORDER BY id",
        (base_id, base_id + len(rows)),
    ).fetchall()
    conn.executemany(
        "INSERT INTO outbox(seq, op, plane, key) VALUES (?, 'add', ?, ?)",
        [(int(r[1]), r[2], int(r[0])) for r in got],
    )
    inserted = {int(r[0]) for r in got}
    conn.executemany(
        "INSERT INTO unit_groups(grp, unit) VALUES (?, ?)",
        [
            (g, base_id + 1 + i)
            for i, r in enumerate(rows)
            if base_id + 1 + i in inserted
            for g in r["acl_groups"]
        ],
    )
    ids = sorted(inserted)
    return ids, [k - base_id - 1 for k in ids]


def _max(conn: sqlite3.Connection, table: str, col: str) -> int:
    row = conn.execute(f"SELECT MAX({col}) FROM {table}").fetchone()
    return int(row[0]) if row and row[0] is not None else 0
