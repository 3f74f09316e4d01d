"""The keyed audit chain under tampering, on a real data dir (the embedded catalog's file edited
by hand); the chain the service writes, on either backend, is test_audit_writers.py's."""

from __future__ import annotations

import hashlib
import sqlite3

import pytest

from conftest import add_principal, make_service
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


def test_deleted_last_record_detected_by_head_without_anchor(chain):
    db, _ = chain
    tamper(db, "DELETE FROM audit_log WHERE seq = (SELECT MAX(seq) FROM audit_log)")
    out = verify(db, None)
    assert not out["ok"] and "shorter" in out["reason"]
