"""Documents and Units listing with cursors, ACL change, replace, usage, metrics, JSON logs."""

from __future__ import annotations

import io
import json
import logging

from conftest import ALICE, BOB, CAROL


def seed(client, n=7):
    units = [
        {
            "text": f"Document {i} body about caching and queues.",
            "doc_id": f"doc{i:02d}",
            "acl_groups": ["eng-backend"],
        }
        for i in range(n)
    ]
    units.append(
        {"text": "A second unit of doc00.", "doc_id": "doc00", "acl_groups": ["eng-backend"]}
    )
    r = client.post("/v1/ingest", headers=ALICE, json={"units": units})
    assert r.status_code == 200
    return r.json()["results"]


def test_list_docs_paginates_with_cursor(client):
    seed(client)
    seen, cursor = [], None
    while True:
        params = {"limit": 3, **({"cursor": cursor} if cursor else {})}
        r = client.get("/v1/docs", headers=ALICE, params=params)
        assert r.status_code == 200, r.text
        body = r.json()
        seen += [d["doc_id"] for d in body["docs"]]
        cursor = body["next_cursor"]
        if cursor is None:
            break
    assert seen == [f"doc{i:02d}" for i in range(7)]
    first = client.get("/v1/docs", headers=ALICE).json()["docs"][0]
    assert first["units"] == 2 and first["planes"] == ["text"]
    assert client.get("/v1/docs", headers=ALICE, params={"cursor": "!!"}).status_code == 422
    assert client.get("/v1/docs", headers=ALICE, params={"limit": 0}).status_code == 422
    # carol sees none of them, and a plane filter narrows.
    assert client.get("/v1/docs", headers=CAROL).json()["docs"] == []
    assert client.get("/v1/docs", headers=ALICE, params={"plane": "audio"}).json()["docs"] == []


def test_list_units_of_a_doc(client):
    seed(client)
    r = client.get("/v1/units", headers=ALICE, params={"doc_id": "doc00", "limit": 1})
    body = r.json()
    assert len(body["units"]) == 1 and body["next_cursor"]
    r2 = client.get(
        "/v1/units",
        headers=ALICE,
        params={"doc_id": "doc00", "limit": 1, "cursor": body["next_cursor"]},
    )
    assert len(r2.json()["units"]) == 1 and r2.json()["next_cursor"] is None
    assert r2.json()["units"][0]["unit_id"] != body["units"][0]["unit_id"]
    assert client.get("/v1/units", headers=CAROL, params={"doc_id": "doc00"}).json()["units"] == []


def test_patch_doc_acl_takes_effect_at_once(client):
    res = seed(client)
    uid = res[1]["unit_id"]  # doc01
    q = {"q": "Document 1 body about caching"}
    before = client.post("/v1/search", headers=BOB, json=q).json()
    assert uid in [h["unit_id"] for h in before["hits"]]
    assert client.post("/v1/search", headers=BOB, json=q).json()["trace"]["cache"] == "hit"
    # bob cannot re-permission alice's document.
    r = client.patch("/v1/docs/doc01", headers=BOB, json={"acl_groups": []})
    assert r.status_code == 403
    # Nor alice add a group she is not in (acl.may_add_groups); removing eng-backend she may.
    r = client.patch("/v1/docs/doc01", headers=ALICE, json={"acl_groups": ["finance"]})
    assert r.status_code == 403 and r.json()["error"]["code"] == "forbidden_group"
    r = client.patch("/v1/docs/doc01", headers=ALICE, json={"acl_groups": []})
    assert r.status_code == 200 and r.json()["updated"] == 1
    after = client.post("/v1/search", headers=BOB, json=q).json()
    assert after["trace"]["cache"] == "miss"
    assert uid not in [h["unit_id"] for h in after["hits"]]
    assert client.get(f"/v1/units/{uid}", headers=BOB).status_code == 404
    assert client.get(f"/v1/units/{uid}", headers=ALICE).json()["acl_groups"] == []
    assert client.patch("/v1/docs/nope", headers=ALICE, json={"acl_groups": []}).status_code == 404
    assert client.patch("/v1/docs/doc01", headers=ALICE, json={"groups": []}).status_code == 422


def test_put_doc_replaces_atomically(client):
    res = seed(client)
    old = [r["unit_id"] for r in (res[0], res[-1])]  # doc00's two units
    r = client.put(
        "/v1/docs/doc00",
        headers=ALICE,
        json={"units": [{"text": "The rewritten doc00.", "acl_groups": ["eng-backend"]}]},
    )
    assert r.status_code == 200, r.text
    units = client.get("/v1/units", headers=ALICE, params={"doc_id": "doc00"}).json()["units"]
    assert [u["text"] for u in units] == ["The rewritten doc00."]
    assert all(client.get(f"/v1/units/{u}", headers=ALICE).status_code == 404 for u in old)
    r = client.put("/v1/docs/doc00", headers=ALICE, json={"units": [{"text": "x", "doc_id": "y"}]})
    assert r.status_code == 422


def test_usage(client):
    seed(client, 3)
    client.post("/v1/search", headers=ALICE, json={"q": "caching"})
    u = client.get("/v1/usage", headers=ALICE).json()
    assert u["principal"] == "alice"
    assert u["documents"]["used"] == 3
    assert u["units"]["per_plane"]["text"] == 4 and u["units"]["total"] == 4
    assert u["requests"]["POST /v1/search"] == 1
    assert u["requests"]["POST /v1/ingest"] == 1
    c = client.get("/v1/usage", headers=CAROL).json()
    assert c["documents"] == {"used": 0, "quota": 50}
    assert client.get("/v1/usage", headers=ALICE, params={"from": "nope"}).status_code == 422


def test_metrics_and_health(client, svc, monkeypatch):
    monkeypatch.setattr(svc.settings, "metrics_token", "tok")  # /metrics needs the token
    seed(client, 2)
    client.post("/v1/search", headers=ALICE, json={"q": "queues"})
    assert client.get("/healthz").json() == {"status": "ok"}
    assert client.get("/readyz").status_code == 200
    text = client.get("/metrics", headers={"Authorization": "Bearer tok"}).text
    assert 'scdb_requests_total{route="/v1/search",status="200"} 1' in text
    assert 'scdb_stage_ms_count{stage="vectorize"} 1' in text
    assert 'scdb_index_vectors{plane="text"} 3' in text
    assert "scdb_outbox_lag 0" in text
    assert "aegis_sk" not in text


def test_json_logs_have_request_ids_and_no_keys(client):
    from superchargedb.logs import JsonFormatter

    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    logger = logging.getLogger("superchargedb.access")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        r = client.post("/v1/search", headers=ALICE, json={"q": "hello"})
    finally:
        logger.removeHandler(handler)
    lines = [json.loads(x) for x in stream.getvalue().splitlines()]
    assert lines and lines[-1]["request_id"] == r.headers["X-Request-Id"]
    assert lines[-1]["route"] == "/v1/search" and lines[-1]["principal"] == "alice"
    assert "aegis_sk_alice" not in stream.getvalue()
