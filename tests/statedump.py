"""``state_dump(service)``: the logical state of a data dir, to compare before and after a
rejected request (D-80: "compare logical state, not bytes").

Bytes change legitimately (WAL checkpoints, ``-shm``, index saves, the request meter), so the
dump is: every catalog table as sorted rows (minus the exclusions below, each justified), the
vector index id set per plane, the lexical index ids (the FTS5 index itself, read through
``fts5vocab``, and the derived sparse index when configured), and the object store listing with
content hashes (including its temp dir: an aborted upload must leave nothing there).
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import uuid
from pathlib import Path
from typing import Any

from conftest import embedded
from superchargedb.types import PLANES

# Tables left out of the dump, and why they are not logical state. (The catalog has no
# separate security-log table; keys are never logged and failed logins are rate-limit buckets
# in memory or Redis.)
EXCLUDED_TABLES = {
    # The request meter (the access log of D-80): every request, rejected or not,
    # is counted per principal and route by design, and it is flushed from memory on a timer.
    "usage_daily",
}
# FTS5's shadow tables hold b-tree segments whose bytes change on merges; the index is compared
# by the ids it holds (fts5vocab below), not by its pages.
FTS_SHADOW_SUFFIXES = ("_data", "_idx", "_docsize", "_config", "_content")


def _cell(v: Any) -> Any:
    # Embeddings and other blobs: a hash keeps the dump small and still exact.
    if isinstance(v, bytes | memoryview):
        return "sha256:" + hashlib.sha256(bytes(v)).hexdigest()
    return v


def _tables(conn: sqlite3.Connection) -> list[str]:
    rows = conn.execute(
        "SELECT name, type FROM sqlite_master WHERE type = 'table' ORDER BY name"
    ).fetchall()
    fts = {
        r[0]
        for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND sql LIKE 'CREATE VIRTUAL%'"
        )
    }
    out = []
    for name, _ in rows:
        if name in EXCLUDED_TABLES or name in fts:
            continue
        if any(name == f + s for f in fts for s in FTS_SHADOW_SUFFIXES):
            continue
        out.append(name)
    return out


def dump_tables(conn: sqlite3.Connection) -> dict[str, list[list[Any]]]:
    out: dict[str, list[list[Any]]] = {}
    for table in _tables(conn):
        # Every column: none is volatile on a rejected request (timestamps change only on writes).
        keep = [r[1] for r in conn.execute(f'PRAGMA table_info("{table}")')]
        sel = ", ".join(f'"{c}"' for c in keep)
        rows = [[_cell(v) for v in r] for r in conn.execute(f'SELECT {sel} FROM "{table}"')]
        rows.sort(key=lambda r: json.dumps(r, default=str))
        out[table] = [keep, *rows]
    return out


def fts_ids(conn: sqlite3.Connection, table: str = "units_fts") -> list[int]:
    """The rowids the FTS5 index itself holds (not its external content table)."""
    vocab = "v_" + uuid.uuid4().hex[:8]
    conn.execute(f"CREATE VIRTUAL TABLE temp.{vocab} USING fts5vocab(main, {table}, instance)")
    try:
        return [
            int(r[0]) for r in conn.execute(f"SELECT DISTINCT doc FROM temp.{vocab} ORDER BY 1")
        ]
    finally:
        conn.execute(f"DROP TABLE temp.{vocab}")


def object_listing(root: Path) -> dict[str, str]:
    out = {}
    for dirpath, _, files in os.walk(root):
        for f in files:
            p = Path(dirpath) / f
            out[str(p.relative_to(root))] = hashlib.sha256(p.read_bytes()).hexdigest()
    return dict(sorted(out.items()))


def pg_dump_tables(url: str) -> dict[str, list[list[Any]]]:
    """Every table of the PostgreSQL store's schema as sorted rows (the same exclusions): the
    database holds the vectors, postings and BM25 statistics too, so this is the whole state."""
    import psycopg

    out: dict[str, list[list[Any]]] = {}
    with psycopg.connect(url, autocommit=True) as conn:
        tables = [
            str(r[0])
            for r in conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY 1"
            )
        ]
        for table in tables:
            if table in EXCLUDED_TABLES:
                continue
            cur = conn.execute(f'SELECT * FROM "{table}"'.encode())
            keep = [d.name for d in cur.description or ()]
            rows = [[_cell(_pg_cell(v)) for v in r] for r in cur.fetchall()]
            rows.sort(key=lambda r: json.dumps(r, default=str))
            out[table] = [keep, *rows]
    return out


def _pg_cell(v: Any) -> Any:
    # pgvector's types and arrays: their text form is exact and comparable.
    return v if isinstance(v, str | int | float | bool | bytes | memoryview | None) else str(v)


def state_dump(svc: Any) -> dict[str, Any]:
    data = Path(svc.settings.data_dir)
    url = svc.settings.database_url
    if url:
        return {
            "tables": pg_dump_tables(url),
            "vectors": {},  # in the units table's embedding column, dumped above
            "lexical": {},  # postings, lex_terms and lex_stats, dumped above
            "objects": object_listing(data / "objects"),
        }
    conn = sqlite3.connect(data / "catalog.db")  # its own connection: sees committed state only
    try:
        tables = dump_tables(conn)
        lexical = {"fts5": fts_ids(conn)}
    finally:
        conn.close()
    sparse = getattr(embedded(svc).sync, "lexical", None)
    if sparse is not None:
        ids = sparse.keys()  # an array of catalog ids, not a dict view
        lexical["sparse"] = sorted(int(k) for k in ids)
    vectors = {p: sorted(int(k) for k in embedded(svc).sync.store.keys(p)) for p in PLANES}
    return {
        "tables": tables,
        "vectors": vectors,
        "lexical": lexical,
        "objects": object_listing(data / "objects"),
    }


def diff(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """Human-readable differences (empty when equal), for assertion messages."""
    out = []
    for part in ("vectors", "lexical", "objects"):
        if before[part] != after[part]:
            out.append(f"{part}: {before[part]} -> {after[part]}")
    for t in sorted(set(before["tables"]) | set(after["tables"])):
        b, a = before["tables"].get(t), after["tables"].get(t)
        if b != a:
            b_rows = {json.dumps(r, default=str) for r in (b or [])[1:]}
            a_rows = {json.dumps(r, default=str) for r in (a or [])[1:]}
            out.append(f"{t}: +{sorted(a_rows - b_rows)[:3]} -{sorted(b_rows - a_rows)[:3]}")
    return out
