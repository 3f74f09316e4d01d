"""The operator's offline access to a data dir: principals, keys and the audit chain.

CLI commands that manage them need neither the model nor the vector index, so they open this
instead of the full ``Service``: the storage's offline handle (the data-dir lock, the catalog,
the audit key; D-41, D-183) under the same tenancy facade the API uses.
"""

from __future__ import annotations

from pathlib import Path

from .settings import Settings
from .storage.sqlite.audit_trail import SqliteAuditTrail
from .storage.sqlite.offline import OfflineCatalog
from .tenancy import TenancyMixin


class OperatorStore(TenancyMixin):
    def __init__(self, settings: Settings) -> None:
        self._offline = OfflineCatalog(
            Path(settings.data_dir),
            settings.sqlite_synchronous,
            settings.audit_key_file,
            settings.audit_anchor_file,
        )
        self.audit_key = self._offline.audit_key
        self.audit_anchor = self._offline.audit_anchor
        self.auth_store = self._offline.auth
        # The facade's audit reads (tenancy.py) go through this trail, not the catalog.
        self.audit_trail = SqliteAuditTrail(
            self._offline.catalog, self.audit_key, self.audit_anchor
        )

    def close(self) -> None:
        self._offline.close()

    def __enter__(self) -> OperatorStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
