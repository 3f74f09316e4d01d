"""One boto3 S3 client per endpoint, configured for S3-compatible stores.

Path-style addressing (``http://host:port/bucket/key``): S3-compatible servers on a bare host or
loopback have no per-bucket DNS names. Retries are boto3's standard mode with a small budget, so
an outage fails a request in seconds instead of hanging it.
"""

from __future__ import annotations

from typing import Any


def make_client(
    url: str,
    access_key: str | None,
    secret_key: str | None,
    region: str = "us-east-1",
    *,
    timeout_s: float = 30.0,
    max_attempts: int = 3,
) -> Any:
    """A boto3 S3 client for ``url`` (boto3 is imported here: only the S3 backend needs it)."""
    import boto3
    from botocore.config import Config

    return boto3.session.Session().client(
        "s3",
        endpoint_url=url,
        aws_access_key_id=access_key,
        aws_secret_access_key=secret_key,
        region_name=region,
        config=Config(
            s3={"addressing_style": "path"},
            signature_version="s3v4",
            connect_timeout=min(timeout_s, 10.0),
            read_timeout=timeout_s,
            retries={"mode": "standard", "max_attempts": max_attempts},
            # Only what a request needs is checksummed: newer boto3 adds CRC trailers by default,
            # which not every S3-compatible server accepts.
            request_checksum_calculation="when_required",
            response_checksum_validation="when_required",
        ),
    )
