"""Principals and keys: hashed storage, expiry, rotation, and the tenant-admin boundary."""

from __future__ import annotations

import time

from conftest import ALICE, BOB, auth, stored_rows


def create(client, headers, **spec):
    return client.post("/v1/admin/principals", headers=headers, json=spec)


def test_keys_stored_only_as_hashes(client, svc):
    r = create(
        client,
        ALICE,
        name="dev1",
        perms=["read"],
        tier="pro",
        scopes=["acme/alpha/backend"],
        groups=["eng-backend"],
    )
    assert r.status_code == 201, r.text
    key = r.json()["key"]
    dump = "\n".join(str(row) for row in stored_rows(svc, "SELECT * FROM api_keys"))
    assert key not in dump and "aegis_sk_alice" not in dump
    out = client.post("/v1/search", headers=auth(key), json={"q": "anything"})
    assert out.status_code == 200
    assert out.json()["context"]["effective_scopes"] == ["acme/alpha/backend"]


def test_tenant_admin_cannot_escalate(client):
    # A scope outside its grants.
    r = create(client, ALICE, name="x1", perms=["read"], tier="pro", scopes=["acme/beta"])
    assert r.status_code == 403 and r.json()["error"]["code"] == "forbidden_scope"
    # A tier above its own.
    r = create(client, ALICE, name="x2", perms=["read"], tier="enterprise", scopes=["acme/alpha"])
    assert r.status_code == 403 and r.json()["error"]["code"] == "privilege_escalation"
    # Raise its own tier.
    r = client.patch("/v1/admin/principals/alice", headers=ALICE, json={"tier": "enterprise"})
    assert r.status_code == 403 and r.json()["error"]["code"] == "privilege_escalation"
    # admin beyond its scope: granting admin on acme/beta.
    r = create(
        client,
        ALICE,
        name="x3",
        perms=["read", "admin"],
        tier="pro",
        scopes=["acme/alpha", "acme/beta"],
    )
    assert r.status_code == 403
    # Groups it is not in.
    r = create(
        client,
        ALICE,
        name="x4",
        perms=["read"],
        tier="pro",
        scopes=["acme/alpha"],
        groups=["finance"],
    )
    assert r.status_code == 403 and r.json()["error"]["code"] == "privilege_escalation"
    # Another tenant's principal is invisible (404, not 403).
    assert client.get("/v1/admin/principals/carol", headers=ALICE).status_code == 404
    assert client.post("/v1/admin/principals/carol/keys", headers=ALICE).status_code == 404
    names = [
        p["name"] for p in client.get("/v1/admin/principals", headers=ALICE).json()["principals"]
    ]
    assert "carol" not in names and "bob" in names
    # Non-admins cannot manage at all.
    assert create(client, BOB, name="x5", scopes=["acme/alpha"]).status_code == 403
    # Within bounds it works.
    r = create(
        client,
        ALICE,
        name="ok1",
        perms=["read", "write"],
        tier="pro",
        scopes=["acme/alpha/backend"],
        groups=["eng-backend"],
    )
    assert r.status_code == 201


def test_operator_is_unbounded(tmp_path):
    from superchargedb.auth.admin import OPERATOR
    from superchargedb.operator import OperatorStore
    from superchargedb.settings import Settings

    with OperatorStore(Settings(data_dir=tmp_path / "d")) as st:
        out = st.admin_create_principal(
            OPERATOR,
            {
                "name": "ent",
                "perms": ["read", "write", "admin"],
                "tier": "enterprise",
                "scopes": ["acme", "globex"],
                "groups": ["anything"],
            },
        )
        assert out["principal"]["tier"] == "enterprise"
        assert st.audit_verify(OPERATOR)["ok"]


def test_revoke_expire_rotate(client):
    r = create(client, ALICE, name="rot", perms=["read"], tier="pro", scopes=["acme/alpha"])
    key, kid = r.json()["key"], r.json()["key_id"]
    h = auth(key)
    assert client.post("/v1/search", headers=h, json={"q": "x"}).status_code == 200
    # Rotate with no overlap: the old key stops at once, the new one works.
    r = client.post(f"/v1/admin/keys/{kid}/rotate", headers=ALICE, json={"overlap_s": 0})
    assert r.status_code == 200
    new = auth(r.json()["key"])
    assert client.post("/v1/search", headers=h, json={"q": "x"}).status_code == 401
    assert client.post("/v1/search", headers=new, json={"q": "x"}).status_code == 200
    # Rotate with overlap: both work for now.
    r2 = client.post(
        f"/v1/admin/keys/{r.json()['key_id']}/rotate", headers=ALICE, json={"overlap_s": 600}
    )
    newer = auth(r2.json()["key"])
    assert client.post("/v1/search", headers=new, json={"q": "x"}).status_code == 200
    assert client.post("/v1/search", headers=newer, json={"q": "x"}).status_code == 200
    # Revoke: 401 immediately.
    assert client.delete(f"/v1/admin/keys/{r2.json()['key_id']}", headers=ALICE).status_code == 200
    assert client.post("/v1/search", headers=newer, json={"q": "x"}).status_code == 401
    # An expired key is refused.
    past = int((time.time() - 10) * 1000)
    r = client.post("/v1/admin/principals/rot/keys", headers=ALICE, json={"expires_at": past})
    assert r.status_code == 201
    assert (
        client.post("/v1/search", headers=auth(r.json()["key"]), json={"q": "x"}).status_code == 401
    )
    keys = client.get("/v1/admin/principals/rot/keys", headers=ALICE).json()["keys"]
    assert len(keys) == 4 and all("hash" not in k for k in keys)


def test_admin_changes_are_audited(client, svc):
    create(client, ALICE, name="aud", perms=["read"], tier="pro", scopes=["acme/alpha"])
    actions = [r[0] for r in stored_rows(svc, "SELECT action FROM audit_log ORDER BY seq")]
    assert "principal.create" in actions
    r = client.get("/v1/audit/verify", headers=ALICE)
    assert r.status_code == 200 and r.json()["ok"] is True
    assert client.get("/v1/audit/verify", headers=BOB).status_code == 403


def test_admin_edge_rules(client):
    r = create(client, ALICE, name="e1", permz=["read"], scopes=["acme/alpha"])
    assert r.status_code == 422
    r = create(client, ALICE, name="e1", scopes=["acme/alpha"], expires_at="tomorrow")
    assert r.status_code == 422
    assert (
        create(
            client, ALICE, name="e1", perms=["read"], tier="pro", scopes=["acme/alpha"]
        ).status_code
        == 201
    )
    r = client.patch("/v1/admin/principals/e1", headers=ALICE, json={"disabled": True})
    assert r.status_code == 200 and r.json()["disabled"] is True
    # A later change that omits `disabled` keeps it disabled.
    r = client.patch("/v1/admin/principals/e1", headers=ALICE, json={"groups": ["eng-backend"]})
    assert r.json()["disabled"] is True
    assert client.get("/v1/admin/principals/e1", headers=ALICE).json()["disabled"] is True
    r = client.patch("/v1/admin/principals/e1", headers=ALICE, json={"active_scope": "acme/beta"})
    assert r.status_code == 422


def test_doc_ids_with_slashes_and_route_404(client):
    client.post(
        "/v1/ingest",
        headers=ALICE,
        json={"units": [{"text": "nested doc id", "doc_id": "team/runbooks/a"}]},
    )
    r = client.patch("/v1/docs/team/runbooks/a", headers=ALICE, json={"acl_groups": []})
    assert r.status_code == 200, r.text
    assert client.delete("/v1/docs/team/runbooks/a", headers=ALICE).status_code == 200
    r = client.get("/v1/nope", headers=ALICE)
    assert r.status_code == 404 and r.json()["error"]["code"] == "route_not_found"
