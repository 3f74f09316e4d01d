"""Rate limits (per key, per address before key lookup), Retry-After, CORS, disk full."""

from __future__ import annotations

import sqlite3

import pytest
from fastapi.testclient import TestClient

from conftest import ALICE, auth, make_service, stored_value
from superchargedb.api.app import create_app


@pytest.fixture
def limited_client(tmp_path, embedder):
    from superchargedb.demo import seed_principals

    s = make_service(
        tmp_path / "d",
        embedder,
        rate_key_rps=1.0,
        rate_key_burst=3,
        rate_ip_rps=1000,
        rate_ip_burst=1000,
        rate_auth_fail_per_min=5,
    )
    seed_principals(s)
    with TestClient(create_app(s), raise_server_exceptions=False) as c:
        yield c, s
    s.close()


def test_per_key_limit_with_retry_after(limited_client):
    c, _ = limited_client
    codes = [c.post("/v1/search", headers=ALICE, json={"q": "x"}).status_code for _ in range(6)]
    assert codes[:3] == [200, 200, 200] and 429 in codes[3:]
    r = c.post("/v1/search", headers=ALICE, json={"q": "x"})
    assert r.status_code == 429 and int(r.headers["Retry-After"]) >= 1
    assert r.json()["error"]["code"] == "rate_limited"
    # Another key is not affected.
    assert c.post("/v1/search", headers=auth("aegis_sk_bob"), json={"q": "x"}).status_code == 200


def test_brute_force_is_stopped_before_key_lookup(limited_client, monkeypatch):
    c, s = limited_client
    for i in range(5):
        assert c.get("/v1/docs", headers=auth(f"aegis_sk_guess{i}")).status_code == 401
    lookups = []
    real = s.authenticate
    monkeypatch.setattr(s, "authenticate", lambda h: lookups.append(h) or real(h))
    r = c.get("/v1/docs", headers=auth("aegis_sk_guess-next"))
    assert r.status_code == 429 and "Retry-After" in r.headers
    r = c.get("/v1/docs", headers=ALICE)  # even a valid key, from this address, waits
    assert r.status_code == 429
    assert lookups == []


def test_cors_off_by_default_and_configurable(tmp_path, embedder, client):
    r = client.options(
        "/v1/search",
        headers={"Origin": "https://evil.example", "Access-Control-Request-Method": "POST"},
    )
    assert "access-control-allow-origin" not in r.headers
    s = make_service(tmp_path / "c", embedder, cors_origins="https://app.example")
    try:
        with TestClient(create_app(s)) as c:
            r = c.options(
                "/v1/search",
                headers={"Origin": "https://app.example", "Access-Control-Request-Method": "POST"},
            )
            assert r.headers["access-control-allow-origin"] == "https://app.example"
            r = c.options(
                "/v1/search",
                headers={"Origin": "https://evil.example", "Access-Control-Request-Method": "POST"},
            )
            assert r.headers.get("access-control-allow-origin") != "https://evil.example"
    finally:
        s.close()


def test_security_headers(client):
    r = client.get("/healthz")
    assert r.headers["x-content-type-options"] == "nosniff"
    assert r.headers["x-frame-options"] == "DENY"
    assert r.headers["x-request-id"]


def test_disk_full_is_a_clean_507(client, svc, monkeypatch):
    def full(*a, **k):
        if svc.settings.database_url:  # what the server says on a full disk (SQLSTATE 53100)
            import psycopg

            raise psycopg.errors.DiskFull("could not extend file: No space left on device")
        raise sqlite3.OperationalError("database or disk is full")

    before = stored_value(svc, "SELECT COUNT(*) FROM units")
    monkeypatch.setattr(svc.ingestor, "_write", full)
    r = client.post("/v1/ingest", headers=ALICE, json={"units": [{"text": "hello"}]})
    assert r.status_code == 507 and r.json()["error"]["code"] == "insufficient_storage"
    after = stored_value(svc, "SELECT COUNT(*) FROM units")
    assert after == before
