"""The object store: content-addressed blobs under the data dir, named by validated keys.

User text never becomes a path (D-47): a key maps to a catalog row, the row to a sha256,
and the sha256 alone to ``objects/<aa>/<bb>/<sha256>``. Blobs are written to a temp file, fsynced
and renamed, so a crash never leaves a partial blob under its final name.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import re
import sqlite3
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from ... import faults
from ...errors import PayloadTooLargeError, ValidationError
from ..protocols import BlobInfo

log = logging.getLogger(__name__)

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
        staged = self.stage(chunks, max_bytes)
        try:
            self.commit(staged)
        finally:
            self.discard(staged)
        return staged.sha256, staged.size

    def stage(self, chunks: Iterable[bytes], max_bytes: int | None) -> Staged:
        """Write ``chunks`` to a fsynced temp file and hash them; nothing is visible yet."""
        h = hashlib.sha256()
        size = 0
        fd, tmp = tempfile.mkstemp(dir=self.root / "tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                for chunk in chunks:
                    size += len(chunk)
                    if max_bytes is not None and size > max_bytes:
                        raise PayloadTooLargeError(
                            f"object exceeds the limit of {max_bytes} bytes", limit=max_bytes
                        )
                    h.update(chunk)
                    f.write(chunk)
                f.flush()
                faults.point("objects.blob.after_write")
                os.fsync(f.fileno())
                faults.point("objects.blob.after_fsync")
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise
        return Staged(Path(tmp), h.hexdigest(), size)

    def commit(self, staged: Staged) -> None:
        """Give a staged blob its final name (or drop it onto identical stored content).

        The caller holds the catalog write lock until the row naming the blob commits: the
        collector (``collect``) runs under the same lock, so a PUT that de-duplicates onto a blob
        is never interleaved with that blob's removal.
        """
        final = self.path(staged.sha256)
        final.parent.mkdir(parents=True, exist_ok=True)
        if final.exists():  # identical content already stored: dedupe silently
            return
        os.replace(staged.tmp, final)
        faults.point("objects.blob.after_rename")
        dir_fd = os.open(final.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)

    def discard(self, staged: Staged) -> None:
        with contextlib.suppress(FileNotFoundError):  # committed (renamed) or never written
            os.unlink(staged.tmp)

    def collect(self, conn: sqlite3.Connection, sha256: str) -> bool:
        """Remove a blob nothing in the catalog references any more; True when removed.

        Called with the catalog write lock held (see ``commit``) after the transaction that
        dropped a reference committed, so ``conn`` sees every committed reference.
        """
        if blob_refs(conn, sha256):
            return False
        return self.remove(sha256)

    def remove(self, sha256: str) -> bool:
        """Delete the blob (the caller has found nothing referencing it, under the lock that
        orders it against a write naming it); True when it was there."""
        try:
            self.path(sha256).unlink()
        except FileNotFoundError:
            return False
        return True


@dataclass(frozen=True)
class Staged:
    tmp: Path
    sha256: str
    size: int


# An upload's temp file or a blob whose catalog row is not yet committed is this young at most
# while its request runs; the doctor, which runs beside live requests, only counts older ones.
ORPHAN_GRACE_S = 600.0
_BLOB_NAME = re.compile(r"[0-9a-f]{64}")


def referenced_blobs(conn: sqlite3.Connection) -> set[str]:
    """Every blob the catalog can still reach.

    ``objects.sha256`` names an object's current blob; a Unit keeps the blob it was derived
    from (``units.object_sha``), even after its object is replaced or deleted; a job not yet
    finished pins the blob it was queued with in its payload.
    """
    refs = {str(r[0]) for r in conn.execute("SELECT sha256 FROM objects")}
    refs.update(str(r[0]) for r in conn.execute("SELECT DISTINCT object_sha FROM units") if r[0])
    refs.update(
        str(r[0])
        for r in conn.execute(
            "SELECT json_extract(payload, '$.sha256') FROM jobs"
            " WHERE state IN ('queued', 'running') AND json_valid(payload)"
        )
        if r[0]
    )
    return refs


def blob_refs(conn: sqlite3.Connection, sha256: str) -> int:
    """How many catalog rows reference one blob (the same sources as ``referenced_blobs``).

    Counted from the rows themselves rather than kept in a counter, so no write path can let
    a count drift from the references it stands for.
    """
    n = conn.execute("SELECT COUNT(*) FROM objects WHERE sha256 = ?", (sha256,)).fetchone()[0]
    n += conn.execute("SELECT COUNT(*) FROM units WHERE object_sha = ?", (sha256,)).fetchone()[0]
    n += conn.execute(
        "SELECT COUNT(*) FROM jobs WHERE state IN ('queued', 'running') AND json_valid(payload)"
        " AND json_extract(payload, '$.sha256') = ?",
        (sha256,),
    ).fetchone()[0]
    return int(n)


def blob_report(
    refs: set[str], root: Path, exists: Callable[[str], bool], grace_s: float = ORPHAN_GRACE_S
) -> dict[str, Any]:
    """The doctor's objects section for either backend: every referenced blob is stored (else
    data is lost: not ok); orphans (upload temp files, blobs no row references) cost space, not
    data, and are only counted. Files younger than ``grace_s`` may belong to a request in
    flight."""
    missing = sorted(sha for sha in refs if not (_BLOB_NAME.fullmatch(sha) and exists(sha)))
    orphans = find_orphans(root, refs, time.time() - grace_s)
    found = orphans["tmp"] + orphans["blobs"]
    return {
        "ok": not missing,
        "referenced": len(refs),
        "missing_blobs": missing[:10],
        "orphan_tmp_files": len(orphans["tmp"]),
        "orphan_blobs": len(orphans["blobs"]),
        "orphan_bytes": sum(_size_or_zero(p) for p in found),
    }


def _size_or_zero(p: Path) -> int:
    try:
        return p.stat().st_size
    except FileNotFoundError:  # removed since it was listed
        return 0


def find_orphans(root: Path, refs: set[str], before: float) -> dict[str, list[Path]]:
    """Upload temp files and unreferenced blobs last modified before ``before`` (epoch s)."""
    tmp = [p for p in _files(root / "tmp") if _mtime(p) < before]
    blobs = [
        p
        for d1 in _dirs(root)
        for d2 in _dirs(d1)
        for p in _files(d2)
        if _BLOB_NAME.fullmatch(p.name) and p.name not in refs and _mtime(p) < before
    ]
    return {"tmp": tmp, "blobs": blobs}


def sweep_orphans(conn: sqlite3.Connection, root: Path, before: float) -> dict[str, Any]:
    """Delete what a crash left behind in the object store (startup only).

    Only safe while nothing can write a blob or add a reference: the caller holds the data-dir
    lock (so no other server uploads) and accepts no requests yet; external workers only read
    blobs their running job pins, and those are in ``refs``.
    """
    t0 = time.perf_counter()
    found = find_orphans(root, referenced_blobs(conn), before)
    removed = {"tmp_files": 0, "blobs": 0, "bytes": 0}
    for kind, paths in (("tmp_files", found["tmp"]), ("blobs", found["blobs"])):
        for p in paths:
            try:
                size = p.stat().st_size
                p.unlink()
            except FileNotFoundError:
                continue
            except OSError as exc:  # never keep the server from starting over a stray file
                log.warning("could not remove orphan %s: %s", p, exc)
                continue
            removed[kind] += 1
            removed["bytes"] += size
    if removed["tmp_files"] or removed["blobs"]:
        log.info(
            "object store: removed %d upload temp file(s) and %d unreferenced blob(s), %d bytes",
            removed["tmp_files"],
            removed["blobs"],
            removed["bytes"],
        )
    return {**removed, "ms": round((time.perf_counter() - t0) * 1000, 1)}


def _dirs(p: Path) -> list[Path]:
    try:
        return [e for e in p.iterdir() if len(e.name) == 2 and e.is_dir() and not e.is_symlink()]
    except FileNotFoundError:
        return []


def _files(p: Path) -> list[Path]:
    try:
        return [e for e in p.iterdir() if e.is_file() and not e.is_symlink()]
    except FileNotFoundError:
        return []


def _mtime(p: Path) -> float:
    try:
        return p.stat().st_mtime
    except FileNotFoundError:
        return float("inf")  # gone already: never counted


# Media types served inline; everything else downloads as an attachment (stored XSS, D-47).
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


class FileObjects:
    """The seam's ``ObjectStore`` over a :class:`FileBlobStore` (the embedded backend's, and the
    PostgreSQL backend's while its blobs stay on local disk, D-205)."""

    def __init__(self, blobs: FileBlobStore) -> None:
        self.blobs = blobs

    def put(self, chunks: Iterable[bytes], max_bytes: int) -> BlobInfo:
        sha, size = self.blobs.put(chunks, max_bytes)  # 413 past max_bytes, nothing kept
        return BlobInfo(sha, size)

    def read(self, sha256: str, start: int = 0, end: int | None = None) -> bytes:
        with open(self.blobs.path(sha256), "rb") as f:
            f.seek(start)
            return f.read(-1 if end is None else max(0, end - start))

    def info(self, sha256: str) -> BlobInfo | None:
        if not self.blobs.exists(sha256):
            return None
        return BlobInfo(sha256, self.blobs.path(sha256).stat().st_size)
