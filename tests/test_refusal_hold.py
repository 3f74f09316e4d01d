"""Held refusals (D-283): a client that keeps sending after a 429 gets its next 429s late.

The policy (``admission.RefusalHold``) on a fake clock, then through the real app: a closed-loop
client past its key's rate limit has each further 429 held, while a client that waits as
Retry-After says, and another address, are answered at once.
"""

from __future__ import annotations

import time

import pytest
from fastapi.testclient import TestClient

from conftest import ALICE, auth, make_service
from superchargedb.admission import RefusalHold
from superchargedb.api.app import create_app


def test_the_first_refusals_are_free_then_each_is_held() -> None:
    hold = RefusalHold(hold_s=1.0, free_per_s=2.0)  # a bucket of 4, refilled at 2 a second
    assert [hold.delay("a", now=0.0) for _ in range(4)] == [0.0] * 4
    assert hold.delay("a", now=0.0) == 1.0
    assert hold.delay("b", now=0.0) == 0.0  # each client has its own bucket
    assert hold.delay("a", now=0.5) == 0.0  # one refusal earned back in half a second
    assert hold.delay("a", now=0.5) == 1.0
    assert hold.held == 2


def test_a_client_that_backs_off_is_never_held() -> None:
    hold = RefusalHold(hold_s=1.0, free_per_s=1.0)
    assert all(hold.delay("a", now=float(t)) == 0.0 for t in range(100))  # one a second
    assert hold.held == 0


def test_zero_hold_answers_every_refusal_at_once() -> None:
    hold = RefusalHold(hold_s=0.0, free_per_s=0.0)
    assert {hold.delay("a", now=0.0) for _ in range(50)} == {0.0}


def test_the_clients_remembered_are_bounded() -> None:
    hold = RefusalHold(hold_s=1.0, free_per_s=0.5, max_clients=3)
    for who in "abcd":
        hold.delay(who, now=0.0)
    assert hold.delay("a", now=0.0) == 0.0  # "a" was forgotten: a fresh bucket
    assert len(hold._buckets) == 3


@pytest.fixture
def held(tmp_path, embedder):
    from superchargedb.demo import seed_principals

    svc = make_service(
        tmp_path / "d",
        embedder,
        rate_key_rps=1.0,
        rate_key_burst=2,
        rate_ip_rps=1000,
        rate_ip_burst=1000,
        rate_refusal_hold_s=0.4,
        rate_refusals_free_per_s=1.0,  # 2 refusals at once, then one a second
    )
    seed_principals(svc)
    yield svc
    svc.close()


def timed(c: TestClient, headers: dict[str, str]) -> tuple[int, float, dict[str, object]]:
    t0 = time.perf_counter()
    r = c.get("/v1/docs", headers=headers)
    return r.status_code, time.perf_counter() - t0, r.json()


def test_a_client_hammering_past_its_limit_gets_held_429s(held) -> None:
    app = create_app(held)
    with TestClient(app, client=("127.0.0.7", 1)) as c:
        seen = [timed(c, ALICE) for _ in range(6)]
        assert [st for st, _, _ in seen] == [200, 200, 429, 429, 429, 429]
        assert all(s < 0.4 for _, s, _ in seen[2:4])  # the free refusals come at once
        assert all(s >= 0.4 for _, s, _ in seen[4:])  # then each one is held
        assert all(b["error"]["code"] == "rate_limited" for _, _, b in seen[2:])  # type: ignore[index]
        r = c.get("/v1/docs", headers=ALICE)
        assert r.status_code == 429 and int(r.headers["Retry-After"]) >= 1
    # Another address (with another key, whose own bucket is full) is answered at once, and
    # its refusals, once it has some, start free as well.
    with TestClient(app, client=("127.0.0.8", 1)) as c:
        bob = auth("aegis_sk_bob")
        seen = [timed(c, bob) for _ in range(4)]
        assert [st for st, _, _ in seen] == [200, 200, 429, 429]
        assert all(s < 0.4 for _, s, _ in seen)


def test_a_client_that_waits_as_told_is_answered_at_once(held) -> None:
    with TestClient(create_app(held), client=("127.0.0.9", 1)) as c:
        assert [timed(c, ALICE)[0] for _ in range(3)] == [200, 200, 429]
        for _ in range(4):  # each time it waits Retry-After, then tries twice: one refusal a second
            time.sleep(1.05)
            (ok, _, _), (no, took, _) = timed(c, ALICE), timed(c, ALICE)
            assert (ok, no) == (200, 429) and took < 0.4
