"""The object store: content-addressed blobs under the data dir, named by validated keys.

User text never becomes a path (DECISIONS 47): a key maps to a catalog row, the row to a sha256,
and the sha256 alone to ``objects/<aa>/<bb>/<sha256>``. Blobs are written to a temp file, fsynced
and renamed, so a crash never leaves a partial blob under its final name.
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Protocol

from .. import faults
from ..errors import PayloadTooLargeError, ValidationError

_SEGMENT = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._~+=@,-]{0,254}")
MAX_KEY = 1024


def check_key(key: str) -> str:
    """Reject anything that could be read as a path trick: '..', '.', absolute, backslashes,
    NUL, percent-encoding left after decoding, non-ASCII look-alike dots, empty segments."""
    if not isinstance(key, str) or not key or len(key) > MAX_KEY or not key.isascii():
        raise ValidationError("invalid object key", field="key")
    parts = key.split("/")
    if len(parts) > 32 or not all(p not in (".", "..") and _SEGMENT.fullmatch(p) for p in parts):
        raise ValidationError(
            "invalid object key: '/'-separated segments of [A-Za-z0-9._~+=@,-], no '.' or '..'",
            field="key",
        )
    return key


class BlobStore(Protocol):
    def put(self, chunks: Iterable[bytes], max_bytes: int) -> tuple[str, int]: ...
    def path(self, sha256: str) -> Path: ...
    def exists(self, sha256: str) -> bool: ...


class FileBlobStore:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.root.mkdir(parents=True, exist_ok=True)
        (self.root / "tmp").mkdir(exist_ok=True)

    def path(self, sha256: str) -> Path:
        if not re.fullmatch(r"[0-9a-f]{64}", sha256):
            raise ValidationError("invalid blob id")
        return self.root / sha256[:2] / sha256[2:4] / sha256

    def exists(self, sha256: str) -> bool:
        return self.path(sha256).is_file()

    def put(self, chunks: Iterable[bytes], max_bytes: int) -> tuple[str, int]:
        """Stream ``chunks`` into the store; returns ``(sha256, size)``."""
        h = hashlib.sha256()
        size = 0
        fd, tmp = tempfile.mkstemp(dir=self.root / "tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                for chunk in chunks:
                    size += len(chunk)
                    if size > max_bytes:
                        raise PayloadTooLargeError(
                            f"object exceeds the limit of {max_bytes} bytes", limit=max_bytes
                        )
                    h.update(chunk)
                    f.write(chunk)
                f.flush()
                faults.point("objects.blob.after_write")
                os.fsync(f.fileno())
                faults.point("objects.blob.after_fsync")
            sha = h.hexdigest()
            final = self.path(sha)
            final.parent.mkdir(parents=True, exist_ok=True)
            if final.exists():  # identical content already stored: dedupe silently
                os.unlink(tmp)
            else:
                os.replace(tmp, final)
                faults.point("objects.blob.after_rename")
                dir_fd = os.open(final.parent, os.O_RDONLY)
                try:
                    os.fsync(dir_fd)
                finally:
                    os.close(dir_fd)
            return sha, size
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise


# Media types served inline; everything else downloads as an attachment (stored XSS, D 47).
INLINE_TYPES = re.compile(
    r"^(image/(png|jpeg|gif|webp|tiff)|audio/[a-z0-9.+-]+|video/[a-z0-9.+-]+|application/pdf"
    r"|text/plain)$"
)


def parse_range(header: str | None, size: int) -> tuple[int, int] | None | str:
    """``Range: bytes=...`` -> (start, end_inclusive), None for the whole body, or
    ``"unsatisfiable"``. Multiple ranges are answered with the whole body (allowed by RFC 9110)."""
    if not header:
        return None
    m = re.fullmatch(r"\s*bytes\s*=\s*(\d*)\s*-\s*(\d*)\s*", header)
    if m is None:
        return None if "," in header else "unsatisfiable"
    a, b = m.group(1), m.group(2)
    if a == "" and b == "":
        return "unsatisfiable"
    if a == "":
        n = int(b)
        if n == 0:
            return "unsatisfiable"
        return (max(0, size - n), size - 1) if size > 0 else "unsatisfiable"
    start = int(a)
    end = int(b) if b else size - 1
    if start >= size or end < start:
        return "unsatisfiable"
    return start, min(end, size - 1)
