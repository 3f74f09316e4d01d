"""POST /v1/ingest through the HTTP API, with the real model and a real temporary data dir."""

from __future__ import annotations

import select
import socket
import threading

from conftest import ALICE, BOB, CAROL, add_principal, auth, stored_value

SPEC_UNIT = {
    "text": "Q4 backend renewals are expected to close in the first half of the quarter.",
    "scope": "acme/alpha/backend",
    "doc_id": "doc-forecast",
    "acl_groups": ["eng-backend"],
}


def ingest(client, headers, units, **kw):
    return client.post("/v1/ingest", headers=headers, json={"units": units, **kw})


def test_spec_ingest_curl_alice_200_bob_403(client):
    r = ingest(client, ALICE, [SPEC_UNIT])
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["ingested"] == 1
    assert body["results"][0]["ok"] is True
    uid = body["results"][0]["unit_id"]
    assert len(uid) == 36 and uid[14] == "7"  # UUIDv7
    r = ingest(client, BOB, [SPEC_UNIT])
    assert r.status_code == 403
    assert r.json()["error"]["code"] == "forbidden"
    got = client.get(f"/v1/units/{uid}", headers=ALICE).json()
    assert got["text"] == SPEC_UNIT["text"]
    assert got["scope"] == "acme/alpha/backend"
    assert got["acl_owner"] == "alice"


def test_missing_and_unknown_key_401(client):
    assert ingest(client, {}, [SPEC_UNIT]).status_code == 401
    r = ingest(client, auth("aegis_sk_nobody"), [SPEC_UNIT])
    assert r.status_code == 401
    assert r.json()["error"]["code"] == "unauthorized"


def test_scope_outside_grants(client):
    # Header scope outside the grants: the whole request is a 403.
    r = client.post(
        "/v1/ingest", headers={**ALICE, "X-Aegis-Scope": "acme/beta"}, json={"units": [SPEC_UNIT]}
    )
    assert r.status_code == 403
    assert r.json()["error"]["code"] == "forbidden_scope"
    # Body scope outside the grants: that Unit alone fails, the rest is stored.
    r = ingest(
        client, ALICE, [{**SPEC_UNIT, "scope": "acme/beta"}, {**SPEC_UNIT, "doc_id": "other"}]
    )
    assert r.status_code == 200
    res = r.json()["results"]
    assert res[0]["ok"] is False and res[0]["error"]["code"] == "forbidden_scope"
    assert res[1]["ok"] is True
    # Look-alike scope is outside too (no LIKE, '/' boundary).
    r = ingest(client, ALICE, [{**SPEC_UNIT, "scope": "acme/alphabet"}])
    assert r.json()["results"][0]["error"]["code"] == "forbidden_scope"
    # A body scope must lie inside the header scope when one is sent.
    r = client.post(
        "/v1/ingest",
        headers={**ALICE, "X-Aegis-Scope": "acme/alpha/backend"},
        json={"units": [{**SPEC_UNIT, "scope": "acme/alpha/frontend"}]},
    )
    assert r.json()["results"][0]["error"]["code"] == "forbidden_scope"


def test_per_unit_errors_do_not_lose_the_batch(client):
    units = [
        {**SPEC_UNIT, "doc_id": "a", "locator": {"kind": "char_span", "start": 5, "end": 2}},
        {**SPEC_UNIT, "doc_id": "b", "typo_field": 1},
        {**SPEC_UNIT, "doc_id": "c", "modality": "clip"},
        {**SPEC_UNIT, "doc_id": "d", "modality": "text", "plane": "audio"},
        {**SPEC_UNIT, "doc_id": "e", "scope": "Acme/Alpha"},
        "not an object",
        {**SPEC_UNIT, "doc_id": "ok", "locator": {"kind": "line_range", "start": 1, "end": 1}},
    ]
    r = ingest(client, ALICE, units)
    assert r.status_code == 200, r.text
    res = r.json()["results"]
    assert [x["ok"] for x in res] == [False] * 6 + [True]
    assert all(x["error"]["code"] == "validation_error" for x in res[:6])
    assert r.json()["ingested"] == 1
    got = client.get(f"/v1/units/{res[6]['unit_id']}", headers=ALICE).json()
    assert got["locator"] == {"kind": "line_range", "start": 1, "end": 1}


def test_all_locator_kinds_round_trip(client):
    locs = [
        {"kind": "time_range", "t_start_ms": 767000, "t_end_ms": 782000, "shot_idx": 19},
        {"kind": "bbox", "box": [72, 512, 540, 611], "page": 14},
        {"kind": "char_span", "start": 0, "end": 20},
        {"kind": "line_range", "start": 3, "end": 9},
    ]
    units = [{**SPEC_UNIT, "doc_id": f"l{i}", "locator": loc} for i, loc in enumerate(locs)]
    res = ingest(client, ALICE, units).json()["results"]
    for loc, r in zip(locs, res, strict=True):
        assert r["ok"], r
        assert client.get(f"/v1/units/{r['unit_id']}", headers=ALICE).json()["locator"] == loc


def test_free_tier_plane_gate_on_ingest_and_query(client):
    units = [
        {"text": "beta notes", "doc_id": "n1"},
        {"text": "a keynote frame", "modality": "image", "doc_id": "n2"},
    ]
    r = ingest(client, CAROL, units)
    assert r.status_code == 402
    err = r.json()["error"]
    assert err["code"] == "upgrade_required" and err["required_tier"] == "pro"
    # Nothing of the batch was stored.
    r = client.post("/v1/search", headers=CAROL, json={"q": "beta notes"})
    assert r.status_code == 200 and r.json()["hits"] == []
    r = client.post("/v1/search", headers=CAROL, json={"q": "x", "planes": ["audio"]})
    assert r.status_code == 402
    assert r.json()["error"]["required_tier"] == "pro"
    r = client.post("/v1/search", headers=CAROL, json={"q": "x", "planes": ["text"]})
    assert r.status_code == 200


def test_document_quota(client, svc):
    key = add_principal(
        svc, "dana", perms=["read", "write"], tier="free", scopes=["acme/gamma"], quota=3
    )
    h = auth(key)
    units = [{"text": f"note number {i}", "doc_id": f"doc{i}"} for i in range(3)]
    assert ingest(client, h, units).status_code == 200
    # Re-ingesting the same documents does not count again.
    r = ingest(client, h, units)
    assert r.status_code == 200
    assert [x["status"] for x in r.json()["results"]] == ["unchanged"] * 3
    r = ingest(client, h, [{"text": "one more", "doc_id": "doc3"}])
    assert r.status_code == 402
    err = r.json()["error"]
    assert err["code"] == "quota_exceeded"
    assert (err["limit"], err["used"], err["requested"]) == (3, 3, 1)
    # Deleting a document frees its quota.
    assert client.delete("/v1/docs/doc0", headers=h).status_code == 200
    assert ingest(client, h, [{"text": "one more", "doc_id": "doc3"}]).status_code == 200


def test_idempotent_reingest_and_acl_update(client, svc):
    r1 = ingest(client, ALICE, [SPEC_UNIT]).json()["results"][0]
    assert r1["status"] == "created"
    r2 = ingest(client, ALICE, [SPEC_UNIT]).json()["results"][0]
    assert r2["status"] == "unchanged" and r2["unit_id"] == r1["unit_id"]
    # New groups: updated in place, and effective at once (bob loses access). A group alice is
    # not in she may not add (acl.may_add_groups); removing one she may.
    r3 = ingest(client, ALICE, [{**SPEC_UNIT, "acl_groups": ["finance"]}]).json()["results"][0]
    assert r3["error"]["code"] == "forbidden_group"
    r3 = ingest(client, ALICE, [{**SPEC_UNIT, "acl_groups": []}]).json()["results"][0]
    assert r3["status"] == "updated" and r3["unit_id"] == r1["unit_id"]
    assert client.get(f"/v1/units/{r1['unit_id']}", headers=BOB).status_code == 404
    hits = client.post("/v1/search", headers=BOB, json={"q": "backend renewals"}).json()["hits"]
    assert r1["unit_id"] not in [h["unit_id"] for h in hits]
    n = stored_value(svc, "SELECT COUNT(*) FROM units")
    assert n == 1


def test_concurrent_identical_ingests_make_one_row(client, svc):
    unit = {**SPEC_UNIT, "doc_id": "race", "text": "A race between two identical requests."}
    out: list[dict] = []

    def go() -> None:
        out.append(ingest(client, ALICE, [unit]).json())

    threads = [threading.Thread(target=go) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all("results" in o for o in out), out
    ids = {o["results"][0]["unit_id"] for o in out}
    assert len(ids) == 1
    assert sorted(o["results"][0]["status"] for o in out) == ["created"] + ["unchanged"] * 3
    n = stored_value(svc, "SELECT COUNT(*) FROM units WHERE doc_id = 'race'")
    assert n == 1


def test_other_tenant_identical_text_reveals_nothing(client, svc):
    key = add_principal(svc, "erin", perms=["read", "write"], scopes=["globex"])
    r = ingest(client, ALICE, [SPEC_UNIT]).json()["results"][0]
    other = {**SPEC_UNIT, "scope": "globex", "acl_groups": []}  # erin is in no group
    r2 = ingest(client, auth(key), [other]).json()["results"][0]
    assert r2["status"] == "created" and r2["unit_id"] != r["unit_id"]


def test_reingest_doc_replaces_its_units(client):
    v1 = [
        {"text": "Version one says the limit is 10 requests.", "doc_id": "policy"},
        {"text": "An appendix that will be removed later.", "doc_id": "policy"},
    ]
    res = ingest(client, ALICE, v1).json()["results"]
    v2 = [{"text": "Version two says the limit is 20 requests.", "doc_id": "policy"}]
    ingest(client, ALICE, v2)
    for r in res:
        assert client.get(f"/v1/units/{r['unit_id']}", headers=ALICE).status_code == 404
    hits = client.post("/v1/search", headers=ALICE, json={"q": "appendix removed"}).json()["hits"]
    assert all("appendix" not in h["text"] for h in hits)
    # append mode keeps what was there.
    ingest(client, ALICE, [{"text": "An extra note.", "doc_id": "policy"}], mode="append")
    hits = client.post("/v1/search", headers=ALICE, json={"q": "limit requests"}).json()["hits"]
    assert any("Version two" in h["text"] for h in hits)


def test_long_text_is_chunked_with_spans(client):
    paras = [f"Paragraph {i} talks about subject {i} in some detail. " * 12 for i in range(8)]
    text = "\n\n".join(paras)
    r = ingest(client, ALICE, [{"text": text, "doc_id": "long"}]).json()
    res = r["results"][0]
    assert len(res["unit_ids"]) > 1 and res["unit_id"] == res["unit_ids"][0]
    assert r["ingested"] == len(res["unit_ids"])
    covered = []
    for uid in res["unit_ids"]:
        u = client.get(f"/v1/units/{uid}", headers=ALICE).json()
        loc = u["locator"]
        assert loc["kind"] == "char_span"
        assert text[loc["start"] : loc["end"]] == u["text"]
        covered.append((loc["start"], loc["end"]))
    assert covered[0][0] == 0 and covered[-1][1] == len(text.rstrip())


def test_limits_batch_depth_json(client, svc):
    big = [{"text": "x"}] * (svc.settings.max_batch_units + 1)
    r = ingest(client, ALICE, big)
    assert r.status_code == 413 and r.json()["error"]["code"] == "payload_too_large"
    deep = {"units": [{"text": "x", "locator": {"kind": "char_span"}}]}
    node: dict = deep
    for _ in range(60):
        node["n"] = {}
        node = node["n"]
    r = client.post("/v1/ingest", headers=ALICE, json=deep)
    assert r.status_code == 422
    r = client.post(
        "/v1/ingest",
        headers={**ALICE, "Content-Type": "application/json"},
        content=b'{"units": [{"text": NaN}]}',
    )
    assert r.status_code == 422 and r.json()["error"]["code"] == "validation_error"
    r = client.post("/v1/ingest", headers=ALICE, content=b"\xff\xfe{")
    assert r.status_code == 422
    r = client.post("/v1/ingest", headers=ALICE, json={"units": []})
    assert r.status_code == 422
    r = client.post("/v1/ingest", headers=ALICE, json=[1, 2])
    assert r.status_code == 422


def test_body_limit_enforced_while_streaming(live, svc):
    limit = svc.settings.max_body_bytes
    # Declared too large: rejected from the header, before reading.
    with socket.create_connection(("127.0.0.1", live.port), timeout=10) as sock:
        sock.sendall(
            b"POST /v1/ingest HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer aegis_sk_alice\r\n"
            b"Content-Length: %d\r\n\r\n{" % (limit + 1)
        )
        assert sock.recv(65536).startswith(b"HTTP/1.1 413")
    # Chunked with no length: the server answers 413 once the streamed bytes pass the limit,
    # while the client is still sending (it never buffers the whole body).
    sock = socket.create_connection(("127.0.0.1", live.port))
    sock.sendall(
        b"POST /v1/ingest HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer aegis_sk_alice\r\n"
        b"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
    )
    block = b" " * 65536
    sent = 0
    answered_at = None
    try:
        while sent < limit * 4:
            sock.sendall(b"%x\r\n" % len(block) + block + b"\r\n")
            sent += len(block)
            if select.select([sock], [], [], 0)[0]:
                answered_at = sent
                break
    except (BrokenPipeError, ConnectionResetError):
        answered_at = sent
    sock.settimeout(10)
    data = b""
    try:
        while b"\r\n\r\n" not in data or b"payload_too_large" not in data:
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
    finally:
        sock.close()
    assert data.startswith(b"HTTP/1.1 413"), data[:200]
    assert b"payload_too_large" in data
    assert answered_at is not None and answered_at < limit * 4
    n = stored_value(svc, "SELECT COUNT(*) FROM units")
    assert n == 0
