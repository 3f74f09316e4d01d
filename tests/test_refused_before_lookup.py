"""A key whose principal has no rate-limit token left is refused before its lookup (D-288).

A flood within one key's limit made each of its refusals cost a catalog lookup and a thread
hop; now a key the server has seen is told to wait from its digest alone. What must still hold:
the refusal reaches only that key's principal, a key never seen (or a wrong one) is looked up
and gets its 401, and an accepted request is always looked up (a revoked key stops at once).
"""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from conftest import ALICE, auth, make_service
from superchargedb.api.app import create_app
from superchargedb.ratelimit import KeyOwners


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
        # The two accepted requests were looked up; they emptied the bucket, so each refusal
        # after them was told from the key's digest (on the old code: 6 lookups).
        assert len(lookups) == 2
        r = c.get("/v1/docs", headers=ALICE)
        assert r.status_code == 429 and r.json()["error"]["code"] == "rate_limited"
        assert int(r.headers["Retry-After"]) >= 1
        assert len(lookups) == 2


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


def test_a_revoked_key_is_refused_once_its_principal_may_send_again(svc, lookups) -> None:
    """The digest only ever refuses; whatever is accepted is looked up, so a revoked key is a
    401 as soon as its principal has a token again."""
    bob = auth("aegis_sk_bob")
    with TestClient(create_app(svc), client=("127.0.0.23", 1)) as c:
        assert [c.get("/v1/docs", headers=bob).status_code for _ in range(3)] == [200, 200, 429]
        who = svc.authenticate(bob["Authorization"])
        for k in svc.auth_store.principals.keys_of(who.id):
            svc.admin_revoke_key(svc.authenticate(ALICE["Authorization"]), k.key_id)
        # Bob's bucket refills, as time would refill it.
        svc.limiter._buckets.pop(f"key:{who.id}")  # type: ignore[attr-defined]
        n = len(lookups)
        assert c.get("/v1/docs", headers=bob).status_code == 401
        assert len(lookups) == n + 1


def test_key_owners_are_bounded_and_forget_the_oldest() -> None:
    owners = KeyOwners(max_keys=2)
    owners.remember("d1", "p1")
    owners.remember("d2", "p2")
    owners.remember("d1", "p1")  # refreshed: d2 is now the oldest
    owners.remember("d3", "p3")
    assert (owners.get("d1"), owners.get("d2"), owners.get("d3")) == ("p1", None, "p3")
