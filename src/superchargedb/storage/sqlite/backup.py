"""Online backups and restores of a data dir.

A backup is consistent without stopping the server: SQLite's online backup API copies the
catalog under one read snapshot (WAL lets the server keep writing), then the content-addressed
objects are copied (immutable files, a superset of what the snapshot references). Index files
are not copied: the vector index is derived data, and a restore rebuilds it from the catalog's
embeddings and outbox, which is the only way to guarantee it matches the snapshot exactly.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ...errors import ConflictError, ValidationError
from ..protocols_reads import BackupManifest

FORMAT = 1


def _empty_or_missing(path: Path) -> bool:
    return not path.exists() or (path.is_dir() and not any(path.iterdir()))


def backup(data_dir: Path, dest: Path) -> dict[str, Any]:
    src_db = data_dir / "catalog.db"
    if not src_db.exists():
        raise ValidationError(f"no catalog at {src_db}")
    if not _empty_or_missing(dest):
        raise ConflictError(f"backup destination {dest} is not empty")
    dest.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    src = sqlite3.connect(f"file:{src_db}?mode=ro", uri=True, timeout=30)
    dst = sqlite3.connect(dest / "catalog.db")
    try:
        src.backup(dst)  # one step: a single consistent read snapshot
    finally:
        src.close()
    dst.execute("PRAGMA journal_mode=DELETE")
    head = dst.execute("SELECT seq, hash FROM audit_log ORDER BY seq DESC LIMIT 1").fetchone()
    units = dst.execute("SELECT COUNT(*) FROM units").fetchone()[0]
    model = dst.execute("SELECT model_id FROM units LIMIT 1").fetchone()
    dst.close()
    n_objects = 0
    objects = data_dir / "objects"
    if objects.is_dir():
        for f in objects.rglob("*"):
            if f.is_file() and not f.is_symlink():
                target = dest / "objects" / f.relative_to(objects)
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(f, target)
                n_objects += 1
    manifest = {
        "format": FORMAT,
        "created_at": int(t0 * 1000),
        "source": str(data_dir.resolve()),
        "units": units,
        "objects": n_objects,
        "model_id": model[0] if model else None,
        "audit_head": {"seq": head[0], "hash": head[1]} if head else None,
        "seconds": round(time.time() - t0, 3),
    }
    (dest / "manifest.json").write_text(json.dumps(manifest, indent=2))
    return manifest


def restore_files(src: Path, data_dir: Path) -> dict[str, Any]:
    """Lay a backup's files into an empty data dir; the caller then opens it (index rebuild)."""
    manifest_path = src / "manifest.json"
    if not manifest_path.exists() or not (src / "catalog.db").exists():
        raise ValidationError(f"{src} is not a backup (no manifest.json / catalog.db)")
    manifest = json.loads(manifest_path.read_text())
    if manifest.get("format") != FORMAT:
        raise ValidationError(f"unsupported backup format {manifest.get('format')}")
    if not _empty_or_missing(data_dir):
        raise ConflictError(f"restore target {data_dir} is not empty")
    data_dir.mkdir(parents=True, exist_ok=True)
    shutil.copy2(src / "catalog.db", data_dir / "catalog.db")
    if (src / "objects").is_dir():
        shutil.copytree(src / "objects", data_dir / "objects")
    return dict(manifest)


def manifest_record(m: Mapping[str, Any]) -> BackupManifest:
    """``manifest.json``'s fields (``backup.py`` writes them; a restore reads them back)."""
    head = m.get("audit_head") or {}
    return BackupManifest(
        format=int(m["format"]),
        created_at=int(m["created_at"]),
        source=str(m["source"]),
        units=int(m["units"]),
        objects=int(m["objects"]),
        model_id=m["model_id"],
        audit_head_seq=head.get("seq"),
        audit_head_hash=head.get("hash"),
        seconds=float(m["seconds"]),
    )
