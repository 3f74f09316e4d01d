"""Online backup during concurrent ingest, restore into a new dir, and reindex on model change."""

from __future__ import annotations

import threading

import pytest

from conftest import add_principal, embedded, make_service
from corpus import DISTRACTORS
from superchargedb.auth.admin import OPERATOR
from superchargedb.errors import UnavailableError
from superchargedb.models.embedder import make_embedder
from superchargedb.storage.sqlite.backup import backup, restore_files
from superchargedb.storage.sqlite.catalog import Catalog
from superchargedb.storage.sqlite.reindex import reindex

QUERIES = [
    "deployment pipeline tests",
    "database backups retention",
    "rate limits per tenant",
    "security phishing simulation",
    "espresso machine",
]


def ids_of(svc):
    return {r[0] for r in embedded(svc).catalog.reader().execute("SELECT unit_id FROM units")}


def run_queries(svc, p):
    out = []
    for q in QUERIES:
        res = svc.search(p, {"q": q, "top_k": 10}, query_scope="acme/static")
        out.append([h["unit_id"] for h in res["hits"]])
    return out


def test_backup_during_ingest_then_restore(tmp_path, embedder):
    svc = make_service(tmp_path / "orig", embedder)
    add_principal(svc, "w", perms=["read", "write"], scopes=["acme"])
    p = svc.authenticate("Bearer aegis_sk_test_w")
    svc.ingest(
        p,
        {
            "units": [
                {"text": t, "doc_id": f"s{i}", "scope": "acme/static"}
                for i, t in enumerate(DISTRACTORS)
            ]
        },
    )
    stop = threading.Event()
    written = []

    def writer():
        i = 0
        while not stop.is_set() and i < 200:
            r = svc.ingest(
                p, {"units": [{"text": f"live write {i}", "doc_id": f"l{i}", "scope": "acme/live"}]}
            )
            written.append(r["results"][0]["unit_id"])
            i += 1

    t = threading.Thread(target=writer)
    t.start()
    try:
        while len(written) < 3:
            threading.Event().wait(0.05)
        manifest = backup(tmp_path / "orig", tmp_path / "bk")
    finally:
        stop.set()
        t.join()
    assert manifest["units"] >= len(DISTRACTORS)
    before = run_queries(svc, p)
    orig_ids = ids_of(svc)
    svc.close()

    restore_files(tmp_path / "bk", tmp_path / "restored")
    rs = make_service(tmp_path / "restored", embedder)
    try:
        restored_ids = ids_of(rs)
        assert len(restored_ids) == manifest["units"]
        assert restored_ids <= orig_ids  # a consistent snapshot: nothing invented
        p2 = rs.authenticate("Bearer aegis_sk_test_w")
        assert run_queries(rs, p2) == before
        assert rs.audit_verify(OPERATOR)["ok"]
        assert rs.doctor()["ok"]
    finally:
        rs.close()


def test_restore_refuses_non_empty_target(tmp_path, embedder):
    svc = make_service(tmp_path / "o", embedder)
    svc.close()
    backup(tmp_path / "o", tmp_path / "b")
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "x").write_text("keep me")
    from superchargedb.errors import ConflictError

    with pytest.raises(ConflictError):
        restore_files(tmp_path / "b", tmp_path / "t")
    assert (tmp_path / "t" / "x").read_text() == "keep me"


def test_model_change_detected_and_reindexed(tmp_path, embedder):
    svc = make_service(tmp_path / "d", embedder)
    add_principal(svc, "w", perms=["read", "write"], scopes=["acme"])
    p = svc.authenticate("Bearer aegis_sk_test_w")
    res = svc.ingest(
        p, {"units": [{"text": t, "doc_id": f"d{i}"} for i, t in enumerate(DISTRACTORS[:10])]}
    )
    ids = [r["unit_id"] for r in res["results"]]
    svc.close()
    other = make_embedder("minilm-int8", max_tokens=128)  # a different model id (window)
    assert other.model_id != embedder.model_id
    with pytest.raises(UnavailableError, match="reindex"):
        make_service(tmp_path / "d", other)
    catalog = Catalog(tmp_path / "d" / "catalog.db")
    assert reindex(catalog, tmp_path / "d" / "index", other) == 10
    catalog.close()
    svc2 = make_service(tmp_path / "d", other)
    try:
        assert svc2.doctor()["ok"]
        p = svc2.authenticate("Bearer aegis_sk_test_w")
        hit = svc2.search(p, {"q": DISTRACTORS[3], "mode": "dense", "top_k": 1})["hits"][0]
        assert hit["unit_id"] == ids[3]
        models = {
            r[0] for r in embedded(svc2).catalog.reader().execute("SELECT model_id FROM units")
        }
        assert models == {other.model_id}
    finally:
        svc2.close()
