"""Rate limits in the shared store: a real redis-server, two app instances sharing its buckets.

Two Services over two data dirs (the second a copy of the first, so both know the same principals
and keys, as replicas of one catalog would) and two TestClients stand for two server processes.
"""

from __future__ import annotations

import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from conftest import ALICE, BACKEND, BOB, auth, free_port, make_service
from superchargedb.api.app import create_app
from superchargedb.ratelimit import RedisLimiter


class RedisServer:
    def __init__(self) -> None:
        exe = shutil.which("redis-server")
        if exe is None:
            pytest.fail(
                "redis-server is not installed: run `make setup` (scripts/setup.sh installs it; "
                "CI does the same)"
            )
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.proc = subprocess.Popen(
            [
                exe,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.STDOUT,
        )
        import redis

        self.client = redis.Redis.from_url(self.url)
        deadline = time.monotonic() + 15
        while True:
            try:
                self.client.ping()
                return
            except redis.ConnectionError:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    self.stop()
                    raise RuntimeError("redis-server did not start") from None
                time.sleep(0.05)

    def stop(self) -> None:
        self.client.close()
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=10)


@pytest.fixture(scope="module")
def redis_server() -> Iterator[RedisServer]:
    srv = RedisServer()
    yield srv
    srv.stop()


@pytest.fixture
def two_instances(tmp_path: Path, embedder, redis_server) -> Iterator[Any]:
    """Yields a factory: limits -> (client A, client B, service A, service B)."""
    from superchargedb.demo import seed_principals

    opened: list[Any] = []

    def make(**limits: Any) -> tuple[TestClient, TestClient, Any, Any]:
        tag = uuid.uuid4().hex[:8]
        a_dir, b_dir = tmp_path / f"a-{tag}", tmp_path / f"b-{tag}"
        first = make_service(a_dir, embedder)
        seed_principals(first)
        first.close()
        shutil.copytree(a_dir, b_dir)
        settings = {"redis_url": redis_server.url, "redis_prefix": f"t{tag}:", **limits}
        if BACKEND == "postgres":  # two processes of a server stack share one database
            import pg_stack

            settings["database_url"] = pg_stack.database(a_dir)
        sa = make_service(a_dir, embedder, **settings)
        sb = make_service(b_dir, embedder, **settings)
        ca = TestClient(create_app(sa), raise_server_exceptions=False).__enter__()
        cb = TestClient(create_app(sb), raise_server_exceptions=False).__enter__()
        opened.extend([(ca, sa), (cb, sb)])
        return ca, cb, sa, sb

    yield make
    for c, s in opened:
        c.__exit__(None, None, None)
        s.close()


def test_instances_use_the_shared_store(two_instances):
    _, _, sa, sb = two_instances(rate_key_rps=1, rate_key_burst=3)
    assert isinstance(sa.limiter, RedisLimiter) and isinstance(sb.limiter, RedisLimiter)


def test_per_key_bucket_is_shared_between_instances(two_instances, redis_server):
    ca, cb, _, _ = two_instances(
        rate_key_rps=0.2, rate_key_burst=3, rate_ip_rps=1000, rate_ip_burst=1000
    )
    for _ in range(3):  # the whole burst, spent on instance A
        assert ca.post("/v1/search", headers=ALICE, json={"q": "failover"}).status_code == 200
    r = cb.post("/v1/search", headers=ALICE, json={"q": "failover"})  # instance B
    assert r.status_code == 429, r.text
    assert r.json()["error"]["code"] == "rate_limited"
    assert int(r.headers["Retry-After"]) >= 1
    # Another key has its own bucket, on either instance.
    assert cb.post("/v1/search", headers=BOB, json={"q": "failover"}).status_code == 200
    # Buckets expire once they would be full again: Redis memory stays bounded.
    keys = redis_server.client.keys(f"{ca.app.state.svc.settings.redis_prefix}*")
    assert keys
    for k in keys:
        ttl_ms = redis_server.client.pttl(k)
        assert 0 < ttl_ms <= (3 / 0.2) * 1000 + 1000


def test_per_address_limit_before_key_lookup_across_instances(two_instances, monkeypatch):
    ca, cb, _, sb = two_instances(
        rate_key_rps=1000,
        rate_key_burst=1000,
        rate_ip_rps=1000,
        rate_ip_burst=1000,
        rate_auth_fail_per_min=4,
    )
    for i in range(4):  # failed authentications on instance A drain the address's bucket
        assert ca.get("/v1/docs", headers=auth(f"aegis_sk_guess{i}")).status_code == 401
    lookups: list[Any] = []
    real = sb.authenticate
    monkeypatch.setattr(sb, "authenticate", lambda h: lookups.append(h) or real(h))
    r = cb.get("/v1/docs", headers=auth("aegis_sk_guess-next"))  # instance B refuses it
    assert r.status_code == 429 and int(r.headers["Retry-After"]) >= 1
    assert cb.get("/v1/docs", headers=ALICE).status_code == 429  # even a valid key waits
    assert lookups == []  # no key was looked up on B


def test_per_address_request_limit_is_shared(two_instances, monkeypatch):
    ca, cb, _, sb = two_instances(
        rate_key_rps=1000, rate_key_burst=1000, rate_ip_rps=0.2, rate_ip_burst=4
    )
    codes = [ca.get("/v1/docs", headers=ALICE).status_code for _ in range(4)]
    assert codes == [200] * 4
    lookups: list[Any] = []
    real = sb.authenticate
    monkeypatch.setattr(sb, "authenticate", lambda h: lookups.append(h) or real(h))
    r = cb.get("/v1/docs", headers=BOB)
    assert r.status_code == 429 and "per client" in r.json()["error"]["message"]
    assert int(r.headers["Retry-After"]) >= 1
    assert lookups == []


def test_unreachable_store_fails_closed(tmp_path, embedder):
    from superchargedb.demo import seed_principals

    srv = RedisServer()
    s = make_service(tmp_path / "d", embedder, redis_url=srv.url, rate_key_rps=10, rate_ip_rps=10)
    seed_principals(s)
    try:
        with TestClient(create_app(s), raise_server_exceptions=False) as c:
            assert c.post("/v1/search", headers=ALICE, json={"q": "x"}).status_code == 200
            srv.stop()
            r = c.post("/v1/search", headers=ALICE, json={"q": "x"})
            assert r.status_code == 503, r.text
            assert r.json()["error"]["code"] == "unavailable"
            assert r.headers["Retry-After"] == "1"
    finally:
        srv.stop()
        s.close()
