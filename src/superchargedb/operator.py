"""The operator's offline access to a data dir: the lock, the catalog and the audit key only.

CLI commands that manage principals, keys and the audit chain need neither the model nor the
vector index, so they open this instead of the full ``Service`` (D-41: they take the
data-dir lock and refuse to run while a server owns it).
"""

from __future__ import annotations

from pathlib import Path

from .settings import Settings
from .storage.lock import DataDirLock
from .storage.sqlite import audit
from .storage.sqlite.auth_store import SqliteAuthStore
from .storage.sqlite.catalog import Catalog
from .tenancy import TenancyMixin


class OperatorStore(TenancyMixin):
    def __init__(self, settings: Settings) -> None:
        data = Path(settings.data_dir)
        data.mkdir(parents=True, exist_ok=True)
        self.lock = DataDirLock(data)
        self.lock.acquire()
        try:
            self.catalog = Catalog(data / "catalog.db", settings.sqlite_synchronous)
            self.audit_key = audit.load_key(settings.audit_key_file)
            self.audit_anchor = audit.anchor_path(data, settings.audit_anchor_file)
            self.auth_store = SqliteAuthStore(self.catalog, self.audit_key)
        except BaseException:
            self.lock.release()
            raise

    def close(self) -> None:
        try:
            audit.write_anchor(self.catalog.reader(), self.audit_key, self.audit_anchor)
            self.catalog.close()
        finally:
            self.lock.release()

    def __enter__(self) -> OperatorStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
