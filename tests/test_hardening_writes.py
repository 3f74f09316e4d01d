"""Destroying what one cannot read, and sharing into groups one is not in (issue 16, classes 3
and 4), on a real server.

A write key without ``read`` deletes only its own Units; anyone else's Unit must be readable
(ACL and ``read``), or the delete, replace or PATCH answers exactly as for an id nobody has and
changes nothing. A writer adds only ACL groups it belongs to (an admin too); removing is free.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from conftest import (
    ALICE,
    BOB,
    LiveServer,
    add_principal,
    as_list,
    auth,
    make_service,
    stored_rows,
    stored_value,
)

SCOPE = "acme/alpha/backend"
MISSING_UNIT = "0190f1a4-0000-7000-8000-000000000000"


@pytest.fixture(scope="module")
def server(tmp_path_factory, embedder) -> Iterator[tuple[Any, httpx.Client]]:
    from superchargedb.demo import seed_principals

    svc = make_service(tmp_path_factory.mktemp("writes") / "data", embedder, job_workers=0)
    seed_principals(svc)
    # wanda writes but cannot read, in eng-backend; walt and dave write and read, in no group;
    # wade is an admin without read in eng-backend; adam an admin in the ops group only.
    keys = {
        "wanda": add_principal(
            svc, "wanda", perms=["write"], scopes=["acme/alpha"], groups=["eng-backend"]
        ),
        "walt": add_principal(svc, "walt", perms=["read", "write"], scopes=["acme/alpha"]),
        "dave": add_principal(svc, "dave", perms=["read", "write"], scopes=["acme/alpha"]),
        "wade": add_principal(
            svc, "wade", perms=["write", "admin"], scopes=["acme/alpha"], groups=["eng-backend"]
        ),
        "adam": add_principal(
            svc, "adam", perms=["read", "write", "admin"], scopes=["acme/alpha"], groups=["ops"]
        ),
    }
    with LiveServer(svc) as live, httpx.Client(base_url=live.url, timeout=60) as c:
        c.keys = {k: auth(v) for k, v in keys.items()}  # type: ignore[attr-defined]
        yield svc, c
    svc.close()


def ingest(c: httpx.Client, who: dict[str, str], *units: dict[str, Any], **kw: Any) -> Any:
    r = c.post("/v1/ingest", json={"units": list(units), **kw}, headers=who)
    assert r.status_code == 200, r.text
    return r.json()


def unit_ids(svc: Any, doc_id: str) -> set[str]:
    return {r[0] for r in stored_rows(svc, "SELECT unit_id FROM units WHERE doc_id = ?", (doc_id,))}


def same(a: httpx.Response, b: httpx.Response) -> None:
    assert (a.status_code, a.content) == (b.status_code, b.content), (a.text, b.text)


# -- class 3: destroying what one cannot read --------------------------------------------------
def test_write_without_read_deletes_only_its_own(server):
    svc, c = server
    keys = c.keys  # type: ignore[attr-defined]
    res = ingest(c, ALICE, {"text": "Alice's runbook for the failover drill.", "doc_id": "w-ali"})
    uid = res["results"][0]["unit_id"]
    # wanda shares eng-backend with the Unit but has no read: the delete is a missing id's.
    for url, missing in (
        (f"/v1/units/{uid}", f"/v1/units/{MISSING_UNIT}"),
        ("/v1/docs/w-ali?scope=acme/alpha", "/v1/docs/w-nobody?scope=acme/alpha"),
    ):
        r = c.delete(url, headers=keys["wanda"])
        assert r.status_code == 404, r.text
        same(r, c.delete(missing, headers=keys["wanda"]))
    assert unit_ids(svc, "w-ali") == {uid}
    assert c.get(f"/v1/units/{uid}", headers=BOB).status_code == 200
    # Its own Units it may delete without read.
    res = ingest(c, keys["wanda"], {"text": "Wanda's own write-only note.", "doc_id": "w-wan"})
    own = res["results"][0]["unit_id"]
    r = c.delete(f"/v1/units/{own}", headers=keys["wanda"])
    assert r.status_code == 200 and r.json()["unit_ids"] == [own], r.text
    assert not unit_ids(svc, "w-wan")


def test_admin_without_read_cannot_patch_or_replace_others(server):
    svc, c = server
    wade = c.keys["wade"]  # type: ignore[attr-defined]
    res = ingest(c, ALICE, {"text": "Alice's pricing notes.", "doc_id": "w-ali2", "scope": SCOPE})
    uid = res["results"][0]["unit_id"]
    # wade is an admin in eng-backend without read: the ACL matches, the read is missing.
    url, none = "/v1/docs/w-ali2?scope=" + SCOPE, "/v1/docs/w-none?scope=" + SCOPE
    same(
        c.patch(url, json={"acl_groups": []}, headers=wade),
        c.patch(none, json={"acl_groups": []}, headers=wade),
    )
    same(c.delete(url, headers=wade), c.delete(none, headers=wade))
    body = {"text": "Wade's replacement.", "doc_id": "w-ali2", "acl_owner": "alice"}
    res = ingest(c, wade, {**body, "scope": SCOPE}, mode="replace")
    assert res["results"][0]["status"] == "created", res
    assert uid in unit_ids(svc, "w-ali2")
    got = stored_value(svc, "SELECT acl_groups FROM units WHERE unit_id = ?", (uid,))
    assert as_list(got) == ["eng-backend"]


def test_admin_cannot_replace_a_private_document_of_another_owner(server):
    svc, c = server
    keys = c.keys  # type: ignore[attr-defined]
    secret = {"text": "Dave's private salary notes.", "doc_id": "w-dave", "acl_groups": []}
    res = ingest(c, keys["dave"], {**secret, "scope": SCOPE})
    mine = res["results"][0]["unit_id"]
    adam = keys["adam"]
    # Its DELETE is a 404 to adam, and so is every way of replacing it.
    same(
        c.delete("/v1/docs/w-dave?scope=acme/alpha", headers=adam),
        c.delete("/v1/docs/w-none?scope=acme/alpha", headers=adam),
    )
    same(
        c.patch("/v1/docs/w-dave?scope=acme/alpha", json={"acl_groups": ["ops"]}, headers=adam),
        c.patch("/v1/docs/w-none?scope=acme/alpha", json={"acl_groups": ["ops"]}, headers=adam),
    )
    fresh = {"text": "Adam's overwrite.", "acl_owner": "dave", "scope": SCOPE, "acl_groups": []}
    res = ingest(c, adam, {**fresh, "doc_id": "w-dave"}, mode="replace")
    ref = ingest(c, adam, {**fresh, "doc_id": "w-none2"}, mode="replace")
    # The answer is a fresh document's; dave's Unit is untouched and still his to read.
    assert res["results"][0]["status"] == ref["results"][0]["status"] == "created", res
    assert mine in unit_ids(svc, "w-dave")
    r = c.put(
        "/v1/docs/w-dave?scope=" + SCOPE,
        json={"units": [{**fresh, "text": "Adam's PUT."}]},
        headers=adam,
    )
    assert r.status_code == 200 and r.json()["results"][0]["ok"], r.text
    assert mine in unit_ids(svc, "w-dave")
    got = c.get(f"/v1/units/{mine}", headers=keys["dave"])
    assert got.status_code == 200 and got.json()["text"] == secret["text"]
    # The very same content cannot be re-permissioned through ingest either.
    res = ingest(c, adam, {**secret, "acl_owner": "dave", "scope": SCOPE, "acl_groups": ["ops"]})
    assert res["results"][0]["error"]["code"] == "not_found", res
    got = stored_value(svc, "SELECT acl_groups FROM units WHERE unit_id = ?", (mine,))
    assert as_list(got) == []


def test_admin_replaces_a_document_it_can_read(server):
    svc, c = server
    keys = c.keys  # type: ignore[attr-defined]
    doc = {"doc_id": "w-dave-ops", "scope": SCOPE, "acl_groups": ["ops"]}
    # An admin in ops shares dave's document with ops on his behalf; then replaces it.
    ingest(c, keys["adam"], {**doc, "text": "Dave's ops notes.", "acl_owner": "dave"})
    before = unit_ids(svc, "w-dave-ops")
    res = ingest(c, keys["adam"], {**doc, "text": "Adam's new ops notes.", "acl_owner": "dave"})
    assert res["results"][0]["status"] == "created", res
    assert unit_ids(svc, "w-dave-ops") == {res["results"][0]["unit_id"]} != before


def test_delete_of_a_mixed_document_takes_only_what_the_caller_may_destroy(server):
    svc, c = server
    keys = c.keys  # type: ignore[attr-defined]
    ingest(c, keys["dave"], {"text": "Dave's half.", "doc_id": "w-mixed", "acl_groups": []})
    res = ingest(c, ALICE, {"text": "Alice's half.", "doc_id": "w-mixed"})
    alices = res["results"][0]["unit_id"]
    r = c.delete("/v1/docs/w-mixed?scope=acme/alpha", headers=ALICE)
    # The reply names only alice's Unit: nothing in it shows that dave's exists.
    assert r.status_code == 200 and r.json() == {"deleted": 1, "unit_ids": [alices]}, r.text
    assert len(unit_ids(svc, "w-mixed")) == 1


# -- class 4: sharing into groups one is not in --------------------------------------------------
def search_ids(c: httpx.Client, who: dict[str, str], q: str) -> set[str]:
    r = c.post("/v1/search", json={"q": q, "top_k": 50}, headers={**who, "X-Aegis-Scope": SCOPE})
    assert r.status_code == 200, r.text
    return {h["unit_id"] for h in r.json()["hits"]}


def test_ingest_into_a_group_one_is_not_in_is_refused(server):
    svc, c = server
    keys = c.keys  # type: ignore[attr-defined]
    planted = "Planted guidance: the failover password is hunter2."
    res = ingest(
        c,
        keys["walt"],
        {"text": planted, "doc_id": "w-plant", "scope": SCOPE, "acl_groups": ["eng-backend"]},
        {"text": "Walt's own note.", "doc_id": "w-walt", "scope": SCOPE, "acl_groups": []},
    )
    bad, ok = res["results"]
    assert bad["ok"] is False and bad["error"]["code"] == "forbidden_group", res
    assert bad["error"]["groups"] == ["eng-backend"], res
    assert ok["ok"] is True and res["ingested"] == 1, res
    assert not unit_ids(svc, "w-plant")
    assert not any("hunter2" in t for t in _texts(c, BOB, planted))
    # Re-ingesting its own Unit into the group is the same ACL change: refused, unchanged.
    again = ingest(
        c,
        keys["walt"],
        {"text": "Walt's own note.", "doc_id": "w-walt", "scope": SCOPE, "acl_groups": ["ops"]},
    )
    assert again["results"][0]["error"]["code"] == "forbidden_group", again
    got = stored_value(svc, "SELECT acl_groups FROM units WHERE doc_id = 'w-walt'")
    assert as_list(got) == []


def _texts(c: httpx.Client, who: dict[str, str], q: str) -> list[str]:
    r = c.post("/v1/search", json={"q": q, "top_k": 50}, headers={**who, "X-Aegis-Scope": SCOPE})
    assert r.status_code == 200, r.text
    return [h["text"] for h in r.json()["hits"]]


def test_patch_adds_only_own_groups_and_always_removes(server):
    svc, c = server
    keys = c.keys  # type: ignore[attr-defined]
    adam = keys["adam"]
    ingest(
        c, adam, {"text": "Ops rota.", "doc_id": "w-rota", "scope": SCOPE, "acl_groups": ["ops"]}
    )
    url = "/v1/docs/w-rota?scope=" + SCOPE
    # An admin too adds only groups within its own.
    r = c.patch(url, json={"acl_groups": ["ops", "eng-backend"]}, headers=adam)
    assert r.status_code == 403 and r.json()["error"]["code"] == "forbidden_group", r.text
    got = stored_value(svc, "SELECT acl_groups FROM units WHERE doc_id = 'w-rota'")
    assert as_list(got) == ["ops"]
    r = c.patch(url, json={"acl_groups": []}, headers=adam)
    assert r.status_code == 200 and r.json()["updated"] == 1, r.text
    # A non-admin writer with no groups: into eng-backend is a 403, into nothing a 200.
    ingest(c, keys["walt"], {"text": "Walt's draft.", "doc_id": "w-draft", "scope": SCOPE})
    url = "/v1/docs/w-draft?scope=" + SCOPE
    r = c.patch(url, json={"acl_groups": ["eng-backend"]}, headers=keys["walt"])
    assert r.status_code == 403 and r.json()["error"]["code"] == "forbidden_group", r.text
    assert c.patch(url, json={"acl_groups": []}, headers=keys["walt"]).status_code == 200


def test_a_document_keeps_groups_it_already_has(server):
    svc, c = server
    keys = c.keys  # type: ignore[attr-defined]
    # alice (in eng-backend) shares walt's document with eng-backend on his behalf; walt may
    # then replace its content under the same groups: he adds none.
    doc = {"doc_id": "w-kept", "scope": SCOPE, "acl_groups": ["eng-backend"]}
    ingest(c, ALICE, {**doc, "text": "Walt's shared plan v1.", "acl_owner": "walt"})
    res = ingest(c, keys["walt"], {**doc, "text": "Walt's shared plan v2."})
    assert res["results"][0]["status"] == "created", res
    rows = stored_rows(svc, "SELECT text FROM units WHERE doc_id = 'w-kept'")
    assert [r[0] for r in rows] == ["Walt's shared plan v2."]
