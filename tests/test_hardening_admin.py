"""Issue 16, class 2: tenant admins cannot impersonate or out-manage more powerful principals.

One real server (uvicorn on a loopback port) for the module; principals are created by the
operator path (the test helper writes the catalog directly). Every refused request is checked to
have changed nothing: no key minted, no row changed, no audit record appended.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from conftest import LiveServer, add_principal, auth, make_service, stored_rows, stored_value
from superchargedb.auth.admin import OPERATOR
from superchargedb.auth.principals import hash_key
from superchargedb.service import Service

A = "acme/alpha"
# name: (perms, tier, scopes, groups, quota)
PRINCIPALS: dict[str, tuple[list[str], str, list[str], list[str], int | None]] = {
    "fa": (["read", "write", "admin"], "free", [A], ["eng"], 100),  # the free-tier admin
    "ra": (["read", "admin"], "free", [A], ["eng"], 100),  # an admin without write
    "pro1": (["read"], "pro", [A], [], 10),  # a higher tier
    "rw": (["read", "write"], "free", [A], ["eng"], 10),  # more perms than ra
    "big": (["read"], "free", [A], ["eng"], None),  # an unlimited quota
    "fin": (["read"], "free", [A], ["fin"], 10),  # a group fa is not in
    "finw": (["read", "write"], "free", [A], ["fin"], 10),  # writes into that group
    "owner": (["read", "write"], "free", [A], ["eng"], 10),  # owns a Unit only it can read
    "peer": (["read", "write"], "free", [A], ["eng"], 10),  # wholly within fa's power
    "padmin": (["read", "write", "admin"], "pro", [A], ["eng"], None),  # a stronger admin
    "gadmin": (["read", "write", "admin"], "pro", ["globex"], [], None),  # another tenant
    "sadmin": (["read", "admin"], "free", ["solo"], [], None),  # the only admin of "solo"
    "s2": (["read", "admin"], "free", ["solo/x"], [], None),  # a second one, disabled below
}


def key_of(name: str) -> str:
    return f"aegis_sk_test_{name}"


def h(name: str) -> dict[str, str]:
    return auth(key_of(name))


@pytest.fixture(scope="module")
def svc(tmp_path_factory: pytest.TempPathFactory, embedder: Any) -> Iterator[Service]:
    s = make_service(tmp_path_factory.mktemp("hard-admin") / "data", embedder)
    for name, (perms, tier, scopes, groups, quota) in PRINCIPALS.items():
        add_principal(s, name, perms=perms, tier=tier, scopes=scopes, groups=groups, quota=quota)
    s.admin_update_principal(OPERATOR, "s2", {"disabled": True})
    yield s
    s.close()


@pytest.fixture(scope="module")
def srv(svc: Service) -> Iterator[httpx.Client]:
    with LiveServer(svc) as live, httpx.Client(base_url=live.url, timeout=30) as c:
        # Units the "which Units can it read" rule must see: one only its owner can read, one
        # of peer's shared with a group fa is in.
        r = c.post(
            "/v1/ingest",
            headers=h("owner"),
            json={"units": [{"text": "owner private plan", "doc_id": "p1", "acl_groups": []}]},
        )
        assert r.status_code == 200 and r.json()["results"][0]["ok"], r.text
        r = c.post(
            "/v1/ingest",
            headers=h("peer"),
            json={"units": [{"text": "peer shared note", "doc_id": "n1", "acl_groups": ["eng"]}]},
        )
        assert r.status_code == 200 and r.json()["results"][0]["ok"], r.text
        r = c.post(
            "/v1/ingest",
            headers=h("finw"),
            json={"units": [{"text": "finance figures", "doc_id": "f1", "acl_groups": ["fin"]}]},
        )
        assert r.status_code == 200 and r.json()["results"][0]["ok"], r.text
        # A stronger admin files a private Unit for a principal that does not exist yet.
        r = c.post(
            "/v1/ingest",
            headers=h("padmin"),
            json={"units": [{"text": "for the new hire", "acl_owner": "future", "acl_groups": []}]},
        )
        assert r.status_code == 200 and r.json()["results"][0]["ok"], r.text
        yield c


def snapshot(svc: Service) -> tuple[Any, ...]:
    """Every principal row, every key row and the audit length: what a refusal must not move."""
    return (
        stored_rows(svc, "SELECT * FROM principals ORDER BY id"),
        stored_rows(svc, "SELECT * FROM api_keys ORDER BY id"),
        stored_value(svc, "SELECT COUNT(*) FROM audit_log"),
    )


def refused(r: httpx.Response, code: str = "privilege_escalation", status: int = 403) -> None:
    assert r.status_code == status, r.text
    assert r.json()["error"]["code"] == code, r.text


def key_ids(svc: Service, name: str) -> list[str]:
    return [
        r[0]
        for r in stored_rows(
            svc,
            "SELECT k.id FROM api_keys k JOIN principals p ON p.id = k.principal_id"
            " WHERE p.name = ? ORDER BY k.created_at",
            (name,),
        )
    ]


def test_free_admin_cannot_mint_a_pro_key_and_search_audio(srv, svc):
    # The attack of the issue, end to end: fa is free tier, so the audio plane is closed to it...
    r = srv.post("/v1/search", headers=h("fa"), json={"q": "x", "planes": ["audio"]})
    assert r.status_code == 402 and r.json()["error"]["code"] == "upgrade_required"
    # ... and it may not mint itself a pro principal's key to open it.
    before = snapshot(svc)
    r = srv.post("/v1/admin/principals/pro1/keys", headers=h("fa"), json={})
    refused(r)
    assert "tier" in r.json()["error"]["lacks"]
    assert snapshot(svc) == before
    # Nor rotate the pro principal's existing key into a new one it would hold.
    (kid,) = key_ids(svc, "pro1")
    refused(srv.post(f"/v1/admin/keys/{kid}/rotate", headers=h("fa"), json={"overlap_s": 0}))
    assert snapshot(svc) == before
    # The pro principal's own key still searches audio: nothing was revoked on the way.
    r = srv.post("/v1/search", headers=h("pro1"), json={"q": "x", "planes": ["audio"]})
    assert r.status_code == 200, r.text


@pytest.mark.parametrize(
    ("admin", "target", "lacks"),
    [
        ("ra", "rw", "perms"),  # a perm the admin lacks (write)
        ("fa", "pro1", "tier"),  # a higher tier
        ("fa", "big", "doc_quota"),  # a larger (here unlimited) quota
        ("fa", "fin", "groups"),  # a group the admin is not in
        ("fa", "owner", "units"),  # an owner-only Unit the admin cannot read
        ("fa", "padmin", "tier"),  # a stronger admin
    ],
)
def test_issuing_a_key_needs_the_targets_whole_power(srv, svc, admin, target, lacks):
    before = snapshot(svc)
    r = srv.post(f"/v1/admin/principals/{target}/keys", headers=h(admin))
    refused(r)
    assert lacks in r.json()["error"]["lacks"]
    kid = key_ids(svc, target)[0]
    refused(srv.post(f"/v1/admin/keys/{kid}/rotate", headers=h(admin), json={"overlap_s": 60}))
    assert snapshot(svc) == before


def test_issuing_within_power_works_and_the_unit_check_is_exact(srv, svc):
    # peer owns a Unit too, but shared with "eng", which fa reads: no false refusal.
    r = srv.post("/v1/admin/principals/peer/keys", headers=h("fa"))
    assert r.status_code == 201, r.text
    minted = r.json()["key"]
    assert srv.post("/v1/search", headers=auth(minted), json={"q": "note"}).status_code == 200
    # The owner-only Unit is the only thing that kept fa from "owner": once the owner shares
    # it with eng, the same request succeeds.
    r = srv.patch("/v1/docs/p1", headers=h("owner"), json={"acl_groups": ["eng"]})
    assert r.status_code == 200, r.text
    assert srv.post("/v1/admin/principals/owner/keys", headers=h("fa")).status_code == 201
    # A Unit shared into a group fa lacks, readable by the target: refused again.
    r = srv.patch("/v1/docs/p1", headers=h("owner"), json={"acl_groups": []})
    assert r.status_code == 200
    refused(srv.post("/v1/admin/principals/owner/keys", headers=h("fa")))


def test_creating_a_name_that_already_owns_units_is_refused(srv, svc):
    # "future" owns a Unit only "future" will read: its first key would read what fa cannot.
    before = snapshot(svc)
    body = {"name": "future", "perms": ["read"], "tier": "free", "scopes": [A], "doc_quota": 5}
    r = srv.post("/v1/admin/principals", headers=h("fa"), json=body)
    refused(r)
    assert r.json()["error"]["lacks"] == ["units"]
    assert snapshot(svc) == before
    # Even the admin that filed it cannot read it (it is future's alone): refused too. The
    # operator is unbounded.
    refused(srv.post("/v1/admin/principals", headers=h("padmin"), json=body))
    assert svc.admin_create_principal(OPERATOR, body)["principal"]["name"] == "future"


def test_the_unit_rule_is_exact_on_both_legs(srv, svc):
    from dataclasses import replace

    from superchargedb.auth.admin import _reads_beyond

    store = svc.auth_store.principals
    fa = svc.authenticate(f"Bearer {key_of('fa')}")
    fin = svc.authenticate(f"Bearer {key_of('fin')}")
    peer = svc.authenticate(f"Bearer {key_of('peer')}")
    # The group leg: fin reads the Unit shared into "fin", which fa is not in...
    assert _reads_beyond(store, fa, fin)
    # ... and with "fin" among fa's groups nothing fin reads is beyond fa.
    assert not _reads_beyond(store, replace(fa, groups=fa.groups | {"fin"}), fin)
    # peer's own Unit is shared with "eng", which fa reads: not beyond.
    assert not _reads_beyond(store, fa, peer)
    # An admin without read reads nothing: everything peer reads is beyond it.
    assert _reads_beyond(store, replace(fa, perms=frozenset({"admin"})), peer)
    # A target outside the admin's scopes: the group leg looks at every group of the target.
    other = replace(fa, scopes=("acme/zeta",), groups=frozenset({"eng", "fin"}))
    assert _reads_beyond(store, other, fin)


@pytest.mark.parametrize(
    ("target", "change"),
    [
        ("padmin", {"disabled": True}),  # disable a stronger admin
        ("padmin", {"perms": ["read"]}),  # demote it
        ("padmin", {"doc_quota": 5}),  # re-quota it
        ("pro1", {"disabled": True}),  # disable a higher tier
        ("fin", {"doc_quota": 1}),  # re-quota one in a group fa lacks
    ],
)
def test_managing_needs_the_targets_perms_tier_scopes_groups(srv, svc, target, change):
    before = snapshot(svc)
    refused(srv.patch(f"/v1/admin/principals/{target}", headers=h("fa"), json=change))
    assert snapshot(svc) == before


def test_revoking_a_stronger_principals_key_is_refused(srv, svc):
    before = snapshot(svc)
    for target in ("padmin", "pro1"):
        kid = key_ids(svc, target)[0]
        refused(srv.delete(f"/v1/admin/keys/{kid}", headers=h("fa")))
    assert snapshot(svc) == before
    assert srv.get("/v1/docs", headers=h("padmin")).status_code == 200


def test_managing_within_power_works(srv, svc):
    # big's quota is above fa's, but perms, tier, scopes and groups are within: re-quota it.
    r = srv.patch("/v1/admin/principals/big", headers=h("fa"), json={"doc_quota": 50})
    assert r.status_code == 200 and r.json()["doc_quota"] == 50
    kid = key_ids(svc, "rw")[0]
    assert srv.delete(f"/v1/admin/keys/{kid}", headers=h("fa")).status_code == 200


@pytest.mark.parametrize(
    "change",
    [
        {"perms": ["read", "write", "admin"]},  # ra raising perms beyond its own
        {"tier": "pro"},
        {"doc_quota": None},  # unlimited, above ra's 100
        {"doc_quota": 101},
        {"groups": ["fin"]},
        {"scopes": ["acme"]},
    ],
)
def test_patching_to_more_power_than_the_admin_is_refused(srv, svc, change):
    before = snapshot(svc)
    r = srv.patch("/v1/admin/principals/ra", headers=h("ra"), json=change)
    assert r.status_code == 403, r.text
    assert r.json()["error"]["code"] in ("privilege_escalation", "forbidden_scope")
    assert snapshot(svc) == before


@pytest.mark.parametrize(
    "spec",
    [
        {"perms": ["read", "write"]},
        {"tier": "pro"},
        {"doc_quota": None},
        {"groups": ["fin"]},
    ],
)
def test_creating_more_power_than_the_admin_is_refused(srv, svc, spec):
    before = snapshot(svc)
    body = {"name": "newbie", "perms": ["read"], "tier": "free", "scopes": [A], "doc_quota": 5}
    r = srv.post("/v1/admin/principals", headers=h("ra"), json={**body, **spec})
    refused(r)
    assert snapshot(svc) == before


def test_no_admin_disables_itself(srv, svc):
    before = snapshot(svc)
    refused(
        srv.patch("/v1/admin/principals/fa", headers=h("fa"), json={"disabled": True}),
        "self_lockout",
    )
    assert snapshot(svc) == before
    assert srv.get("/v1/admin/principals", headers=h("fa")).status_code == 200


def test_the_last_enabled_admin_of_a_tenant_keeps_admin(srv, svc):
    before = snapshot(svc)
    # s2 (the other "solo" admin) is disabled: sadmin is the last one and cannot drop admin.
    r = srv.patch("/v1/admin/principals/sadmin", headers=h("sadmin"), json={"perms": ["read"]})
    refused(r, "last_admin", 409)
    assert snapshot(svc) == before
    # With a second enabled admin in the tenant, the same change is allowed.
    r = srv.patch("/v1/admin/principals/s2", headers=h("sadmin"), json={"disabled": False})
    assert r.status_code == 200, r.text
    r = srv.patch("/v1/admin/principals/sadmin", headers=h("sadmin"), json={"perms": ["read"]})
    assert r.status_code == 200 and r.json()["perms"] == ["read"]
    # The operator stays unbounded: it may disable the tenant's last admin.
    out = svc.admin_update_principal(OPERATOR, "s2", {"disabled": True})
    assert out["disabled"] is True


BAD_PATCHES = [
    {"perms": None},
    {"groups": None},
    {"scopes": None},
    {"tier": None},
    {"active_scope": None},
    {"disabled": None},
    {"perms": "read"},
    {"groups": [1]},
    {"tier": 3},
    {"active_scope": ["acme/alpha"]},
    {"doc_quota": "5"},
    {"doc_quota": True},
    {"disabled": "yes"},
]


@pytest.mark.parametrize("change", BAD_PATCHES, ids=lambda c: json.dumps(c))
def test_null_or_wrong_typed_patch_is_a_422_and_changes_nothing(srv, svc, change):
    before = snapshot(svc)
    r = srv.patch("/v1/admin/principals/peer", headers=h("fa"), json=change)
    assert r.status_code == 422, r.text
    assert r.json()["error"]["code"] == "validation_error"
    assert snapshot(svc) == before


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/admin/principals", {"name": None, "scopes": [A]}),
        ("/v1/admin/principals", {"name": "n1", "scopes": [A], "perms": None}),
        ("/v1/admin/principals", {"name": "n1", "scopes": [A], "groups": None}),
        ("/v1/admin/principals", {"name": "n1", "scopes": [A], "tier": None}),
        ("/v1/admin/principals", {"name": "n1", "scopes": [A], "active_scope": None}),
        ("/v1/admin/principals/peer/keys", []),
        ("/v1/admin/principals/peer/keys", {"expires_at": "soon"}),
        ("/v1/admin/principals/peer/keys", {"expiry": 5}),
        ("ROTATE", {"overlap_s": None}),
        ("ROTATE", {"overlap_s": "60"}),
        ("ROTATE", ["overlap_s"]),
    ],
    ids=lambda v: json.dumps(v),
)
def test_wrong_typed_create_and_key_bodies_are_422(srv, svc, path, body):
    if path == "ROTATE":
        path = f"/v1/admin/keys/{key_ids(svc, 'peer')[0]}/rotate"
    before = snapshot(svc)
    r = srv.post(path, headers=h("fa"), json=body)
    assert r.status_code == 422, r.text
    assert r.json()["error"]["code"] == "validation_error"
    assert snapshot(svc) == before


def records(svc: Service) -> list[dict[str, Any]]:
    rows = stored_rows(svc, "SELECT record FROM audit_log ORDER BY seq")
    return [json.loads(r[0]) for r in rows]


def kid_of(svc: Service, key: str) -> str:
    return str(stored_value(svc, "SELECT id FROM api_keys WHERE key_hash = ?", (hash_key(key),)))


def test_audit_records_carry_the_key_id_and_the_issuer(srv, svc):
    r = srv.post("/v1/admin/principals/peer/keys", headers=h("fa"))
    assert r.status_code == 201, r.text
    minted, minted_id = r.json()["key"], r.json()["key_id"]
    issue = records(svc)[-1]
    assert issue["action"] == "key.create" and issue["key_id"] == minted_id
    assert issue["actor"] == "fa" and issue["actor_key_id"] == kid_of(svc, key_of("fa"))
    keys = srv.get("/v1/admin/principals/peer/keys", headers=h("fa")).json()["keys"]
    assert {k["key_id"]: k["issued_by"] for k in keys}[minted_id] == "fa"
    # What peer does with the key fa minted names both the key and fa.
    r = srv.post("/v1/ingest", headers=auth(minted), json={"units": [{"text": "by minted key"}]})
    assert r.status_code == 200 and r.json()["results"][0]["ok"], r.text
    rec = records(svc)[-1]
    assert rec["actor"] == "peer" and rec["actor_key_id"] == minted_id
    assert rec["actor_key_issuer"] == "fa" and rec["actor_tenants"] == ["acme"]
    # peer's own key is not an issued one: no issuer on its records.
    r = srv.post("/v1/ingest", headers=h("peer"), json={"units": [{"text": "by own key"}]})
    rec = records(svc)[-1]
    assert rec["actor_key_id"] == kid_of(svc, key_of("peer")) and "actor_key_issuer" not in rec
    assert svc.audit_trail.verify_chain().ok  # the chain checked with its key and anchor


def tenant_count(svc: Service, tenant: str) -> int:
    return sum(tenant in r.get("actor_tenants", ()) for r in records(svc))


def test_audit_verify_tells_a_tenant_admin_its_own_count_only(srv, svc):
    r = srv.get("/v1/audit/verify", headers=h("fa"))
    assert r.status_code == 200
    out = r.json()
    assert out == {"ok": True, "records": tenant_count(svc, "acme")}  # no global count, no head
    total = stored_value(svc, "SELECT COUNT(*) FROM audit_log")
    assert out["records"] < total  # the operator's and the other tenants' records are not in it
    # Another tenant's activity does not move acme's count; it moves globex's.
    r = srv.post(
        "/v1/admin/principals",
        headers=h("gadmin"),
        json={"name": "g1", "perms": ["read"], "tier": "free", "scopes": ["globex/a"]},
    )
    assert r.status_code == 201, r.text
    assert srv.get("/v1/audit/verify", headers=h("fa")).json() == out
    g = srv.get("/v1/audit/verify", headers=h("gadmin")).json()
    assert g == {"ok": True, "records": tenant_count(svc, "globex")} and g["records"] >= 1
    # The operator still gets the whole chain.
    whole = svc.audit_verify(OPERATOR)
    assert whole["ok"] and whole["records"] == total + 1 and "head" in whole
    assert srv.get("/v1/audit/verify", headers=h("peer")).status_code == 403
