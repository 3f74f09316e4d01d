"""The server's transport: request-head deadline and forwarded headers (hardening, class 5).

Real servers on loopback ports. Linux routes all of 127.0.0.0/8 to the loopback interface, so a
client socket bound to 127.0.0.3 reaches the server from a distinct peer address.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from typing import Any

import pytest

from conftest import LiveServer, make_service

FAILS = 3  # failed authentications per address before the lockout


def request(port: int, source: str, key: str, forwarded: str | None = None) -> int:
    """GET /v1/docs from ``source`` (a loopback address) on a fresh connection: the status."""
    with socket.socket() as s:
        s.bind((source, 0))
        s.settimeout(10)
        s.connect(("127.0.0.1", port))
        extra = f"X-Forwarded-For: {forwarded}\r\n" if forwarded else ""
        s.sendall(
            (
                f"GET /v1/docs HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer {key}\r\n"
                f"Connection: close\r\n{extra}\r\n"
            ).encode()
        )
        return int(s.recv(64).split(b" ", 2)[1])


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory, embedder: Any) -> Iterator[dict[str, Any]]:
    from superchargedb.demo import seed_principals

    common = {"rate_auth_fail_per_min": float(FAILS), "header_timeout_s": 1.0}
    plain = make_service(tmp_path_factory.mktemp("plain") / "d", embedder, **common)
    proxied = make_service(
        tmp_path_factory.mktemp("proxied") / "d",
        embedder,
        trusted_proxies="127.0.0.1",
        **common,
    )
    for svc in (plain, proxied):
        seed_principals(svc)
    try:
        with LiveServer(plain) as a, LiveServer(proxied) as b:
            yield {"plain": a, "proxied": b}
    finally:
        plain.close()
        proxied.close()


def test_forwarded_for_from_an_untrusted_peer_is_ignored(servers):
    """Default (no trusted proxies): a local client cannot pick the address its failures count
    against, so it can neither lock out a chosen address nor escape its own lockout."""
    port = servers["plain"].port
    for i in range(FAILS + 2):  # bad keys "from" the victim's address, rotating doesn't help
        assert request(port, "127.0.0.1", "aegis_sk_wrong", forwarded="127.0.0.3") in (401, 429)
        request(port, "127.0.0.1", "aegis_sk_wrong", forwarded=f"198.51.100.{i}")
    # The victim at 127.0.0.3 is not locked out ...
    assert request(port, "127.0.0.3", "aegis_sk_alice") == 200
    # ... the attacker's real address is, whatever it forwards.
    assert request(port, "127.0.0.1", "aegis_sk_wrong", forwarded="203.0.113.9") == 429


def test_forwarded_for_from_a_configured_proxy_is_honoured(servers):
    """With SCDB_TRUSTED_PROXIES=127.0.0.1 the proxy's X-Forwarded-For names the client: the
    lockout lands on that client, not on the proxy (nor on the proxy's other clients)."""
    port = servers["proxied"].port
    for _ in range(FAILS + 1):
        request(port, "127.0.0.1", "aegis_sk_wrong", forwarded="127.0.0.5")
    assert request(port, "127.0.0.5", "aegis_sk_alice") == 429  # the forwarded client
    assert request(port, "127.0.0.1", "aegis_sk_alice", forwarded="127.0.0.6") == 200
    # A peer that is not the proxy forwards nothing: 127.0.0.4 is judged as itself.
    assert request(port, "127.0.0.4", "aegis_sk_alice", forwarded="127.0.0.5") == 200


def test_a_request_head_that_never_completes_is_cut_off(servers):
    srv = servers["plain"]
    with socket.create_connection(("127.0.0.1", srv.port), timeout=10) as s:
        s.sendall(b"GET /v1/docs HTTP/1.1\r\nHost: t\r\nAuthor")  # ... and nothing more
        started = time.monotonic()
        try:
            end = s.recv(1024)
        except ConnectionResetError:
            end = b""
        assert end == b"" and time.monotonic() - started < 5
    with socket.create_connection(("127.0.0.1", srv.port), timeout=10) as s:
        started = time.monotonic()  # a connection that sends nothing at all
        try:
            end = s.recv(1024)
        except ConnectionResetError:
            end = b""
        assert end == b"" and time.monotonic() - started < 5
