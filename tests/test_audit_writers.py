"""The keyed audit chain as the service writes it, on either backend: concurrent writers leave
one linear chain, and records in the earlier format still verify and count. (The tampering
cases, which edit the embedded catalog's file by hand, are test_audit.py's.)"""

from __future__ import annotations

import json
import threading

from conftest import add_principal, make_service, store_execute, stored_rows
from superchargedb.storage.sqlite import audit


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
    rows = stored_rows(svc, "SELECT seq FROM audit_log ORDER BY seq")
    assert [r[0] for r in rows] == list(range(1, 21))
    report = svc.audit_trail.verify_chain()
    assert report.ok and report.records == 20, report
    svc.close()


def test_records_written_before_key_ids_still_verify_and_count(tmp_path, embedder):
    # A record in the earlier format (no actor_key_id / actor_tenants), written the way the
    # earlier append did, then records in the current format after it: one chain that
    # verifies, and the old record counts for its actor's tenant by the actor's scopes.
    svc = make_service(tmp_path / "l", embedder)
    add_principal(svc, "w", perms=["read", "write"], scopes=["acme"])
    add_principal(svc, "g", perms=["read", "write"], scopes=["globex"])
    key = svc.audit_key
    old = {"seq": 1, "at": 1, "actor": "w", "action": "ingest", "removed": []}
    h = audit.chain_hash(key, audit.GENESIS, old)
    store_execute(
        svc,
        "INSERT INTO audit_log(seq, prev_hash, hash, at, actor, action, record)"
        " VALUES (1, ?, ?, 1, 'w', 'ingest', ?)",
        (audit.GENESIS, h, audit.canonical_json(old).decode()),
    )
    for who in ("w", "g"):
        p = svc.authenticate(f"Bearer aegis_sk_test_{who}")
        svc.ingest(p, {"units": [{"text": f"new format by {who}", "doc_id": who}]})
    report = svc.audit_trail.verify_chain()
    assert report.ok and report.records == 3, report
    new = [json.loads(r[0]) for r in stored_rows(svc, "SELECT record FROM audit_log WHERE seq > 1")]
    assert len(new) == 2 and all(r["actor_key_id"].startswith("k_") for r in new)
    assert svc.audit_trail.tenant_records({"acme"}) == 2
    assert svc.audit_trail.tenant_records({"globex"}) == 1
    svc.close()
