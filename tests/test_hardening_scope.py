"""``?scope=`` plays the header's role on every route (issue 16, class 7), on a real server.

One function reads the request scope for every route: header and parameter disagreeing, or
either repeated, is a 422; a scope outside the grants is a 403 for writes as for reads; a Unit or
object outside the requested scope answers as a missing one.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from conftest import ALICE, LiveServer, make_service, stored_value

SCOPE = "acme/alpha/backend"
MISSING_UNIT = "0190f1a4-0000-7000-8000-000000000000"


@pytest.fixture(scope="module")
def server(tmp_path_factory, embedder) -> Iterator[tuple[Any, httpx.Client, dict[str, str]]]:
    from superchargedb.demo import seed_principals

    svc = make_service(tmp_path_factory.mktemp("scope") / "data", embedder, job_workers=0)
    seed_principals(svc)
    with LiveServer(svc) as live, httpx.Client(base_url=live.url, timeout=60) as c:
        r = c.post(
            "/v1/ingest",
            json={"units": [{"text": "The failover drill runs on Tuesdays.", "doc_id": "s-doc"}]},
            headers={**ALICE, "X-Aegis-Scope": SCOPE},
        )
        assert r.status_code == 200 and r.json()["results"][0]["ok"], r.text
        r = c.put(
            f"/v1/objects/{SCOPE}/s-notes.txt",
            content=b"Object notes.",
            headers={**ALICE, "Content-Type": "text/plain", "X-Aegis-Scope": SCOPE},
        )
        assert r.status_code == 201, r.text
        uid = stored_value(svc, "SELECT unit_id FROM units WHERE doc_id = 's-doc'")
        yield svc, c, {"unit": uid}
    svc.close()


def count(svc: Any) -> tuple[int, int]:
    return (
        stored_value(svc, "SELECT COUNT(*) FROM units"),
        stored_value(svc, "SELECT COUNT(*) FROM objects"),
    )


def unit_body(text: str = "Stored where the caller asked.") -> dict[str, Any]:
    return {"units": [{"text": text}]}


def writes(uid: str) -> list[tuple[str, str, dict[str, Any]]]:
    """Every write route, each with a body that would succeed in alice's own scope."""
    obj = {"content": b"bytes", "headers": {"Content-Type": "text/plain"}}
    return [
        ("POST", "/v1/ingest", {"json": unit_body()}),
        ("PUT", "/v1/docs/s-put", {"json": unit_body()}),
        ("PATCH", "/v1/docs/s-doc", {"json": {"acl_groups": []}}),
        ("DELETE", "/v1/docs/s-doc", {}),
        ("DELETE", f"/v1/units/{uid}", {}),
        ("PUT", f"/v1/objects/{SCOPE}/s-new.txt", obj),
    ]


def call(c: httpx.Client, method: str, url: str, params: Any, kw: dict[str, Any], hdr=None):
    headers = {**ALICE, **kw.get("headers", {}), **(hdr or {})}
    rest = {k: v for k, v in kw.items() if k != "headers"}
    return c.request(method, url, params=params, headers=headers, **rest)


def test_a_scope_outside_the_grants_is_a_403_on_every_write_route(server):
    svc, c, ids = server
    before = count(svc)
    for method, url, kw in writes(ids["unit"]):
        for params, hdr in (({"scope": "acme/beta"}, None), ({}, {"X-Aegis-Scope": "acme/beta"})):
            r = call(c, method, url, params, kw, hdr)
            assert r.status_code == 403, (method, url, params, r.status_code, r.text)
            assert r.json()["error"]["code"] == "forbidden_scope", r.text
    assert count(svc) == before


def test_ambiguous_scopes_are_a_422_on_every_route(server):
    svc, c, ids = server
    before = count(svc)
    reads = [
        ("POST", "/v1/search", {"json": {"q": "failover"}}),
        ("POST", "/v1/answer", {"json": {"q": "failover"}}),
        ("GET", "/v1/docs", {}),
        ("GET", "/v1/units", {}),
        ("GET", f"/v1/units/{ids['unit']}", {}),
        ("GET", f"/v1/objects/{SCOPE}/s-notes.txt", {}),
    ]
    for method, url, kw in [*writes(ids["unit"]), *reads]:
        ctx = (method, url)
        # Header and parameter disagree.
        r = call(c, method, url, {"scope": SCOPE}, kw, {"X-Aegis-Scope": "acme/alpha"})
        assert r.status_code == 422, (ctx, r.status_code, r.text)
        # The parameter repeated, even with one value twice.
        r = call(c, method, url, [("scope", SCOPE), ("scope", SCOPE)], kw)
        assert r.status_code == 422 and "repeated" in r.json()["error"]["message"], (ctx, r.text)
        # The header repeated.
        headers = [*ALICE.items(), *kw.get("headers", {}).items()]
        headers += [("X-Aegis-Scope", SCOPE), ("X-Aegis-Scope", "acme/alpha")]
        rest = {k: v for k, v in kw.items() if k != "headers"}
        r = c.request(method, url, headers=headers, **rest)
        assert r.status_code == 422 and "repeated" in r.json()["error"]["message"], (ctx, r.text)
    assert count(svc) == before


def test_ingest_and_put_store_into_the_scope_of_the_query(server):
    svc, c, _ = server
    r = c.post(
        "/v1/ingest?scope=acme/alpha/frontend", json=unit_body("Front-end note."), headers=ALICE
    )
    assert r.status_code == 200 and r.json()["results"][0]["ok"], r.text
    got = c.get("/v1/units/" + r.json()["results"][0]["unit_id"], headers=ALICE).json()
    assert got["scope"] == "acme/alpha/frontend", got
    r = c.put(
        "/v1/docs/s-front?scope=acme/alpha/frontend", json=unit_body("Front put."), headers=ALICE
    )
    assert r.status_code == 200 and r.json()["results"][0]["ok"], r.text
    got = c.get("/v1/units/" + r.json()["results"][0]["unit_id"], headers=ALICE).json()
    assert got["scope"] == "acme/alpha/frontend", got
    # And a Unit naming a scope outside the query's is refused per Unit.
    r = c.post(
        "/v1/ingest?scope=acme/alpha/frontend",
        json={"units": [{"text": "Elsewhere.", "scope": SCOPE}]},
        headers=ALICE,
    )
    assert r.json()["results"][0]["error"]["code"] == "forbidden_scope", r.text


def test_a_unit_or_object_outside_the_requested_scope_is_missing(server):
    svc, c, ids = server
    uid = ids["unit"]
    other = {"scope": "acme/alpha/frontend"}  # within alice's grants, not holding them
    for suffix in ("", "/preview"):
        r = c.get(f"/v1/units/{uid}{suffix}", params=other, headers=ALICE)
        gone = c.get(f"/v1/units/{MISSING_UNIT}{suffix}", params=other, headers=ALICE)
        assert (r.status_code, r.content) == (gone.status_code, gone.content) != 200, r.text
    assert (
        c.get(f"/v1/units/{uid}", params={"scope": "acme/beta"}, headers=ALICE).status_code == 403
    )
    r = c.get(f"/v1/objects/{SCOPE}/s-notes.txt", params=other, headers=ALICE)
    gone = c.get(f"/v1/objects/{SCOPE}/s-none.txt", params=other, headers=ALICE)
    assert (r.status_code, r.content) == (gone.status_code, gone.content), r.text
    assert r.status_code == 404
    # A delete outside the requested scope is a missing id's and deletes nothing.
    r = c.delete(f"/v1/units/{uid}", params=other, headers=ALICE)
    gone = c.delete(f"/v1/units/{MISSING_UNIT}", params=other, headers=ALICE)
    assert (r.status_code, r.content) == (gone.status_code, gone.content), r.text
    # Inside it, all are found.
    assert c.get(f"/v1/units/{uid}", params={"scope": SCOPE}, headers=ALICE).status_code == 200
    r = c.get(f"/v1/objects/{SCOPE}/s-notes.txt", params={"scope": SCOPE}, headers=ALICE)
    assert r.status_code == 200 and r.content == b"Object notes."
