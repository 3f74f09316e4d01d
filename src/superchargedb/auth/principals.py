"""Principals and API keys: keys are stored only as SHA-256 hashes (D-93)."""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
import uuid
from collections.abc import Iterable

from ..errors import AuthError, ValidationError
from ..storage.protocols_auth import PrincipalReader, PrincipalWriter
from ..types import PERMS, TIERS, Principal
from .scopes import check_scope, within_any

KEY_PREFIX = "aegis_sk_"
# Every read ORs one range test per grant into its SQL (SQLite caps expression depth at 1000)
# and binds one parameter per group: both lists are bounded.
MAX_SCOPES = 256
MAX_GROUPS = 64


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


def new_key() -> str:
    return KEY_PREFIX + secrets.token_urlsafe(32)


def _now_ms() -> int:
    return int(time.time() * 1000)


def validate_principal_fields(
    perms: Iterable[str], tier: str, scopes: Iterable[str], active_scope: str | None
) -> tuple[list[str], list[str], str]:
    perms = list(perms)
    if not all(isinstance(p, str) for p in perms):
        raise ValidationError("perms: a list of strings", field="perms")
    perms = sorted(set(perms))
    bad = [p for p in perms if p not in PERMS]
    if bad:
        raise ValidationError(f"unknown perms {bad}; choose from {list(PERMS)}")
    if tier not in TIERS:
        raise ValidationError(f"unknown tier {tier!r}; choose from {list(TIERS)}")
    scopes = sorted({check_scope(s) for s in scopes})
    if not scopes:
        raise ValidationError("a principal needs at least one scope")
    if len(scopes) > MAX_SCOPES:
        raise ValidationError(f"a principal holds at most {MAX_SCOPES} scopes", field="scopes")
    active = check_scope(active_scope or scopes[0], "active_scope")
    if not within_any(active, scopes):
        raise ValidationError("active_scope must lie within the principal's scopes")
    return perms, scopes, active


def validate_groups(groups: Iterable[str]) -> list[str]:
    groups_l = list(groups)
    if len(groups_l) > MAX_GROUPS or not all(isinstance(g, str) and g for g in groups_l):
        raise ValidationError(
            f"groups: a list of at most {MAX_GROUPS} non-empty strings", field="groups"
        )
    return sorted(set(groups_l))


def create_principal(
    store: PrincipalWriter,
    name: str,
    *,
    perms: Iterable[str],
    tier: str,
    scopes: Iterable[str],
    active_scope: str | None = None,
    groups: Iterable[str] = (),
    doc_quota: int | None = None,
) -> Principal:
    """Validate and store a new principal (inside the caller's write); 409 on a taken name."""
    perms_l, scopes_l, active = validate_principal_fields(perms, tier, scopes, active_scope)
    groups_l = validate_groups(groups)
    p = Principal(
        id="p_" + uuid.uuid4().hex[:16],
        name=name,
        perms=frozenset(perms_l),
        tier=tier,
        scopes=tuple(scopes_l),
        active_scope=active,
        groups=frozenset(groups_l),
        doc_quota=doc_quota,
    )
    store.insert(p, _now_ms())
    return p


def add_key(
    store: PrincipalWriter,
    principal_id: str,
    key: str | None = None,
    expires_at: int | None = None,
    issued_by: str | None = None,
) -> tuple[str, str]:
    """Store a key's hash; returns ``(key_id, key)``. The key is shown once, never stored.

    ``issued_by`` names who minted it (an admin or ``operator``); None for seeded keys.
    """
    key = key or new_key()
    kid = "k_" + uuid.uuid4().hex[:16]
    store.add_key(
        kid,
        principal_id,
        hash_key(key),
        key[:12],
        created_at=_now_ms(),
        expires_at=expires_at,
        issued_by=issued_by,
    )
    return kid, key


MAX_KEY_CHARS = 256  # longer is no key of ours: refused before it is hashed


def bearer_key(authorization: str | None) -> str | None:
    """The key of ``Authorization: Bearer <key>``; None when the header is not of that form."""
    if not authorization or not authorization.startswith("Bearer "):
        return None
    return authorization[len("Bearer ") :].strip()


def authenticate(store: PrincipalReader, authorization: str | None) -> Principal:
    """``Authorization: Bearer <key>`` -> Principal, or 401 (same message for every failure)."""
    key = bearer_key(authorization)
    if key is None:
        raise AuthError("missing or malformed Authorization: Bearer <api key>")
    if not key or len(key) > MAX_KEY_CHARS:
        raise AuthError("invalid API key")
    digest = hash_key(key)
    found = store.by_key_hash(digest)
    # The lookup is by hash; the compare is constant-time all the same.
    if found is None or not hmac.compare_digest(found.key_hash, digest):
        raise AuthError("invalid API key")
    if found.revoked_at is not None or found.disabled:
        raise AuthError("invalid API key")
    if found.expires_at is not None and found.expires_at <= _now_ms():
        raise AuthError("invalid API key")
    return found.principal
