"""The directory database's side of several clusters: principals, keys and console sessions,
found before a request's tenant is known (D-277).

``DirectoryAuth`` is the ``AuthStore`` the tenancy facade and the gate use: a principal's
changes and their audit records commit in the directory. Making or changing a principal places
its tenants first (``placement.py``), so a principal whose scopes would span two clusters is
refused before anything is written. The one principal read that looks at Units, a tenant
admin's "reads beyond" check (D-181), runs on the cluster of the target's tenants.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING, Any, Protocol

from ... import acting
from ...types import Principal
from ..protocols import AuditWriter
from ..protocols_auth import (
    AuthStore,
    AuthTx,
    Credential,
    KeyRecord,
    PrincipalReader,
    PrincipalState,
    PrincipalWriter,
    SessionStore,
)
from .backend import PgBackend
from .placement import Placement


class ClusterRouter(Protocol):
    """What the directory needs of the router (``router.py``): the placement, and a block on
    one cluster."""

    @property
    def placement(self) -> Placement: ...

    def on(self, name: str) -> AbstractContextManager[PgBackend]: ...


def _tenants(p: Principal) -> set[str]:
    return {acting.tenant_of(s) for s in p.scopes}


class RoutedPrincipals:
    """``PrincipalReader`` over the directory's rows (``inner``: pooled, or a write's)."""

    def __init__(self, inner: PrincipalReader, router: ClusterRouter) -> None:
        self.inner, self.router = inner, router

    def by_key_hash(self, key_hash: str) -> Credential | None:
        return self.inner.by_key_hash(key_hash)

    def named(self, name: str) -> PrincipalState | None:
        return self.inner.named(name)

    def every(self) -> list[PrincipalState]:
        return self.inner.every()

    def keys_of(self, principal_id: str) -> list[KeyRecord]:
        return self.inner.keys_of(principal_id)

    def key(self, key_id: str) -> KeyRecord | None:
        return self.inner.key(key_id)

    def enabled_admins(self, excluding: str) -> list[Principal]:
        return self.inner.enabled_admins(excluding)

    def reads_beyond(self, target: Principal, actor: Principal | None) -> bool:
        tenants = _tenants(target)
        if not tenants:
            return False  # no scope: nothing it could read
        with self.router.on(self.router.placement.cluster_of(tenants)) as cluster:
            return cluster.principals.reads_beyond(target, actor)


class _PlacingWriter(RoutedPrincipals):
    """``PrincipalWriter``: a principal is written only once its tenants have one cluster."""

    def __init__(self, inner: PrincipalWriter, router: ClusterRouter) -> None:
        super().__init__(inner, router)
        self.writer = inner

    def insert(self, principal: Principal, created_at: int) -> None:
        if principal.scopes:
            self.router.placement.cluster_of(_tenants(principal))
        self.writer.insert(principal, created_at)

    def update(self, principal: Principal, disabled: bool) -> None:
        if principal.scopes:
            self.router.placement.cluster_of(_tenants(principal))
        self.writer.update(principal, disabled)

    def add_key(
        self,
        key_id: str,
        principal_id: str,
        key_hash: str,
        prefix: str,
        *,
        created_at: int,
        expires_at: int | None,
        issued_by: str | None,
    ) -> None:
        self.writer.add_key(
            key_id,
            principal_id,
            key_hash,
            prefix,
            created_at=created_at,
            expires_at=expires_at,
            issued_by=issued_by,
        )

    def revoke_key(self, key_id: str, at: int) -> None:
        self.writer.revoke_key(key_id, at)

    def set_key_expiry(self, key_id: str, expires_at: int) -> None:
        self.writer.set_key_expiry(key_id, expires_at)


class _DirectoryTx:
    """``AuthTx`` on the directory's write transaction."""

    def __init__(self, tx: Any, router: ClusterRouter) -> None:
        self._tx = tx
        self._principals = _PlacingWriter(tx.principals, router)

    @property
    def principals(self) -> PrincipalWriter:
        return self._principals

    @property
    def audit(self) -> AuditWriter:
        audit: AuditWriter = self._tx.audit
        return audit


class DirectoryAuth:
    """``AuthStore`` on the directory database."""

    def __init__(self, directory: PgBackend, router: ClusterRouter) -> None:
        self.directory, self.router = directory, router

    @property
    def principals(self) -> RoutedPrincipals:
        return RoutedPrincipals(self.directory.principals, self.router)

    @property
    def sessions(self) -> SessionStore:
        return self.directory.sessions

    @contextmanager
    def write(self) -> Iterator[AuthTx]:
        with self.directory.write() as tx:
            yield _DirectoryTx(tx, self.router)


if TYPE_CHECKING:  # mypy checks the classes against the seam
    _auth: type[AuthStore] = DirectoryAuth
    _reader: type[PrincipalReader] = RoutedPrincipals
    _writer: type[PrincipalWriter] = _PlacingWriter
