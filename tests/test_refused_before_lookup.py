"""A key refused by its principal's bucket is refused again before its lookup (D-288).

A flood within one key's limit made each of its refusals cost a catalog lookup and a thread
hop; now the first refusal is remembered by the key's digest for the wait the bucket gave, and
until then the key is told to wait from memory. What must still hold: only that key is
refused so, a key never seen (or a wrong one) is looked up and gets its 401, and once the wait
is over the key is looked up again (a revoked key stops then).
"""

from __future__ import annotations

import time

import pytest
from fastapi.testclient import TestClient

from conftest import ALICE, auth, make_service
from superchargedb.api.app import create_app
from superchargedb.ratelimit import RefusedKeys


@pytest.fixture
def svc(tmp_path, embedder):
    from superchargedb.demo import seed_principals

    svc = make_service(
        tmp_path / "d",
        embedder,
        rate_key_rps=0.01,  # no token comes back during the test
        rate_key_burst=2,
        rate_ip_rps=1000,
        rate_ip_burst=1000,
        rate_refusal_hold_s=0,
    )
    seed_principals(svc)
    yield svc
    svc.close()


@pytest.fixture
def lookups(svc, monkeypatch):
    """The keys the catalog is asked for, in order."""
    seen: list[str | None] = []
    real = svc.authenticate

    def counting(authorization: str | None):
        seen.append(authorization)
        return real(authorization)

    monkeypatch.setattr(svc, "authenticate", counting)
    return seen


def test_an_exhausted_key_is_refused_without_a_lookup(svc, lookups) -> None:
    with TestClient(create_app(svc), client=("127.0.0.21", 1)) as c:
        statuses = [c.get("/v1/docs", headers=ALICE).status_code for _ in range(6)]
        assert statuses == [200, 200, 429, 429, 429, 429]
        # The two accepted requests and the first refusal were looked up; each refusal after
        # it was told from the key's digest (on the old code: 6 lookups).
        assert len(lookups) == 3
        r = c.get("/v1/docs", headers=ALICE)
        assert r.status_code == 429 and r.json()["error"]["code"] == "rate_limited"
        assert int(r.headers["Retry-After"]) >= 1
        assert len(lookups) == 3


def test_other_keys_and_unknown_keys_are_still_looked_up(svc, lookups) -> None:
    with TestClient(create_app(svc), client=("127.0.0.22", 1)) as c:
        for _ in range(4):
            c.get("/v1/docs", headers=ALICE)
        n = len(lookups)
        # Another principal's key has its own bucket: looked up and answered.
        assert c.get("/v1/docs", headers=auth("aegis_sk_bob")).status_code == 200
        # A key one character off alice's is unknown: looked up, 401, never her 429.
        forged = auth("aegis_sk_alicf")
        assert c.get("/v1/docs", headers=forged).status_code == 401
        assert len(lookups) == n + 2


def test_a_revoked_key_is_refused_once_its_wait_is_over(tmp_path, embedder) -> None:
    """Memory only ever refuses, and only for the bucket's wait: then the key is looked up
    again, so a key revoked meanwhile is a 401."""
    from superchargedb.demo import seed_principals

    svc = make_service(
        tmp_path / "r",
        embedder,
        rate_key_rps=5.0,  # one token every 0.2 s
        rate_key_burst=2,
        rate_ip_rps=1000,
        rate_ip_burst=1000,
        rate_refusal_hold_s=0,
    )
    seed_principals(svc)
    bob = auth("aegis_sk_bob")
    try:
        with TestClient(create_app(svc), client=("127.0.0.23", 1)) as c:
            assert [c.get("/v1/docs", headers=bob).status_code for _ in range(3)] == [
                200,
                200,
                429,
            ]
            who = svc.authenticate(bob["Authorization"])
            admin = svc.authenticate(ALICE["Authorization"])
            for k in svc.auth_store.principals.keys_of(who.id):
                svc.admin_revoke_key(admin, k.key_id)
            time.sleep(0.25)  # the bucket's wait is over
            assert c.get("/v1/docs", headers=bob).status_code == 401
    finally:
        svc.close()


def test_refused_keys_expire_and_are_bounded() -> None:
    keys = RefusedKeys(max_keys=2)
    assert keys.wait("d1") == 0.0
    keys.refuse("d1", 60)
    keys.refuse("d2", 60)
    keys.refuse("d1", 60)  # refreshed: d2 is now the oldest
    keys.refuse("d3", 60)
    assert keys.wait("d1") > 59 and keys.wait("d2") == 0.0 and keys.wait("d3") > 59
    keys.refuse("d4", 0.01)
    time.sleep(0.02)
    assert keys.wait("d4") == 0.0
    keys.refuse("d5", float("inf"))  # a zero rate is not remembered
    assert keys.wait("d5") == 0.0
