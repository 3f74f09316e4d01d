"""The object isolation property, again, with the objects in S3 (a real SeaweedFS): the same
generated worlds of owners, groups and keys, the same oracle (see ``test_isolation_objects``)."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from typing import Any

import pytest

import test_isolation_objects as isolation
from superchargedb.stack.seaweedfs import S3Endpoint
from superchargedb.storage.s3.client import make_client

PREFIX = f"iso{secrets.token_hex(4)}/"


@pytest.fixture(scope="module", autouse=True)
def objects_in_s3(seaweedfs: S3Endpoint) -> Iterator[S3Endpoint]:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SCDB_S3_ENDPOINT_URL", seaweedfs.url)
        mp.setenv("SCDB_S3_BUCKET", seaweedfs.bucket)
        mp.setenv("SCDB_S3_PREFIX", PREFIX)
        mp.setenv("SCDB_S3_ACCESS_KEY", seaweedfs.access_key)
        mp.setenv("SCDB_S3_SECRET_KEY", seaweedfs.secret_key)
        yield seaweedfs


live = isolation.live
test_object_isolation_property = isolation.test_object_isolation_property
test_object_isolation_property_quick = isolation.test_object_isolation_property_quick


def test_zz_the_worlds_blobs_went_to_the_bucket(live: Any, seaweedfs: S3Endpoint) -> None:
    s3 = make_client(seaweedfs.url, seaweedfs.access_key, seaweedfs.secret_key)
    got = s3.list_objects_v2(Bucket=seaweedfs.bucket, Prefix=PREFIX + "blobs/")
    assert got.get("KeyCount", 0) > 0
