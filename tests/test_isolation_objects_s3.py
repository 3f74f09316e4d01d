"""The object isolation property, again, with the objects in S3 (a real SeaweedFS): the same
generated worlds of owners, groups and keys, the same oracle (see ``test_isolation_objects``)."""

from __future__ import annotations

import secrets
from typing import Any

import test_isolation_objects as isolation
from stack_engines import objects_in_bucket
from superchargedb.stack.seaweedfs import S3Endpoint

PREFIX = f"iso{secrets.token_hex(4)}/"
objects_in_s3 = objects_in_bucket(PREFIX)

live = isolation.live
test_object_isolation_property = isolation.test_object_isolation_property
test_object_isolation_property_quick = isolation.test_object_isolation_property_quick


def test_zz_the_worlds_blobs_went_to_the_bucket(
    live: Any, seaweedfs: S3Endpoint, s3_client: Any
) -> None:
    got = s3_client.list_objects_v2(Bucket=seaweedfs.bucket, Prefix=PREFIX + "blobs/")
    assert got.get("KeyCount", 0) > 0
