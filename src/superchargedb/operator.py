"""The operator's offline access to a data dir: principals, keys and the audit chain.

CLI commands that manage them need neither the model nor the vector index, so they open this
instead of the full ``Service``: the storage's offline handle (the data-dir lock, the catalog,
the audit key; D-41, D-183) under the same tenancy facade the API uses.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from .settings import Settings
from .storage.protocols_auth import AuthStore
from .storage.protocols_reads import AuditTrail
from .storage.sqlite.audit_trail import SqliteAuditTrail
from .storage.sqlite.offline import OfflineCatalog
from .tenancy import TenancyMixin

if TYPE_CHECKING:
    from .storage.postgres.router import ClusterRouter


class OperatorStore(TenancyMixin):
    def __init__(self, settings: Settings) -> None:
        self.router: ClusterRouter | None = None  # tenants over several clusters (D-277)
        if settings.database_url:
            self._init_database(settings)
            return
        self._offline = OfflineCatalog(
            Path(settings.data_dir),
            settings.sqlite_synchronous,
            settings.audit_key_file,
            settings.audit_anchor_file,
        )
        self.audit_key = self._offline.audit_key
        self.audit_anchor = self._offline.audit_anchor
        self.auth_store: AuthStore = self._offline.auth
        self.audit_trail: AuditTrail = SqliteAuditTrail(
            self._offline.catalog, self.audit_key, self.audit_anchor
        )
        self._close = self._offline.close

    def _init_database(self, s: Settings) -> None:
        """The server stack's database: shared with running servers, so no lock (D-246)."""
        from .storage.postgres.open import open_operator
        from .storage.sqlite import audit

        data = Path(s.data_dir)
        self.audit_key = audit.load_key(s.audit_key_file)
        self.audit_anchor = audit.anchor_path(data, s.audit_anchor_file)
        if s.cluster_urls:  # tenants over several clusters: the directory and each (D-277)
            from .storage.postgres.open import open_operator_router

            router = open_operator_router(
                s,
                audit_key=self.audit_key,
                objects_root=data / "objects",
                audit_anchor=self.audit_anchor,
            )
            self.auth_store = router.auth
            self.audit_trail = router.audit_trail
            self.router = router
            self._close = router.close
            return
        backend = open_operator(
            s, audit_key=self.audit_key, blobs_root=data / "objects", audit_anchor=self.audit_anchor
        )
        self.auth_store = backend
        self.audit_trail = backend.audit_trail
        self._close = backend.close

    def close(self) -> None:
        self._close()

    def __enter__(self) -> OperatorStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
