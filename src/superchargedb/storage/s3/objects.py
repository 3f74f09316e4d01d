"""Blobs in an S3 bucket, with the embedded store's semantics (D-190).

The bucket key of a blob is derived from its sha256 alone (``<prefix>blobs/aa/bb/<sha256>``,
the sha checked as 64 hex digits first), so no user text ever names an S3 key (D-47). The
sha256 is the project's own, computed while the upload streams to a local temp file under the
size limit; S3's ETag (an MD5, or a hash of part hashes for a multipart upload) is never used.
A blob is uploaded only once its whole body has been received and hashed, so a refused or
broken upload leaves nothing in the bucket.

:class:`S3BlobStore` is the service's blob store (the :class:`FileBlobStore` interface: the
request paths stage, commit and collect under the catalog write lock, and read blobs as local
files, which media derivation needs). Its ``root`` holds upload temp files and a bounded cache
of local copies, each verified against its sha256 when downloaded. :class:`S3Objects` is the
storage seam's :class:`~superchargedb.storage.protocols.ObjectStore` over it (ranged GETs, no
local copy).
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import re
import tempfile
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ...errors import UnavailableError, ValidationError
from ..protocols import BlobInfo
from ..sqlite.objects import FileBlobStore, Staged

log = logging.getLogger(__name__)

_SHA = re.compile(r"[0-9a-f]{64}")
_PREFIX = re.compile(r"([A-Za-z0-9_][A-Za-z0-9._-]{0,62}/){0,8}")
# One PUT up to here; larger blobs go up in parts (S3's single PUT tops out at 5 GiB).
MULTIPART_BYTES = 64 * 1024 * 1024
PART_BYTES = 16 * 1024 * 1024  # S3's smallest part is 5 MiB
# A local copy handed out this recently is never evicted: its caller may not have opened it yet.
KEEP_RECENT_S = 120.0


def check_prefix(prefix: str) -> str:
    """The bucket prefix setting: empty, or '/'-terminated plain segments (no '..')."""
    if prefix and not prefix.endswith("/"):
        prefix += "/"
    if not _PREFIX.fullmatch(prefix) or any(p in (".", "..") for p in prefix.split("/")):
        raise ValidationError(f"invalid S3 key prefix {prefix!r}", field="s3_prefix")
    return prefix


def _check_sha(sha256: str) -> str:
    if not isinstance(sha256, str) or not _SHA.fullmatch(sha256):
        raise ValidationError("invalid blob id")
    return sha256


def _code(exc: Exception) -> str:
    resp: Any = getattr(exc, "response", None) or {}
    return str(resp.get("Error", {}).get("Code", ""))


# Answers the caller handles itself; any other failure of the store is a 503.
_PASS = ("404", "NoSuchKey", "NotFound", "InvalidRange")


@contextlib.contextmanager
def _s3_errors(what: str) -> Any:
    """An unreachable or failing store is a 503, never a 500 or a hang."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        yield
    except ClientError as exc:
        if _code(exc) in _PASS:
            raise
        raise UnavailableError(f"the object store failed to {what}: {_code(exc)}") from exc
    except BotoCoreError as exc:
        raise UnavailableError(f"the object store is unreachable ({what})") from exc


class S3BlobStore(FileBlobStore):
    def __init__(
        self,
        client: Any,
        bucket: str,
        local_root: Path,
        *,
        prefix: str = "",
        cache_max_bytes: int = 1024 * 1024 * 1024,
    ) -> None:
        super().__init__(local_root)  # root/tmp: upload temp files; root/aa/bb: local copies
        self.client = client
        self.bucket = bucket
        self.prefix = check_prefix(prefix)
        self.cache_max_bytes = cache_max_bytes
        self._cache_lock = threading.Lock()
        self._cached = sum(p.stat().st_size for p in self._local_copies())

    def check(self) -> None:
        """Fail at start-up, naming the setting, when the bucket cannot be reached."""
        try:
            with _s3_errors("open the bucket"):
                self.client.head_bucket(Bucket=self.bucket)
        except Exception as exc:
            raise UnavailableError(
                f"the S3 bucket {self.bucket!r} (SCDB_S3_BUCKET) is not reachable: {exc}"
            ) from exc

    def key(self, sha256: str) -> str:
        """The bucket key of a blob: from the checked sha256 alone."""
        s = _check_sha(sha256)
        return f"{self.prefix}blobs/{s[:2]}/{s[2:4]}/{s}"

    # -- the bucket ------------------------------------------------------------------------
    def remote_size(self, sha256: str) -> int | None:
        """The stored blob's size, None when the bucket has no such blob."""
        from botocore.exceptions import ClientError

        key = self.key(sha256)
        try:
            with _s3_errors("look up a blob"):
                head = self.client.head_object(Bucket=self.bucket, Key=key)
        except ClientError:  # only a 404 gets here (_s3_errors)
            return None
        return int(head["ContentLength"])

    def exists(self, sha256: str) -> bool:
        # The bucket decides, not the local copy: a collected blob is gone for every process.
        return self.remote_size(sha256) is not None

    def commit(self, staged: Staged) -> None:
        """Upload a staged blob under its sha256 (identical content already stored: nothing to
        do); the staged file then becomes the local copy. Called under the catalog write lock,
        as for files, so a de-duplicating PUT never interleaves with the blob's collection."""
        key = self.key(staged.sha256)
        if self.remote_size(staged.sha256) is None:
            from boto3.s3.transfer import TransferConfig

            meta = {"Metadata": {"sha256": staged.sha256}}
            with _s3_errors("store a blob"):
                if staged.size <= MULTIPART_BYTES:
                    with open(staged.tmp, "rb") as f:
                        self.client.put_object(
                            Bucket=self.bucket, Key=key, Body=f, ContentLength=staged.size, **meta
                        )
                else:
                    cfg = TransferConfig(
                        multipart_threshold=MULTIPART_BYTES, multipart_chunksize=PART_BYTES
                    )
                    self.client.upload_file(
                        str(staged.tmp), self.bucket, key, ExtraArgs=meta, Config=cfg
                    )
        self._keep_local(staged.tmp, staged.sha256, staged.size)

    def path(self, sha256: str) -> Path:
        """A local file with the blob's bytes (downloaded and verified on first use); a path
        that does not exist when the bucket has no such blob, as for the file store."""
        local = super().path(sha256)
        if local.is_file():
            with contextlib.suppress(FileNotFoundError):
                os.utime(local)  # recently used: kept by the eviction (KEEP_RECENT_S)
                return local
        self._download(sha256, local)
        return local

    def _download(self, sha256: str, local: Path) -> None:
        from botocore.exceptions import ClientError

        fd, tmp = tempfile.mkstemp(dir=self.root / "tmp")
        h, size = hashlib.sha256(), 0
        try:
            with os.fdopen(fd, "wb") as f:
                try:
                    with _s3_errors("read a blob"):
                        body = self.client.get_object(Bucket=self.bucket, Key=self.key(sha256))
                        for chunk in body["Body"].iter_chunks(1024 * 1024):
                            h.update(chunk)
                            size += len(chunk)
                            f.write(chunk)
                except ClientError:  # 404: no such blob
                    return
            if h.hexdigest() != sha256:  # never hand out bytes that are not the blob
                raise UnavailableError(f"the object store returned corrupt bytes for {sha256}")
            self._keep_local(Path(tmp), sha256, size, needed=True)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)

    def remove(self, sha256: str) -> bool:
        if self.remote_size(sha256) is None:
            return False
        with _s3_errors("remove a blob"):
            self.client.delete_object(Bucket=self.bucket, Key=self.key(sha256))
        self._drop_local(sha256)
        return True

    def sweep_remote(self, refs: set[str], before: float) -> dict[str, int]:
        """Delete bucket blobs under this prefix that nothing references and that were last
        written before ``before`` (epoch s): what a crash between an upload and its catalog row
        left. Another process sharing the bucket may be uploading now, so the caller passes a
        time its uploads cannot predate (``ORPHAN_GRACE_S`` ago), never "now"."""
        removed = {"blobs": 0, "bytes": 0}
        pages = self.client.get_paginator("list_objects_v2")
        with _s3_errors("list the bucket"):
            for page in pages.paginate(Bucket=self.bucket, Prefix=self.prefix + "blobs/"):
                for o in page.get("Contents", []):
                    name = str(o["Key"]).rsplit("/", 1)[-1]
                    if not _SHA.fullmatch(name) or o["Key"] != self.key(name) or name in refs:
                        continue
                    if o["LastModified"].timestamp() >= before:
                        continue
                    self.client.delete_object(Bucket=self.bucket, Key=o["Key"])
                    self._drop_local(name)
                    removed["blobs"] += 1
                    removed["bytes"] += int(o["Size"])
        return removed

    # -- local copies ------------------------------------------------------------------------
    def _keep_local(self, tmp: Path, sha256: str, size: int, needed: bool = False) -> None:
        """Make ``tmp`` the local copy. An upload's copy is kept only when it fits the cache
        (else its temp file goes with the caller's discard); a download's is ``needed`` by the
        caller, kept regardless, and evicted once it is no longer recent."""
        if not needed and (self.cache_max_bytes <= 0 or size > self.cache_max_bytes // 4):
            return
        final = FileBlobStore.path(self, sha256)
        final.parent.mkdir(parents=True, exist_ok=True)
        if final.exists():
            return
        os.replace(tmp, final)
        with self._cache_lock:
            self._cached += size
            over = self._cached > self.cache_max_bytes
        if over:
            self._evict()

    def _drop_local(self, sha256: str) -> None:
        local = FileBlobStore.path(self, sha256)
        with contextlib.suppress(FileNotFoundError):
            size = local.stat().st_size
            local.unlink()
            with self._cache_lock:
                self._cached -= size

    def _local_copies(self) -> list[Path]:
        return [
            p
            for d1 in self.root.iterdir()
            if len(d1.name) == 2 and d1.is_dir()
            for d2 in d1.iterdir()
            if d2.is_dir()
            for p in d2.iterdir()
            if _SHA.fullmatch(p.name)
        ]

    def _evict(self) -> None:
        """Drop the least recently used copies down to 3/4 of the bound."""
        with self._cache_lock:
            copies = []
            for p in self._local_copies():
                with contextlib.suppress(FileNotFoundError):
                    st = p.stat()
                    copies.append((st.st_mtime, st.st_size, p))
            total = sum(c[1] for c in copies)
            cutoff = time.time() - KEEP_RECENT_S
            for mtime, size, p in sorted(copies):
                if total <= self.cache_max_bytes * 3 // 4 or mtime > cutoff:
                    break
                with contextlib.suppress(FileNotFoundError):
                    p.unlink()
                    total -= size
            self._cached = total


class S3Objects:
    """The seam's ``ObjectStore`` over a bucket: ranged GETs straight from S3."""

    def __init__(self, blobs: S3BlobStore) -> None:
        self.blobs = blobs

    def put(self, chunks: Iterable[bytes], max_bytes: int) -> BlobInfo:
        sha, size = self.blobs.put(chunks, max_bytes)  # 413 past max_bytes, nothing uploaded
        return BlobInfo(sha, size)

    def read(self, sha256: str, start: int = 0, end: int | None = None) -> bytes:
        if start < 0 or (end is not None and end <= start):
            return b""
        from botocore.exceptions import ClientError

        rng = f"bytes={start}-" if end is None else f"bytes={start}-{end - 1}"
        b = self.blobs
        try:
            with _s3_errors("read a blob"):
                got = b.client.get_object(Bucket=b.bucket, Key=b.key(sha256), Range=rng)
                return bytes(got["Body"].read())
        except ClientError as exc:
            if _code(exc) == "InvalidRange":  # start at or past the end
                return b""
            raise FileNotFoundError(sha256) from exc

    def info(self, sha256: str) -> BlobInfo | None:
        size = self.blobs.remote_size(sha256)
        return None if size is None else BlobInfo(sha256, size)
