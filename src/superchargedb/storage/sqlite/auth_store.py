"""``AuthStore`` over a catalog and the audit key, for the processes that hold no backend.

The server's parts and the operator's offline store open the catalog themselves (not a whole
``SqliteBackend``); this gives them the same Protocols the backend exposes. ``write()`` is the
catalog's one write transaction (``Catalog.write``, as ``SqliteBackend.write`` uses), seen
through the two writers principal and key changes need: the principals and the audit chain
(D-182).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ...types import Principal
from ..protocols_auth import AuthStore
from . import audit
from .catalog import Catalog
from .principals import SqlitePrincipals
from .sessions import SqliteSessions


@dataclass
class _Audit:
    conn: sqlite3.Connection
    key: bytes

    def append(self, actor: Principal | str, action: str, record: Mapping[str, object]) -> str:
        return audit.append(self.conn, self.key, actor, action, dict(record))


@dataclass
class AuthTx:
    conn: sqlite3.Connection
    audit_key: bytes

    @property
    def principals(self) -> SqlitePrincipals:
        return SqlitePrincipals(self.conn)

    @property
    def audit(self) -> _Audit:
        return _Audit(self.conn, self.audit_key)


class SqliteAuthStore:
    def __init__(self, catalog: Catalog, audit_key: bytes) -> None:
        self.catalog = catalog
        self.audit_key = audit_key

    @property
    def principals(self) -> SqlitePrincipals:
        """Over the calling thread's read connection."""
        return SqlitePrincipals(self.catalog.reader())

    @property
    def sessions(self) -> SqliteSessions:
        return SqliteSessions(self.catalog)

    @contextmanager
    def write(self) -> Iterator[AuthTx]:
        with self.catalog.write() as conn:
            yield AuthTx(conn, self.audit_key)


if TYPE_CHECKING:  # mypy checks the store against the seam
    _store: type[AuthStore] = SqliteAuthStore
