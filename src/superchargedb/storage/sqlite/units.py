"""SQL for Units: insert, look up by idempotency key, ACL update, delete, hydrate, generations.

Every function takes an open connection; the caller owns the transaction.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from ... import faults
from ...readfilter import ancestors
from ..ids import now_ms as now_ms  # re-exported: the clock and ids live in storage/ids.py
from ..ids import uuid7 as uuid7
from .acl_tokens import acl_tokens

UNIT_COLUMNS = (
    "id, unit_id, scope, doc_id, modality, plane, source_uri, mime, text, acl_owner, acl_groups,"
    " content_hash, chunk_idx, n_chunks, loc_kind, loc_start, loc_end, t_start_ms, t_end_ms,"
    " shot_idx, page, bbox_x0, bbox_y0, bbox_x1, bbox_y1, created_at, event_at, t_bucket, seq,"
    " object_key, object_sha"
)


def find_by_key(
    conn: sqlite3.Connection, scope: str, doc_id: str, owner: str, content_hash: str
) -> list[sqlite3.Row]:
    return conn.execute(
        "SELECT id, unit_id, acl_groups, plane FROM units WHERE scope = ? AND doc_id = ?"
        " AND acl_owner = ? AND content_hash = ? ORDER BY chunk_idx",
        (scope, doc_id, owner, content_hash),
    ).fetchall()


def insert_unit(conn: sqlite3.Connection, row: dict[str, Any], vector: np.ndarray) -> int:
    """Insert one Unit + its outbox add; returns the catalog rowid (the vector key)."""
    groups = row["acl_groups"]
    cols = dict(row)
    cols["acl_groups"] = json.dumps(groups)
    cols["acl"] = acl_tokens(row["scope"], row["acl_owner"], groups)
    cols["embedding"] = np.asarray(vector, dtype=np.float16).tobytes()
    cols["seq"] = 0
    names = ", ".join(cols)
    marks = ", ".join("?" * len(cols))
    cur = conn.execute(
        f"INSERT INTO units({names}) VALUES ({marks}) ON CONFLICT DO NOTHING", tuple(cols.values())
    )
    if cur.rowcount == 0:
        raise sqlite3.IntegrityError("duplicate unit key")
    rowid = int(cur.lastrowid or 0)
    seq = conn.execute(
        "INSERT INTO outbox(op, plane, key) VALUES ('add', ?, ?)", (row["plane"], rowid)
    ).lastrowid
    conn.execute("UPDATE units SET seq = ? WHERE id = ?", (seq, rowid))
    conn.executemany(
        "INSERT INTO unit_groups(grp, unit) VALUES (?, ?)", [(g, rowid) for g in groups]
    )
    return rowid


def update_acl(conn: sqlite3.Connection, rowids: Sequence[int], groups: list[str]) -> None:
    """Re-permission Units in place; an outbox ``add`` of the same key tells the derived indexes
    (a no-op for the vector index, which already holds the key; the lexical index re-reads the
    ACL)."""
    for rid in rowids:
        r = conn.execute(
            "SELECT scope, acl_owner, plane FROM units WHERE id = ?", (rid,)
        ).fetchone()
        conn.execute(
            "UPDATE units SET acl_groups = ?, acl = ? WHERE id = ?",
            (json.dumps(groups), acl_tokens(r["scope"], r["acl_owner"], groups), rid),
        )
        conn.execute("DELETE FROM unit_groups WHERE unit = ?", (rid,))
        conn.executemany(
            "INSERT INTO unit_groups(grp, unit) VALUES (?, ?)", [(g, rid) for g in groups]
        )
        conn.execute("INSERT INTO outbox(op, plane, key) VALUES ('add', ?, ?)", (r["plane"], rid))


def delete_rows(conn: sqlite3.Connection, rowids: Iterable[int]) -> list[sqlite3.Row]:
    """Delete Units (FTS + groups follow by trigger) and queue their vector removals."""
    gone = []
    for rid in rowids:
        r = conn.execute(
            "SELECT id, unit_id, plane, scope, doc_id, acl_owner FROM units WHERE id = ?", (rid,)
        ).fetchone()
        if r is None:
            continue
        conn.execute("DELETE FROM units WHERE id = ?", (rid,))
        conn.execute(
            "INSERT INTO outbox(op, plane, key) VALUES ('remove', ?, ?)", (r["plane"], rid)
        )
        gone.append(r)
        faults.point("units.delete.after_row")
    # A document with no Unit left no longer counts against its creator's quota.
    for scope, doc_id, owner in {(r["scope"], r["doc_id"], r["acl_owner"]) for r in gone}:
        left = conn.execute(
            "SELECT 1 FROM units WHERE scope = ? AND doc_id = ? AND acl_owner = ? LIMIT 1",
            (scope, doc_id, owner),
        ).fetchone()
        if left is None:
            conn.execute(
                "DELETE FROM docs WHERE scope = ? AND doc_id = ? AND acl_owner = ?",
                (scope, doc_id, owner),
            )
    return gone


def bump_generations(conn: sqlite3.Connection, scopes: Iterable[str]) -> None:
    """Invalidate cached results over each written scope and every ancestor of it."""
    targets = sorted({a for s in scopes for a in ancestors(s)})
    conn.executemany(
        "INSERT INTO scope_gens(scope, gen) VALUES (?, 1)"
        " ON CONFLICT(scope) DO UPDATE SET gen = gen + 1",
        [(t,) for t in targets],
    )


def read_generations(conn: sqlite3.Connection, scopes: Sequence[str]) -> dict[str, int]:
    if not scopes:
        return {}
    marks = ",".join("?" * len(scopes))
    got = {
        r[0]: r[1]
        for r in conn.execute(f"SELECT scope, gen FROM scope_gens WHERE scope IN ({marks})", scopes)
    }
    return {s: got.get(s, 0) for s in scopes}


def fetch_rows(conn: sqlite3.Connection, rowids: Sequence[int]) -> dict[int, sqlite3.Row]:
    out: dict[int, sqlite3.Row] = {}
    for i in range(0, len(rowids), 500):
        part = list(rowids[i : i + 500])
        marks = ",".join("?" * len(part))
        for r in conn.execute(f"SELECT {UNIT_COLUMNS} FROM units WHERE id IN ({marks})", part):
            out[r["id"]] = r
    return out


def embeddings_for(conn: sqlite3.Connection, rowids: Sequence[int]) -> dict[int, np.ndarray]:
    out: dict[int, np.ndarray] = {}
    for i in range(0, len(rowids), 500):
        part = list(rowids[i : i + 500])
        marks = ",".join("?" * len(part))
        for r in conn.execute(f"SELECT id, embedding FROM units WHERE id IN ({marks})", part):
            out[r[0]] = np.frombuffer(r[1], dtype=np.float16).astype(np.float32)
    return out


def unit_link(row: Any) -> str | None:
    """A URL a UI can open at the exact spot: the object with its ``#page=`` / ``#t=`` fragment."""
    key = row["object_key"]
    if not key:
        return None
    frag = row["source_uri"][len(key) :] if row["source_uri"].startswith(key) else ""
    return f"/v1/objects/{key}{frag}"
