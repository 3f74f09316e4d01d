"""The keyed, hash-chained audit log on PostgreSQL, in the embedded backend's format (D-203).

Record, hash and head are those of ``storage/sqlite/audit.py`` (D-46), computed by its functions:
``hash = HMAC-SHA256(key, prev_hash || canonical_json(record))`` over the record with its
``seq``, ``at``, the actor's fields and the action; ``kv['audit_head'] = "seq:hash"``. A chain
exported from either backend verifies with the other's code.

Two writers (two processes, or two threads of one) must never chain after the same head. Each
append takes a transaction-scoped advisory lock before it reads the head, so appends are
serialized until the appending transaction commits or rolls back; ``UNIQUE(prev_hash)`` and the
``seq`` primary key refuse a fork even from a writer that skipped the lock.
"""

from __future__ import annotations

import hmac
import json
import time
from collections.abc import Mapping
from typing import Any

import psycopg

from ...types import Principal
from ..protocols import AuditReport
from ..sqlite.audit import GENESIS, canonical_json, chain_hash, who

AUDIT_LOCK = 0x5CDB_0003


def append(
    cur: psycopg.Cursor[Any],
    key: bytes,
    actor: Principal | str,
    action: str,
    record: Mapping[str, object],
) -> str:
    """Append one record in the caller's open write transaction; returns its hash."""
    cur.execute("SELECT pg_advisory_xact_lock(%s)", (AUDIT_LOCK,))
    row = cur.execute("SELECT seq, hash FROM audit_log ORDER BY seq DESC LIMIT 1").fetchone()
    seq, prev = (int(row[0]) + 1, str(row[1])) if row else (1, GENESIS)
    at = int(time.time() * 1000)
    # The record's own fields come first: none of them can overwrite who made the change.
    full = {**record, "seq": seq, "at": at, **who(actor), "action": action}
    h = chain_hash(key, prev, full)
    cur.execute(
        "INSERT INTO audit_log(seq, prev_hash, hash, at, actor, action, record)"
        " VALUES (%s, %s, %s, %s, %s, %s, %s)",
        (seq, prev, h, at, full["actor"], action, canonical_json(full).decode()),
    )
    cur.execute(
        "INSERT INTO kv(key, value) VALUES ('audit_head', %s)"
        " ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        (f"{seq}:{h}",),
    )
    return h


def verify(conn: psycopg.Connection[Any], key: bytes) -> AuditReport:
    """Recompute the chain in one snapshot; name the first record that was altered, removed or
    reordered, or the end when the chain is shorter than its recorded head."""
    prev, expected, n = GENESIS, 1, 0
    with conn.transaction():
        conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        cur = conn.execute("SELECT seq, prev_hash, hash, record FROM audit_log ORDER BY seq")
        for seq, prev_hash, h, raw in cur:
            n += 1
            try:
                record = json.loads(raw)
            except ValueError:
                record = None
            if (
                seq != expected
                or prev_hash != prev
                or not isinstance(record, dict)
                or record.get("seq") != seq
                or not hmac.compare_digest(chain_hash(key, prev, record), h)
            ):
                return AuditReport(False, n, int(seq))
            prev, expected = h, seq + 1
        head = conn.execute("SELECT value FROM kv WHERE key = 'audit_head'").fetchone()
    if head is not None:
        head_seq, _, head_hash = str(head[0]).partition(":")
        if int(head_seq) != expected - 1 or head_hash != prev:
            return AuditReport(False, n, min(int(head_seq), expected))
    return AuditReport(True, n)
