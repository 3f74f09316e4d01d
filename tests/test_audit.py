"""The keyed audit chain under tampering and concurrency, on a real data dir."""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading

import pytest

from conftest import add_principal, embedded, make_service
from superchargedb.storage.sqlite import audit


@pytest.fixture
def chain(tmp_path, embedder):
    svc = make_service(tmp_path / "d", embedder)
    add_principal(svc, "w", perms=["read", "write"], scopes=["acme"])
    p = svc.authenticate("Bearer aegis_sk_test_w")
    for i in range(5):
        svc.ingest(p, {"units": [{"text": f"record number {i}", "doc_id": f"r{i}"}]})
    svc.close()  # writes the signed anchor outside the data dir
    db = tmp_path / "d" / "catalog.db"
    anchor = audit.anchor_path(tmp_path / "d")
    return db, anchor


def verify(db, anchor):
    conn = sqlite3.connect(db)
    conn.row_factory = sqlite3.Row
    try:
        return audit.verify(conn, bytes.fromhex("11" * 32), anchor)
    finally:
        conn.close()


def tamper(db, *sql):
    conn = sqlite3.connect(db)
    for s in sql:
        conn.execute(*s) if isinstance(s, tuple) else conn.execute(s)
    conn.commit()
    conn.close()


def test_untouched_chain_verifies(chain):
    out = verify(*chain)
    assert out["ok"] and out["records"] == 5


def test_changed_record_detected(chain):
    db, anchor = chain
    tamper(db, "UPDATE audit_log SET record = replace(record, 'ingest', 'ingesT') WHERE seq = 3")
    out = verify(db, anchor)
    assert not out["ok"] and out["first_bad_seq"] == 3


def test_deleted_record_detected(chain):
    db, anchor = chain
    tamper(db, "DELETE FROM audit_log WHERE seq = 2")
    out = verify(db, anchor)
    assert not out["ok"] and out["first_bad_seq"] == 3


def test_swapped_records_detected(chain):
    db, anchor = chain
    conn = sqlite3.connect(db)
    a = conn.execute("SELECT prev_hash, hash, record FROM audit_log WHERE seq = 2").fetchone()
    b = conn.execute("SELECT prev_hash, hash, record FROM audit_log WHERE seq = 3").fetchone()
    conn.execute(
        "UPDATE audit_log SET prev_hash = 'x', hash = ?, record = ? WHERE seq = 2", (b[1], b[2])
    )
    conn.execute(
        "UPDATE audit_log SET prev_hash = ?, hash = ?, record = ? WHERE seq = 3", (b[0], a[1], a[2])
    )
    conn.execute("UPDATE audit_log SET prev_hash = ? WHERE seq = 2", (a[0],))
    conn.commit()
    conn.close()
    out = verify(db, anchor)
    assert not out["ok"] and out["first_bad_seq"] == 2


def test_deleted_last_record_detected_even_with_head_fixed(chain):
    db, anchor = chain
    conn = sqlite3.connect(db)
    last = conn.execute("SELECT MAX(seq) FROM audit_log").fetchone()[0]
    prev = conn.execute("SELECT hash FROM audit_log WHERE seq = ?", (last - 1,)).fetchone()[0]
    conn.execute("DELETE FROM audit_log WHERE seq = ?", (last,))
    # The attacker also rewrites the in-file head; only the signed anchor outside remains.
    conn.execute("UPDATE kv SET value = ? WHERE key = 'audit_head'", (f"{last - 1}:{prev}",))
    conn.commit()
    conn.close()
    out = verify(db, anchor)
    assert not out["ok"] and out["first_bad_seq"] == last


def test_rewritten_chain_with_plain_hashes_detected(chain):
    """An attacker who can write the file recomputes every hash, but without the HMAC key."""
    db, anchor = chain
    conn = sqlite3.connect(db)
    rows = conn.execute("SELECT seq, record FROM audit_log ORDER BY seq").fetchall()
    prev = audit.GENESIS
    conn.execute("UPDATE audit_log SET prev_hash = 'tmp' || seq")
    for seq, record in rows:
        record = record.replace("record number", "RECORD NUMBER")
        h = hashlib.sha256(prev.encode() + record.encode()).hexdigest()
        conn.execute(
            "UPDATE audit_log SET prev_hash = ?, hash = ?, record = ? WHERE seq = ?",
            (prev, h, record, seq),
        )
        prev = h
    conn.execute("UPDATE kv SET value = ? WHERE key = 'audit_head'", (f"{rows[-1][0]}:{prev}",))
    conn.commit()
    conn.close()
    out = verify(db, None)
    assert not out["ok"] and out["first_bad_seq"] == 1


def test_fork_is_impossible(chain):
    db, _ = chain
    conn = sqlite3.connect(db)
    prev = conn.execute("SELECT prev_hash FROM audit_log WHERE seq = 2").fetchone()[0]
    with pytest.raises(sqlite3.IntegrityError):
        conn.execute(
            "INSERT INTO audit_log(seq, prev_hash, hash, at, actor, action, record)"
            " VALUES (99, ?, 'h', 0, 'x', 'fork', '{}')",
            (prev,),
        )
    conn.close()


def test_concurrent_writers_leave_one_linear_chain(tmp_path, embedder):
    svc = make_service(tmp_path / "c", embedder)
    add_principal(svc, "w", perms=["read", "write"], scopes=["acme"])
    p = svc.authenticate("Bearer aegis_sk_test_w")
    errors = []

    def writer(n):
        try:
            for i in range(5):
                svc.ingest(p, {"units": [{"text": f"writer {n} item {i}", "doc_id": f"{n}-{i}"}]})
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    rows = (
        embedded(svc).catalog.reader().execute("SELECT seq FROM audit_log ORDER BY seq").fetchall()
    )
    assert [r[0] for r in rows] == list(range(1, 21))
    assert audit.verify(embedded(svc).catalog.reader(), svc.audit_key)["ok"]
    svc.close()


def test_deleted_last_record_detected_by_head_without_anchor(chain):
    db, _ = chain
    tamper(db, "DELETE FROM audit_log WHERE seq = (SELECT MAX(seq) FROM audit_log)")
    out = verify(db, None)
    assert not out["ok"] and "shorter" in out["reason"]


def test_records_written_before_key_ids_still_verify_and_count(tmp_path, embedder):
    # A record in the earlier format (no actor_key_id / actor_tenants), written the way the
    # earlier append did, then records in the current format after it: one chain that
    # verifies, and the old record counts for its actor's tenant by the actor's scopes.
    svc = make_service(tmp_path / "l", embedder)
    add_principal(svc, "w", perms=["read", "write"], scopes=["acme"])
    add_principal(svc, "g", perms=["read", "write"], scopes=["globex"])
    key = svc.audit_key
    with embedded(svc).catalog.write() as conn:
        old = {"seq": 1, "at": 1, "actor": "w", "action": "ingest", "removed": []}
        h = audit.chain_hash(key, audit.GENESIS, old)
        conn.execute(
            "INSERT INTO audit_log(seq, prev_hash, hash, at, actor, action, record)"
            " VALUES (1, ?, ?, 1, 'w', 'ingest', ?)",
            (audit.GENESIS, h, audit.canonical_json(old).decode()),
        )
    for who in ("w", "g"):
        p = svc.authenticate(f"Bearer aegis_sk_test_{who}")
        svc.ingest(p, {"units": [{"text": f"new format by {who}", "doc_id": who}]})
    conn = embedded(svc).catalog.reader()
    assert audit.verify(conn, key)["ok"] and audit.verify(conn, key)["records"] == 3
    new = [json.loads(r[0]) for r in conn.execute("SELECT record FROM audit_log WHERE seq > 1")]
    assert all(r["actor_key_id"].startswith("k_") for r in new)
    assert audit.verify_for_tenants(conn, key, None, {"acme"}) == {"ok": True, "records": 2}
    assert audit.verify_for_tenants(conn, key, None, {"globex"}) == {"ok": True, "records": 1}
    svc.close()
