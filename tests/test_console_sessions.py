"""Console sessions, GET /v1/me and the console's pages, over real HTTP (no browser)."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import httpx
import pytest

from conftest import (
    ALICE,
    CAROL,
    LiveServer,
    add_principal,
    auth,
    make_service,
    store_execute,
    stored_rows,
)
from superchargedb.client import Client
from superchargedb.demo import seed_principals
from superchargedb.models.embedder import Embedder
from superchargedb.service import Service


def sign_in(url: str, key: str) -> httpx.Client:
    """A browser-like client: the cookie jar holds the session; no Authorization header."""
    c = httpx.Client(base_url=url, timeout=10)
    r = c.post("/v1/session", headers=auth(key))
    assert r.status_code == 200, r.text
    return c


def test_cookie_reads_gets_only_and_its_attributes(live: LiveServer, svc: Service) -> None:
    c = httpx.Client(base_url=live.url, timeout=10)
    r = c.post("/v1/session", headers=ALICE)
    set_cookie = r.headers["set-cookie"]
    for attr in ("HttpOnly", "SameSite=Strict", "Path=/v1/", "scdb_session=scs_"):
        assert attr in set_cookie
    assert c.get("/v1/me").json()["name"] == "alice"
    # Anything that changes state needs the key: a cookie alone is no credential there.
    r = c.post("/v1/search", json={"q": "failover"})
    assert r.status_code == 401
    r = c.delete("/v1/docs/failover-runbook")
    assert r.status_code == 401
    # A key always wins over the cookie, even a bad one.
    assert c.get("/v1/me", headers=auth("aegis_sk_nope")).status_code == 401
    # Stored hashed: the cookie value is nowhere in the catalog.
    token = c.cookies["scdb_session"]
    rows = stored_rows(svc, "SELECT token_hash FROM console_sessions")
    assert [r[0] for r in rows] == [hashlib.sha256(token.encode()).hexdigest()]


def test_revoked_key_and_disabled_principal_end_sessions_at_once(
    live: LiveServer, svc: Service
) -> None:
    key = add_principal(svc, "dora", perms=["read"], scopes=["acme/alpha"])
    c = sign_in(live.url, key)
    assert c.get("/v1/me").status_code == 200
    kid = httpx.get(f"{live.url}/v1/admin/principals/dora/keys", headers=ALICE).json()["keys"][0]
    assert httpx.delete(f"{live.url}/v1/admin/keys/{kid['key_id']}", headers=ALICE).is_success
    assert c.get("/v1/me").status_code == 401

    key = add_principal(svc, "erin", perms=["read"], scopes=["acme/alpha"])
    c = sign_in(live.url, key)
    assert c.get("/v1/me").status_code == 200
    r = httpx.patch(f"{live.url}/v1/admin/principals/erin", headers=ALICE, json={"disabled": True})
    assert r.is_success, r.text
    assert c.get("/v1/me").status_code == 401


def test_idle_expiry_and_sign_out(live: LiveServer, svc: Service) -> None:
    c = sign_in(live.url, "aegis_sk_bob")
    assert c.get("/v1/me").status_code == 200
    idle_ms = svc.settings.console_session_idle_s * 1000
    store_execute(
        svc, "UPDATE console_sessions SET last_seen_at = last_seen_at - ?", (idle_ms + 1,)
    )
    assert c.get("/v1/me").status_code == 401

    c = sign_in(live.url, "aegis_sk_bob")
    token = c.cookies["scdb_session"]
    # Another principal's key cannot end bob's session (its browser forgets the cookie).
    r = httpx.delete(f"{live.url}/v1/session", headers=ALICE, cookies={"scdb_session": token})
    assert r.json() == {"ended": False}
    assert c.get("/v1/me").status_code == 200
    r = c.delete("/v1/session", headers=auth("aegis_sk_bob"))
    assert r.json() == {"ended": True}
    assert "Max-Age=0" in r.headers["set-cookie"]
    again = httpx.get(f"{live.url}/v1/me", cookies={"scdb_session": token})
    assert again.status_code == 401


def test_sessions_pass_the_key_rate_limit(tmp_path: Path, embedder: Embedder) -> None:
    svc = make_service(tmp_path / "d", embedder, rate_key_rps=0.001, rate_key_burst=2)
    seed_principals(svc)
    try:
        with LiveServer(svc) as live:
            c = sign_in(live.url, "aegis_sk_alice")  # the first token of the bucket
            assert c.get("/v1/me").status_code == 200
            r = c.get("/v1/me")
            assert r.status_code == 429
            assert r.json()["error"]["code"] == "rate_limited"
    finally:
        svc.close()


def test_cookie_loads_objects_under_the_same_acl(live: LiveServer) -> None:
    key = "acme/alpha/backend/notes.txt"
    r = httpx.put(
        f"{live.url}/v1/objects/{key}",
        headers={**ALICE, "Content-Type": "text/plain"},
        content=b"hello",
    )
    assert r.status_code == 201, r.text
    alice = sign_in(live.url, "aegis_sk_alice")
    r = alice.get(f"/v1/objects/{key}", headers={"Range": "bytes=1-3"})
    assert r.status_code == 206 and r.content == b"ell"
    carol = sign_in(live.url, "aegis_sk_carol")
    assert carol.get(f"/v1/objects/{key}").status_code == 404
    assert httpx.get(f"{live.url}/v1/objects/{key}").status_code == 401


def test_me_and_the_typed_client(live: LiveServer) -> None:
    me = httpx.get(f"{live.url}/v1/me", headers=CAROL).json()
    assert me["name"] == "carol" and me["tier"] == "free"
    assert me["scopes"] == ["acme/beta"] and me["active_scope"] == "acme/beta"
    assert me["groups"] == ["beta-team"] and me["perms"] == ["read", "write"]
    assert me["quota"]["documents"] == {"used": 0, "quota": 50}
    with Client(live.url, api_key="aegis_sk_alice") as c:
        typed = c.me()
    assert typed.name == "alice" and typed.may("admin") and not typed.may("operator")
    assert typed.active_scope == "acme/alpha/backend" and typed.scopes == ("acme/alpha",)
    assert httpx.get(f"{live.url}/v1/me").status_code == 401


@pytest.mark.parametrize("path", ["/", "/ui", "/ui/ask", "/ui/units/abc?loc=char_span:1-2"])
def test_console_pages_carry_a_strict_csp(client: Any, path: str) -> None:
    r = client.get(path)
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    csp = r.headers["content-security-policy"]
    assert "script-src 'self'" in csp and "frame-ancestors 'none'" in csp
    assert "unsafe-inline" not in csp
    assert r.headers["referrer-policy"] == "no-referrer"
    assert '<script type="module" src="/ui/assets/app.js">' in r.text
    assert "<script>" not in r.text  # no inline script


def test_console_assets_and_what_is_not_one(client: Any) -> None:
    r = client.get("/ui/assets/app.js")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/javascript")
    assert "content-security-policy" in r.headers
    for bad in ("/ui/assets/nope.js", "/ui/assets/%2e%2e/api.py", "/ui/assets/app.js.map"):
        r = client.get(bad)
        assert r.status_code == 404, bad
        assert r.json()["error"]["code"] == "not_found"
    # Only the packaged files are ever served: a path that climbs out is just another page.
    r = client.get("/ui/assets/../../api/routes_ui.py")
    assert "register_ui" not in r.text


def test_a_session_outlives_the_process_that_made_it(tmp_path: Path, embedder: Embedder) -> None:
    """Sessions live in the catalog (hashed), not in a process: another API process on the
    same catalog (here: the next one on the data dir) accepts the cookie."""
    from fastapi.testclient import TestClient

    from superchargedb.api.app import create_app

    first = make_service(tmp_path / "d", embedder)
    seed_principals(first)
    with TestClient(create_app(first)) as c:
        c.post("/v1/session", headers=ALICE)
        token = c.cookies["scdb_session"]
    first.close()
    second = make_service(tmp_path / "d", embedder)
    try:
        with TestClient(create_app(second)) as c:
            c.cookies.set("scdb_session", token)
            r = c.get("/v1/me")
            assert r.status_code == 200 and r.json()["name"] == "alice"
            c.cookies.set("scdb_session", token[:-2] + "xx")
            assert c.get("/v1/me").status_code == 401
    finally:
        second.close()
