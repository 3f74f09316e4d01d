"""The operator's offline handle on a data dir: its lock, the catalog, the audit key (D-183).

CLI commands that manage principals, keys and the audit chain need neither the model nor the
vector index, so they open this instead of a whole backend (D-41: it takes the data-dir lock
and refuses to open while a server owns it). Closing anchors the audit chain's head, as the
server does at shutdown.
"""

from __future__ import annotations

from pathlib import Path

from ..lock import DataDirLock
from . import audit
from .auth_store import SqliteAuthStore
from .catalog import Catalog


class OfflineCatalog:
    def __init__(
        self,
        data: Path,
        synchronous: str,
        audit_key_file: Path | None,
        audit_anchor_file: Path | None,
    ) -> None:
        data.mkdir(parents=True, exist_ok=True)
        self.lock = DataDirLock(data)
        self.lock.acquire()
        try:
            self.catalog = Catalog(data / "catalog.db", synchronous)
            self.audit_key = audit.load_key(audit_key_file)
            self.audit_anchor = audit.anchor_path(data, audit_anchor_file)
        except BaseException:
            self.lock.release()
            raise
        self.auth = SqliteAuthStore(self.catalog, self.audit_key)

    def close(self) -> None:
        try:
            audit.write_anchor(self.catalog.reader(), self.audit_key, self.audit_anchor)
            self.catalog.close()
        finally:
            self.lock.release()
