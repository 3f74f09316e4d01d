"""The principals', keys' and sessions' contract on every backend kind, and its teeth: each
broken variant of the embedded backend (a subclass overriding one step) fails its check."""

from __future__ import annotations

import functools
from dataclasses import replace
from pathlib import Path

import pytest

from contract.backends import KINDS, skip_pending, sqlite_kind
from contract.checks_auth import CHECKS
from superchargedb.storage.protocols_auth import Credential, SessionState
from superchargedb.storage.sqlite.backend import SqliteBackend
from superchargedb.storage.sqlite.principals import SqlitePrincipals, row_to_principal
from superchargedb.storage.sqlite.sessions import SqliteSessions
from superchargedb.types import Principal


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("check", sorted(CHECKS))
def test_backend_keeps_the_auth_contract(kind: str, check: str, tmp_path: Path) -> None:
    skip_pending(kind, "auth")
    CHECKS[check](KINDS[kind], tmp_path)


class _OwnerLegOnly(SqlitePrincipals):
    """The group leg forgotten: a key for a principal reading shared Units passes."""

    def reads_beyond(self, target: Principal, actor: Principal | None) -> bool:
        return super().reads_beyond(replace(target, groups=frozenset()), actor)


class _SharedGroupsAlwaysDropped(SqlitePrincipals):
    """The group leg's shortcut taken even when the target's scopes are not within the
    actor's: a group both share is not a Unit both read there."""

    def reads_beyond(self, target: Principal, actor: Principal | None) -> bool:
        if actor is None:
            return super().reads_beyond(target, actor)
        return super().reads_beyond(replace(target, groups=target.groups - actor.groups), actor)


class _PrefixKeyMatch(SqlitePrincipals):
    """A key found by a prefix of its digest."""

    def by_key_hash(self, key_hash: str) -> Credential | None:
        row = self.conn.execute(
            "SELECT key_hash FROM api_keys WHERE key_hash LIKE ? ORDER BY key_hash LIMIT 1",
            (key_hash + "%",),
        ).fetchone()
        return None if row is None else super().by_key_hash(row[0])


class _DisabledAdminsCount(SqlitePrincipals):
    """The last-admin rule counts a disabled admin as still there."""

    def enabled_admins(self, excluding: str) -> list[Principal]:
        rows = self.conn.execute("SELECT * FROM principals WHERE id != ?", (excluding,))
        return [p for p in map(row_to_principal, rows) if p.has("admin")]


class _ForgetsRevocation(SqliteSessions):
    def find(self, token_hash: str) -> SessionState | None:
        got = super().find(token_hash)
        return None if got is None else replace(got, key_revoked_at=None)


def _principals_variant(cls: type[SqlitePrincipals]) -> type[SqliteBackend]:
    class Variant(SqliteBackend):
        @property
        def principals(self) -> SqlitePrincipals:
            return cls(self.catalog.reader())

    Variant.__name__ = cls.__name__.strip("_")
    return Variant


class ForgetsRevocation(SqliteBackend):
    """A session lookup that caches the key's state: a revoked key's session lives on."""

    @property
    def sessions(self) -> SqliteSessions:
        return _ForgetsRevocation(self.catalog)


BROKEN: dict[str, tuple[type[SqliteBackend], str]] = {
    "OwnerLegOnly": (_principals_variant(_OwnerLegOnly), "check_reads_beyond_follows_the_rule"),
    "SharedGroupsAlwaysDropped": (
        _principals_variant(_SharedGroupsAlwaysDropped),
        "check_reads_beyond_follows_the_rule",
    ),
    "PrefixKeyMatch": (_principals_variant(_PrefixKeyMatch), "check_keys_by_hash_and_lifecycle"),
    "DisabledAdminsCount": (
        _principals_variant(_DisabledAdminsCount),
        "check_principals_round_trip",
    ),
    "ForgetsRevocation": (ForgetsRevocation, "check_sessions_follow_their_key_and_principal"),
}


@pytest.mark.parametrize("variant", sorted(BROKEN))
def test_broken_variant_fails_its_auth_check(variant: str, tmp_path: Path) -> None:
    cls, check = BROKEN[variant]
    with pytest.raises(AssertionError):
        CHECKS[check](functools.partial(sqlite_kind, cls), tmp_path)


@pytest.mark.parametrize("variant", sorted(BROKEN))
def test_broken_variant_passes_the_audited_write_check(variant: str, tmp_path: Path) -> None:
    """Each variant breaks one rule and still runs: the audited-write check, which none of
    them touches, passes (a failure above is the rule's, not a variant that cannot run)."""
    cls, _ = BROKEN[variant]
    CHECKS["check_principal_change_commits_with_its_audit_record"](
        functools.partial(sqlite_kind, cls), tmp_path
    )
