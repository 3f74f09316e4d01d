"""``Maintenance`` on an embedded data dir: online backup, restore and reindex (``backup.py``,
``reindex.py``), for the offline CLI (D-187)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ...models.embedder import Embedder
from ..lock import DataDirLock
from ..protocols_reads import BackupManifest, Maintenance
from . import backup as backup_mod
from . import reindex as reindex_mod
from .catalog import Catalog


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
        return backup_mod.manifest_record(backup_mod.backup(self.data, dest))

    def restore(self, src: Path) -> BackupManifest:
        return backup_mod.manifest_record(backup_mod.restore_files(src, self.data))

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
