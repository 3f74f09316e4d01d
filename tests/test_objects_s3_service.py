"""The service's object tests, again, with the objects in S3 (a real SeaweedFS): the same
routes, rules and answers whether blobs are files or bucket objects (D-190).

The tests are the embedded suites' own functions (imported, so they cannot drift); this module's
autouse fixture points the settings at the bucket before their service fixtures build one, and
the last test checks that the blobs really went to the bucket.
"""

from __future__ import annotations

import secrets
from typing import Any

import test_hardening_objects as hardening
import test_objects as objects
from stack_engines import objects_in_bucket
from superchargedb.stack.seaweedfs import S3Endpoint
from superchargedb.storage.s3.objects import S3BlobStore

PREFIX = f"svc{secrets.token_hex(4)}/"
objects_in_s3 = objects_in_bucket(PREFIX)

server = hardening.server
http = hardening.http

_SUITES = {"objects": objects, "hardening": hardening}
# Embedded-only, each with its reason (none of them is about where the bytes are kept):
EMBEDDED_ONLY = {
    # a migration of an embedded catalog from an older schema: no service, no store
    "test_migration_keeps_existing_objects_and_pins_their_units",
}
for _name, _mod in _SUITES.items():
    for _attr in dir(_mod):
        if _attr.startswith("test_") and _attr not in EMBEDDED_ONLY:
            globals()[f"{_attr}__{_name}"] = getattr(_mod, _attr)


def test_zz_the_blobs_went_to_the_bucket(
    seaweedfs: S3Endpoint, svc: Any, client: Any, server: Any, s3_client: Any
) -> None:
    for s in (svc, server[0]):  # both suites' services
        assert isinstance(s.blobs, S3BlobStore) and s.blobs.prefix == PREFIX
    r = client.put(
        "/v1/objects/acme/alpha/backend/where.txt",
        headers={**objects.ALICE, "Content-Type": "text/plain"},
        content=b"these bytes live in the bucket",
    )
    assert r.status_code == 201, r.text
    sha = r.json()["sha256"]
    head = s3_client.head_object(Bucket=seaweedfs.bucket, Key=svc.blobs.key(sha))
    assert head["ContentLength"] == len(b"these bytes live in the bucket")
    assert r.json()["etag"] == f'"{sha}"'
    got = client.get("/v1/objects/acme/alpha/backend/where.txt", headers=objects.ALICE)
    assert got.headers["etag"] == f'"{sha}"'


def test_zz_the_doctor_asks_the_bucket(
    seaweedfs: S3Endpoint, svc: Any, client: Any, s3_client: Any
) -> None:
    r = client.put(
        "/v1/objects/acme/alpha/backend/doctor.txt",
        headers={**objects.ALICE, "Content-Type": "text/plain"},
        content=b"a blob the doctor looks for",
    )
    sha = r.json()["sha256"]
    local = svc.blobs.root / sha[:2] / sha[2:4] / sha
    local.unlink()  # a local copy is disposable: its absence is no loss
    report = svc.doctor()["objects"]
    assert report["ok"] and report["missing_blobs"] == []
    s3_client.delete_object(Bucket=seaweedfs.bucket, Key=svc.blobs.key(sha))  # lost in the bucket
    report = svc.doctor()["objects"]
    assert not report["ok"] and report["missing_blobs"] == [sha]
