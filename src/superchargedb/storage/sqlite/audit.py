"""The keyed, hash-chained audit log (D-46).

``hash = HMAC-SHA256(key, prev_hash || canonical_json(record))``; records are appended inside the
transaction of the change they describe, ``UNIQUE(prev_hash)`` prevents forks, and the key lives
outside the data dir so whoever can write the catalog file cannot re-forge the chain.

Every record names the key that authenticated the change (``actor_key_id``; null for the operator,
who has none), who issued that key when it was not its own principal (``actor_key_issuer``), and
the tenants (scope roots) of the actor (``actor_tenants``), so a tenant admin can be told its own
tenant's record count only. Records written before these fields existed verify unchanged.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import sqlite3
import time
from collections.abc import Collection
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ... import faults
from ..audit_anchor import anchor_mac, store_anchor
from ..ids import merkle_root as merkle_root  # re-exported (storage/ids.py)

if TYPE_CHECKING:
    from ...types import Principal

GENESIS = "0" * 64


def canonical_json(record: Any) -> bytes:
    """RFC 8785-style canonical form for records that hold no floats."""
    return json.dumps(record, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def load_key(path: Path | None) -> bytes:
    """The chain key: ``SCDB_AUDIT_KEY`` (hex), else a key file created once with mode 0600."""
    env = os.environ.get("SCDB_AUDIT_KEY")
    if env:
        return bytes.fromhex(env)
    if path is None:
        base = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
        path = base / "superchargedb" / "audit.key"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_hex(32))
    return bytes.fromhex(path.read_text().strip())


def chain_hash(key: bytes, prev_hash: str, record: Any) -> str:
    return hmac.new(key, prev_hash.encode() + canonical_json(record), hashlib.sha256).hexdigest()


def tenant_of(scope: str) -> str:
    """A tenant is a scope root: ``acme/alpha/backend`` -> ``acme``."""
    return scope.split("/", 1)[0]


def who(actor: Principal | str) -> dict[str, Any]:
    """The fields naming who made a change: the actor, its key, that key's issuer, its tenants.

    A bare name (offline operator tooling) has no key and no tenant.
    """
    if isinstance(actor, str):
        return {"actor": actor, "actor_key_id": None, "actor_tenants": []}
    out: dict[str, Any] = {
        "actor": actor.name,
        "actor_key_id": actor.key_id,
        "actor_tenants": sorted({tenant_of(s) for s in actor.scopes}),
    }
    if actor.key_issuer is not None and actor.key_issuer != actor.name:
        out["actor_key_issuer"] = actor.key_issuer
    return out


def append(
    conn: sqlite3.Connection,
    key: bytes,
    actor: Principal | str,
    action: str,
    record: dict[str, Any],
) -> str:
    """Append one record in the caller's open write transaction; returns its hash.

    Pass the authenticated Principal as ``actor`` (a name only from operator tooling): the
    record then carries the key id and issuer.
    """
    faults.point("audit.before_append")
    row = conn.execute("SELECT seq, hash FROM audit_log ORDER BY seq DESC LIMIT 1").fetchone()
    seq, prev = (row[0] + 1, row[1]) if row else (1, GENESIS)
    at = int(time.time() * 1000)
    # The record's own fields come first: none of them can overwrite who made the change.
    full = {**record, "seq": seq, "at": at, **who(actor), "action": action}
    h = chain_hash(key, prev, full)
    conn.execute(
        "INSERT INTO audit_log(seq, prev_hash, hash, at, actor, action, record)"
        " VALUES (?,?,?,?,?,?,?)",
        (seq, prev, h, at, full["actor"], action, canonical_json(full).decode()),
    )
    faults.point("audit.after_record")
    conn.execute(
        "INSERT INTO kv(key, value) VALUES ('audit_head', ?)"
        " ON CONFLICT(key) DO UPDATE SET value = excluded.value",
        (f"{seq}:{h}",),
    )
    faults.point("audit.after_head")
    return h


def verify(conn: sqlite3.Connection, key: bytes, anchor: Path | None = None) -> dict[str, Any]:
    """Recompute the chain; name the first record that was altered, removed or reordered.

    With ``anchor`` (the signed head kept outside the data dir) truncating the chain and fixing
    the in-file head is detected too.
    """
    result = _verify_chain(conn, key)
    if result["ok"] and anchor is not None:
        bad = check_anchor(conn, key, anchor)
        if bad is not None:
            return {**bad, "records": result["records"]}
    return result


def verify_for_tenants(
    conn: sqlite3.Connection, key: bytes, anchor: Path | None, tenants: set[str]
) -> dict[str, Any]:
    """What a tenant admin is told: whether the whole chain verifies, and how many records its
    tenants' principals made. No global count, no head, no position of a bad record."""
    ok = bool(verify(conn, key, anchor)["ok"])
    return {"ok": ok, "records": tenant_record_count(conn, tenants)}


def tenant_record_count(conn: sqlite3.Connection, tenants: Collection[str]) -> int:
    """How many records principals of ``tenants`` made (``verify_for_tenants``'s count)."""
    # Records from before ``actor_tenants`` existed are attributed by their actor's scopes now.
    legacy = {
        str(r[0]): {tenant_of(s) for s in json.loads(r[1])}
        for r in conn.execute("SELECT name, scopes FROM principals")
    }
    n = 0
    for (raw,) in conn.execute("SELECT record FROM audit_log"):
        try:
            rec = json.loads(raw)
        except ValueError:
            continue  # verify() has already said the chain is broken
        if not isinstance(rec, dict):
            continue
        if "actor_tenants" in rec:
            theirs = set(rec["actor_tenants"] or ())
        else:
            theirs = legacy.get(str(rec.get("actor")), set())
        n += not theirs.isdisjoint(tenants)
    return n


def _verify_chain(conn: sqlite3.Connection, key: bytes) -> dict[str, Any]:
    prev = GENESIS
    expected_seq = 1
    n = 0
    for row in conn.execute("SELECT seq, prev_hash, hash, record FROM audit_log ORDER BY seq"):
        n += 1
        seq = row["seq"]
        problem = None
        if seq != expected_seq:
            problem = f"missing record(s) before seq {seq}"
        elif row["prev_hash"] != prev:
            problem = "prev_hash does not link to the previous record"
        else:
            try:
                record = json.loads(row["record"])
            except ValueError:
                record = None
            if record is None or record.get("seq") != seq:
                problem = "record body altered"
            elif not hmac.compare_digest(chain_hash(key, prev, record), row["hash"]):
                problem = "hash mismatch (record altered or chain re-forged)"
        if problem:
            return {"ok": False, "records": n, "first_bad_seq": seq, "reason": problem}
        prev = row["hash"]
        expected_seq = seq + 1
    head = conn.execute("SELECT value FROM kv WHERE key = 'audit_head'").fetchone()
    if head is not None:
        head_seq, _, head_hash = str(head[0]).partition(":")
        if int(head_seq) != expected_seq - 1 or head_hash != prev:
            return {
                "ok": False,
                "records": n,
                "first_bad_seq": min(int(head_seq), expected_seq),
                "reason": "chain is shorter than its anchored head (records removed at the end)",
            }
    return {"ok": True, "records": n, "head": prev}


def anchor_path(data_dir: Path, override: Path | None = None) -> Path:
    """Where the signed head checkpoint of this data dir lives: outside the data dir."""
    if override is not None:
        return override
    base = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
    tag = hashlib.sha256(str(data_dir.resolve()).encode()).hexdigest()[:16]
    return base / "superchargedb" / "anchors" / f"{tag}.json"


def write_anchor(conn: sqlite3.Connection, key: bytes, path: Path) -> dict[str, Any] | None:
    """Sign the current head and store it outside the data dir (atomically)."""
    row = conn.execute("SELECT seq, hash FROM audit_log ORDER BY seq DESC LIMIT 1").fetchone()
    if row is None:
        return None
    # One fixed tmp name: one process owns the data dir, and a crash leaves at most one behind.
    return store_anchor(key, int(row[0]), str(row[1]), path, path.with_suffix(".tmp"))


def check_anchor(conn: sqlite3.Connection, key: bytes, path: Path) -> dict[str, Any] | None:
    """None when the chain still holds the anchored head; else a failure report."""
    if not path.exists():
        return None
    try:
        a = json.loads(path.read_text())
        seq, h, mac = int(a["seq"]), str(a["hash"]), str(a["mac"])
    except (ValueError, KeyError, TypeError):
        return {"ok": False, "first_bad_seq": None, "reason": "anchor file unreadable"}
    want = anchor_mac(key, seq, h)
    if not hmac.compare_digest(want, mac):
        return {"ok": False, "first_bad_seq": None, "reason": "anchor signature invalid"}
    row = conn.execute("SELECT hash FROM audit_log WHERE seq = ?", (seq,)).fetchone()
    if row is None:
        return {
            "ok": False,
            "first_bad_seq": seq,
            "reason": "chain is shorter than its signed anchor (records removed)",
        }
    if row[0] != h:
        return {"ok": False, "first_bad_seq": seq, "reason": "anchored record was rewritten"}
    return None
