"""Objects in S3 on a real SeaweedFS: the storage contract's object check, and the embedded
store's semantics kept (sha256 ETags even for multipart uploads, limits while streaming, no key
from user text, verified local copies, collection, a 503 when the store is down)."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from contract.backends import DIM, KEY, MODEL, Kind, sqlite_kind
from contract.checks import check_objects_range_and_etag
from superchargedb.errors import PayloadTooLargeError, UnavailableError, ValidationError
from superchargedb.stack.seaweedfs import S3Endpoint
from superchargedb.storage.s3 import objects as s3_objects
from superchargedb.storage.s3.client import make_client
from superchargedb.storage.s3.objects import S3BlobStore, S3Objects, check_prefix
from superchargedb.storage.sqlite.backend import SqliteBackend
from superchargedb.storage.sqlite.catalog import Catalog
from superchargedb.storage.sqlite.objects import FileBlobStore


@pytest.fixture
def store(s3_client: Any, seaweedfs: S3Endpoint, s3_prefix: str, s3_local: Path) -> S3BlobStore:
    return S3BlobStore(s3_client, seaweedfs.bucket, s3_local, prefix=s3_prefix)


def keys(s3_client: Any, bucket: str, prefix: str) -> list[str]:
    got = s3_client.list_objects_v2(Bucket=bucket, Prefix=prefix)
    return [o["Key"] for o in got.get("Contents", [])]


def test_the_contract_object_check_on_s3(
    s3_client: Any, seaweedfs: S3Endpoint, s3_prefix: str, tmp_path: Path
) -> None:
    """The contract suite's object check through a backend whose blobs live in the bucket."""
    base = sqlite_kind()

    def open_(path: Path) -> SqliteBackend:
        blobs = S3BlobStore(s3_client, seaweedfs.bucket, path / "objects", prefix=s3_prefix)
        return SqliteBackend.open(
            path,
            dim=DIM,
            model_id=MODEL,
            audit_key=KEY,
            blobs=blobs,
            objects=S3Objects(blobs),
        )

    kind = Kind("sqlite+s3", open_, base.peer, base.crash, base.close_peer)
    check_objects_range_and_etag(lambda: kind, tmp_path)
    stored = keys(s3_client, seaweedfs.bucket, s3_prefix)
    data = bytes(range(256)) * 40
    sha = hashlib.sha256(data).hexdigest()
    # One blob, named by its sha256 alone; the refused one never reached the bucket.
    assert stored == [f"{s3_prefix}blobs/{sha[:2]}/{sha[2:4]}/{sha}"]


def test_etag_is_our_sha256_even_for_a_multipart_upload(
    store: S3BlobStore, s3_client: Any, seaweedfs: S3Endpoint, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(s3_objects, "MULTIPART_BYTES", 5 * 1024 * 1024)
    monkeypatch.setattr(s3_objects, "PART_BYTES", 5 * 1024 * 1024)  # S3's smallest part
    data = os.urandom(6 * 1024 * 1024) + b"tail"  # over the threshold: two parts
    sha, size = store.put([data[i : i + 65536] for i in range(0, len(data), 65536)], len(data))
    assert sha == hashlib.sha256(data).hexdigest() and size == len(data)
    head = s3_client.head_object(Bucket=seaweedfs.bucket, Key=store.key(sha))
    assert head["ContentLength"] == len(data)
    # S3's own ETag for a multipart upload is a hash of the parts' MD5s: never what we serve.
    assert head["ETag"].strip('"').endswith("-2") and head["ETag"].strip('"') != sha
    info = S3Objects(store).info(sha)
    assert info is not None and info.etag == f'"{sha}"'
    assert S3Objects(store).read(sha, len(data) - 4) == b"tail"


def test_the_size_limit_stops_the_stream_and_keeps_nothing(
    store: S3BlobStore, s3_client: Any, seaweedfs: S3Endpoint, s3_prefix: str, s3_local: Path
) -> None:
    pulled = 0

    def endless() -> Iterator[bytes]:
        nonlocal pulled
        while True:
            pulled += 1
            yield b"z" * 1000

    with pytest.raises(PayloadTooLargeError):
        store.put(endless(), max_bytes=10_000)
    assert pulled == 11  # stopped at the first chunk past the limit, not at the end of the body
    assert keys(s3_client, seaweedfs.bucket, s3_prefix) == []
    assert list((s3_local / "tmp").iterdir()) == []


@pytest.mark.parametrize(
    "bad",
    [
        "../" * 10 + "etc/passwd",
        "..",
        "A" * 64,  # upper case: not our hex
        "0" * 63,
        "0" * 65,
        "0" * 62 + "/x",
        "0" * 64 + "\n",
        "%2e%2e" + "0" * 58,
        "",
    ],
)
def test_no_bucket_key_from_anything_but_a_sha256(store: S3BlobStore, bad: str) -> None:
    with pytest.raises(ValidationError):
        store.key(bad)
    with pytest.raises(ValidationError):
        store.path(bad)
    with pytest.raises(ValidationError):
        S3Objects(store).read(bad)


@pytest.mark.parametrize("bad", ["../x/", "a/../b/", "./", "/abs/", "a//b/", "a\\b/", "é/"])
def test_a_prefix_cannot_climb_or_smuggle(bad: str) -> None:
    with pytest.raises(ValidationError):
        check_prefix(bad)


def test_prefix_is_normalised() -> None:
    assert check_prefix("") == "" and check_prefix("team-a/prod") == "team-a/prod/"


def test_local_copies_are_verified_against_the_sha256(
    store: S3BlobStore, s3_client: Any, seaweedfs: S3Endpoint, tmp_path: Path
) -> None:
    data = b"the real bytes of a blob"
    sha, _ = store.put([data], 100)
    # Another process (its own local folder) reads it: downloaded, checked, kept.
    other = S3BlobStore(s3_client, seaweedfs.bucket, tmp_path / "other", prefix=store.prefix)
    assert other.path(sha).read_bytes() == data
    # Bytes in the bucket that are not the blob are never handed out as it.
    forged = b"forged content under the key"
    fsha = hashlib.sha256(b"what the key claims").hexdigest()
    s3_client.put_object(Bucket=seaweedfs.bucket, Key=store.key(fsha), Body=forged)
    with pytest.raises(UnavailableError):
        other.path(fsha)
    assert not FileBlobStore.path(other, fsha).exists()
    # A blob the bucket does not have is a missing file, as in the file store.
    assert not other.path("f" * 64).exists() and not other.exists("f" * 64)


def test_collect_removes_only_unreferenced_blobs_everywhere(
    store: S3BlobStore, tmp_path: Path
) -> None:
    cat = Catalog(tmp_path / "catalog.db", "NORMAL")
    try:
        kept, dropped = b"referenced by an object row", b"referenced by nothing"
        ksha, _ = store.put([kept], 100)
        dsha, _ = store.put([dropped], 100)
        with cat.write() as conn:
            conn.execute(
                "INSERT INTO objects(key, acl_owner, sha256, size, content_type, scope,"
                " acl_groups, created_by, created_at) VALUES (?,?,?,?,?,?,?,?,?)",
                ("acme/a.txt", "alice", ksha, len(kept), "text/plain", "acme", "[]", "alice", 1),
            )
        with cat.locked() as conn:
            assert store.collect(conn, ksha) is False
            assert store.collect(conn, dsha) is True
            assert store.collect(conn, dsha) is False  # already gone
        assert store.exists(ksha) and not store.exists(dsha)
        assert not FileBlobStore.path(store, dsha).exists()  # the local copy went too
    finally:
        cat.close()


def test_local_copies_stay_within_their_bound(
    s3_client: Any, seaweedfs: S3Endpoint, s3_prefix: str, s3_local: Path, monkeypatch
) -> None:
    monkeypatch.setattr(s3_objects, "KEEP_RECENT_S", 0.0)
    store = S3BlobStore(
        s3_client, seaweedfs.bucket, s3_local, prefix=s3_prefix, cache_max_bytes=8000
    )
    shas = [store.put([bytes([i]) * 1500], 10_000)[0] for i in range(12)]
    held = sum(p.stat().st_size for p in store._local_copies())
    assert held <= 8000
    # Evicted copies come back from the bucket, intact.
    for i, sha in enumerate(shas):
        assert store.path(sha).read_bytes() == bytes([i]) * 1500


def test_an_unreachable_store_is_a_503(s3_local: Path) -> None:
    from superchargedb.stack.ports import free_port

    dead = make_client(f"http://127.0.0.1:{free_port()}", "k", "s", timeout_s=1, max_attempts=1)
    store = S3BlobStore(dead, "scdb", s3_local)
    with pytest.raises(UnavailableError):
        store.check()
    with pytest.raises(UnavailableError):
        store.exists("0" * 64)
    with pytest.raises(UnavailableError):
        store.put([b"bytes"], 100)
    assert list((s3_local / "tmp").iterdir()) == []  # the staged upload was discarded


def test_the_start_up_sweep_removes_only_old_unreferenced_blobs(
    store: S3BlobStore, s3_client: Any, seaweedfs: S3Endpoint, s3_prefix: str
) -> None:
    import time

    kept, _ = store.put([b"a blob a catalog row names"], 100)
    orphan, _ = store.put([b"uploaded, then the process died before its row"], 100)
    stray = s3_prefix + "blobs/aa/bb/not-a-blob"  # not our layout: never touched
    s3_client.put_object(Bucket=seaweedfs.bucket, Key=stray, Body=b"x")
    # Too recent: another process may be uploading it right now.
    assert store.sweep_remote({kept}, before=time.time() - 600) == {"blobs": 0, "bytes": 0}
    assert store.exists(orphan)
    got = store.sweep_remote({kept}, before=time.time() + 60)
    assert got == {"blobs": 1, "bytes": len(b"uploaded, then the process died before its row")}
    assert store.exists(kept) and not store.exists(orphan)
    assert stray in keys(s3_client, seaweedfs.bucket, s3_prefix)
