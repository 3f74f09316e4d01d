"""The engine harness: SeaweedFS and Valkey start from their wheels on loopback, with
credentials that are really required, and stop (SeaweedFS by kill: it ignores SIGTERM)."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from superchargedb.stack.seaweedfs import S3Endpoint, SeaweedFS
from superchargedb.stack.valkey import Valkey, ValkeyEndpoint
from superchargedb.storage.s3.client import make_client


def _port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def test_seaweedfs_serves_s3_with_its_credentials(seaweedfs: S3Endpoint, s3_prefix: str) -> None:
    c = make_client(seaweedfs.url, seaweedfs.access_key, seaweedfs.secret_key)
    key = s3_prefix + "hello"
    c.put_object(Bucket=seaweedfs.bucket, Key=key, Body=b"hello, object store")
    got = c.get_object(Bucket=seaweedfs.bucket, Key=key, Range="bytes=7-12")
    assert got["Body"].read() == b"object"
    listed = c.list_objects_v2(Bucket=seaweedfs.bucket, Prefix=s3_prefix)
    assert [o["Key"] for o in listed["Contents"]] == [key]
    assert seaweedfs.url.startswith("http://127.0.0.1:")
    wrong = make_client(seaweedfs.url, seaweedfs.access_key, "not-the-secret", max_attempts=1)
    with pytest.raises(Exception) as denied:
        wrong.get_object(Bucket=seaweedfs.bucket, Key=key)
    assert "SignatureDoesNotMatch" in str(denied.value) or "AccessDenied" in str(denied.value)


def test_valkey_requires_its_password(valkey: ValkeyEndpoint, valkey_prefix: str) -> None:
    import redis

    r = redis.Redis.from_url(valkey.url)
    r.set(valkey_prefix + "k", "v", ex=60)
    assert r.get(valkey_prefix + "k") == b"v"
    anon = redis.Redis(host=valkey.host, port=valkey.port)
    with pytest.raises(redis.AuthenticationError):
        anon.get(valkey_prefix + "k")
    # Never the source of truth: nothing is persisted.
    assert r.config_get("save")["save"] == "" and r.config_get("appendonly")["appendonly"] == "no"


def test_valkey_stops_and_frees_its_port(tmp_path: Path) -> None:
    v = Valkey(tmp_path / "vk")
    ep = v.start()
    assert v.started_in_s is not None and _port_open(ep.port)
    pid = v.proc.pid if v.proc else -1
    v.stop()
    assert not _port_open(ep.port)
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


@pytest.mark.slow
def test_a_second_seaweedfs_starts_beside_the_first_and_is_killed(
    seaweedfs: S3Endpoint, tmp_path: Path
) -> None:
    """Every port is picked (no default listener clashes with the session's instance), and
    stop() ends the whole process group although weed ignores SIGTERM."""
    w = SeaweedFS(tmp_path / "sw2", bucket="second")
    ep = w.start()
    try:
        assert ep.url != seaweedfs.url
        c = make_client(ep.url, ep.access_key, ep.secret_key)
        c.put_object(Bucket="second", Key="k", Body=b"x")
        assert c.get_object(Bucket="second", Key="k")["Body"].read() == b"x"
    finally:
        pgid = w.proc.pid if w.proc else -1
        w.stop()
    port = int(ep.url.rsplit(":", 1)[1])
    assert not _port_open(port)
    with pytest.raises(ProcessLookupError):
        os.killpg(pgid, 0)
