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
import os
import time
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

import psycopg

from ...types import Principal
from ..audit_anchor import anchor_mac, store_anchor
from ..protocols import AuditReport
from ..protocols_reads import ChainReport
from ..sqlite.audit import GENESIS, canonical_json, chain_hash, tenant_of, who

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
    got = verify_chain(conn, key)
    return AuditReport(got.ok, got.records, got.first_bad_seq)


def verify_chain(
    conn: psycopg.Connection[Any], key: bytes, anchor: Path | None = None
) -> ChainReport:
    """:func:`verify` with the reason and the head, and with ``anchor`` (the signed head kept
    outside the database, ``storage/sqlite/audit.py``'s file format) checked too, so truncating
    the chain and fixing ``audit_head`` is caught."""
    prev, expected, n = GENESIS, 1, 0
    with conn.transaction():
        conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
        cur = conn.execute("SELECT seq, prev_hash, hash, record FROM audit_log ORDER BY seq")
        for seq, prev_hash, h, raw in cur:
            n += 1
            problem = None
            if seq != expected:
                problem = f"missing record(s) before seq {seq}"
            elif prev_hash != prev:
                problem = "prev_hash does not link to the previous record"
            else:
                try:
                    record = json.loads(raw)
                except ValueError:
                    record = None
                if not isinstance(record, dict) or record.get("seq") != seq:
                    problem = "record body altered"
                elif not hmac.compare_digest(chain_hash(key, prev, record), h):
                    problem = "hash mismatch (record altered or chain re-forged)"
            if problem:
                return ChainReport(False, n, first_bad_seq=int(seq), reason=problem)
            prev, expected = h, seq + 1
        head = conn.execute("SELECT value FROM kv WHERE key = 'audit_head'").fetchone()
        if head is not None:
            head_seq, _, head_hash = str(head[0]).partition(":")
            if int(head_seq) != expected - 1 or head_hash != prev:
                return ChainReport(
                    False,
                    n,
                    first_bad_seq=min(int(head_seq), expected),
                    reason="chain is shorter than its anchored head (records removed at the end)",
                )
        if anchor is not None:
            bad = _check_anchor(conn, key, anchor)
            if bad is not None:
                return ChainReport(False, n, first_bad_seq=bad[0], reason=bad[1])
    return ChainReport(True, n, head=prev)  # GENESIS for an empty chain, as the embedded one


def write_anchor(conn: psycopg.Connection[Any], key: bytes, path: Path) -> dict[str, Any] | None:
    """Sign the chain's current head and store it at ``path`` (D-248); None when empty."""
    row = conn.execute("SELECT seq, hash FROM audit_log ORDER BY seq DESC LIMIT 1").fetchone()
    if row is None:
        return None
    tmp = path.with_suffix(f".{os.getpid()}.tmp")  # processes sharing the anchor write apart
    return store_anchor(key, int(row[0]), str(row[1]), path, tmp)


def _check_anchor(
    conn: psycopg.Connection[Any], key: bytes, path: Path
) -> tuple[int | None, str] | None:
    """None when the chain still holds the anchored head; else (the bad seq, why)."""
    if not path.exists():
        return None
    try:
        a = json.loads(path.read_text())
        seq, h, mac = int(a["seq"]), str(a["hash"]), str(a["mac"])
    except (ValueError, KeyError, TypeError):
        return None, "anchor file unreadable"
    want = anchor_mac(key, seq, h)
    if not hmac.compare_digest(want, mac):
        return None, "anchor signature invalid"
    row = conn.execute("SELECT hash FROM audit_log WHERE seq = %s", (seq,)).fetchone()
    if row is None:
        return seq, "chain is shorter than its signed anchor (records removed)"
    if row[0] != h:
        return seq, "anchored record was rewritten"
    return None


def tenant_records(conn: psycopg.Connection[Any], tenants: Collection[str]) -> int:
    """How many records principals of ``tenants`` made: the record's ``actor_tenants``, or for
    a record from before them its actor's scopes now (``storage/sqlite/audit.py``'s rule)."""
    wanted = set(tenants)
    if not wanted:
        return 0
    legacy = {
        str(name): {tenant_of(s) for s in scopes}
        for name, scopes in conn.execute("SELECT name, scopes FROM principals")
    }
    n = 0
    for (raw,) in conn.execute("SELECT record FROM audit_log"):
        try:
            rec = json.loads(raw)
        except ValueError:
            continue  # verify() says the chain is broken
        if not isinstance(rec, dict):
            continue
        if "actor_tenants" in rec:
            theirs = set(rec["actor_tenants"] or ())
        else:
            theirs = legacy.get(str(rec.get("actor")), set())
        n += not theirs.isdisjoint(wanted)
    return n
