"""Principals, their API keys and the console's sessions behind the storage seam (D-180).

``auth/`` decides (who may do what, what a key is worth); a backend only stores and answers
plain questions, in domain types:

- ``PrincipalReader``: a key's holder by the key's hash, a principal by name, every principal,
  a principal's keys, the enabled admins (the last-admin rule), and whether one principal reads a
  Unit another cannot (the exact test behind ``admin.may_issue_for``, D-181);
- ``PrincipalWriter``: the same reads inside a write, plus creating and changing principals and
  keys. It is what the write transaction exposes as ``tx.principals`` (``AuthTx``), so a change
  and its audit record commit together (D-182);
- ``SessionStore``: the console's sessions, keyed by the token's hash (D-150); each call is
  its own transaction, since no session write is audited;
- ``AuthStore``: what the tenancy facade, the gate and the operator's offline store are given.

Keys and session tokens cross only as SHA-256 hex digests: nothing here sees a key.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Protocol

from ..types import Principal
from .protocols import AuditWriter


@dataclass(frozen=True)
class PrincipalState:
    """A stored principal and whether it is disabled (a disabled one authenticates nowhere)."""

    principal: Principal
    disabled: bool


@dataclass(frozen=True)
class Credential:
    """What a key's hash finds: its holder (``key_id`` and ``key_issuer`` set) and the key's
    state. The caller compares ``key_hash`` in constant time and judges the rest."""

    principal: Principal
    key_hash: str
    expires_at: int | None
    revoked_at: int | None
    disabled: bool


@dataclass(frozen=True)
class KeyRecord:
    """One API key as an admin lists it (epoch ms; the hash is never listed)."""

    key_id: str
    principal_id: str
    principal_name: str
    prefix: str
    created_at: int
    expires_at: int | None
    revoked_at: int | None
    last_used_at: int | None
    issued_by: str | None


@dataclass(frozen=True)
class SessionState:
    """What a session token's hash finds: the principal of the key that signed in (``key_id``
    and ``key_issuer`` set) and every date the gate checks (epoch ms)."""

    principal: Principal
    last_seen_at: int
    expires_at: int
    key_expires_at: int | None
    key_revoked_at: int | None
    disabled: bool


class PrincipalReader(Protocol):
    def by_key_hash(self, key_hash: str) -> Credential | None:
        """The key whose SHA-256 hex digest is ``key_hash``, with its principal (exact match)."""
        ...

    def named(self, name: str) -> PrincipalState | None: ...

    def every(self) -> list[PrincipalState]:
        """Every principal, ordered by name."""
        ...

    def keys_of(self, principal_id: str) -> list[KeyRecord]:
        """The principal's keys, oldest first (revoked and expired ones included)."""
        ...

    def key(self, key_id: str) -> KeyRecord | None: ...

    def enabled_admins(self, excluding: str) -> list[Principal]:
        """Every principal holding ``admin`` that is not disabled, but the one of id
        ``excluding``."""
        ...

    def reads_beyond(self, target: Principal, actor: Principal | None) -> bool:
        """True when a Unit ``target`` reads (within its scopes, owned by it or shared into one
        of its groups) is not readable by ``actor`` under the same rule; ``actor`` None reads
        nothing. Exact: every Unit counts, not a sample."""
        ...


class PrincipalWriter(PrincipalReader, Protocol):
    """Inside a write: the reads see the transaction's own changes."""

    def insert(self, principal: Principal, created_at: int) -> None:
        """Store a new principal; 409 ``ConflictError`` when its name is taken."""
        ...

    def update(self, principal: Principal, disabled: bool) -> None:
        """Replace the stored fields of the principal of id ``principal.id`` (not its name)."""
        ...

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
        """Store a key's hash (never the key) and the first characters an admin recognizes."""
        ...

    def revoke_key(self, key_id: str, at: int) -> None:
        """Revoke the key from ``at`` on; a key already revoked keeps its first date."""
        ...

    def set_key_expiry(self, key_id: str, expires_at: int) -> None: ...


class AuthTx(Protocol):
    """The part of the one write transaction (``Backend.write()``) that principal and key
    changes use: the principals and the audit chain, committed together or not at all."""

    @property
    def principals(self) -> PrincipalWriter: ...

    @property
    def audit(self) -> AuditWriter: ...


class SessionStore(Protocol):
    def start(
        self, token_hash: str, principal_id: str, key_id: str, *, at: int, expires_at: int
    ) -> None:
        """Store a session of the key ``key_id``, and drop every session expired by ``at``."""
        ...

    def find(self, token_hash: str) -> SessionState | None:
        """The session with its key's and its principal's current state (exact match)."""
        ...

    def touch(self, token_hash: str, at: int) -> None:
        """Record the session's last use."""
        ...

    def end(self, token_hash: str, principal_id: str) -> bool:
        """Remove the session when it is ``principal_id``'s; True when one was removed."""
        ...


class AuthStore(Protocol):
    """What the principal, key and session code above the seam is given."""

    @property
    def principals(self) -> PrincipalReader: ...

    @property
    def sessions(self) -> SessionStore: ...

    def write(self) -> AbstractContextManager[AuthTx]:
        """One write transaction (the backend's own): everything through ``tx`` commits
        together."""
        ...
