"""``Maintenance`` on an embedded data dir: online backup, restore and reindex (``backup.py``,
``reindex.py``), for the offline CLI (D-187)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ...models.embedder import Embedder
from ..lock import DataDirLock
from ..protocols_reads import BackupManifest, Maintenance
from . import backup as backup_mod
from . import reindex as reindex_mod
from .catalog import Catalog


def _manifest(m: Mapping[str, Any]) -> BackupManifest:
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


class SqliteMaintenance:
    def __init__(
        self,
        data_dir: Path,
        synchronous: str = "FULL",
        lease_s: float = 300.0,
        max_attempts: int = 3,
    ) -> None:
        self.data = data_dir
        self.synchronous = synchronous
        self.lease_s = lease_s
        self.max_attempts = max_attempts

    def backup(self, dest: Path) -> BackupManifest:
        return _manifest(backup_mod.backup(self.data, dest))

    def restore(self, src: Path) -> BackupManifest:
        return _manifest(backup_mod.restore_files(src, self.data))

    def reindex(self, embedder: Embedder, progress: Callable[[int, int], None]) -> int:
        lock = DataDirLock(self.data)
        lock.acquire()
        try:
            catalog = Catalog(self.data / "catalog.db", self.synchronous)
            try:
                total = reindex_mod.stale_count(catalog, embedder.model_id)
                progress(0, total)
                return reindex_mod.reindex(
                    catalog, self.data / "index", embedder, progress=lambda n: progress(n, total)
                )
            finally:
                catalog.close()
        finally:
            lock.release()

    def rederive(self) -> int:
        from . import rederive as rd
        from .jobs import JobQueue

        lock = DataDirLock(self.data)
        lock.acquire()
        try:
            catalog = Catalog(self.data / "catalog.db", self.synchronous)
            try:
                queue = JobQueue(catalog, self.lease_s, self.max_attempts)
                with catalog.write() as conn:
                    return len(rd.requeue(conn, queue, rd.stale_jobs(conn)))
            finally:
                catalog.close()
        finally:
            lock.release()


_check: type[Maintenance] = SqliteMaintenance  # mypy checks the class against the seam
