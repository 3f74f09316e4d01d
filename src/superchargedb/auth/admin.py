"""Managing principals and keys, bounded for tenant admins (D-7).

The operator (CLI with the data-dir lock) is unbounded. A tenant ``admin`` sees only principals
whose every scope lies within its own grants (others are a 404 to it) and never grants more than
it holds: scopes within its grants, perms it has, a tier and quota no higher than its own, groups
it belongs to (``check_grant``). Acting on a principal it sees is bounded by two rules that every
route goes through: ``may_manage`` (disable, demote, re-quota, revoke a key) and
``may_issue_for`` (create or rotate a key, which makes the holder that principal). No admin
disables itself or leaves its tenant without an enabled admin (``check_keeps_admin``). Every
change is audited in its own transaction.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

from ..errors import (
    ForbiddenError,
    LastAdminError,
    NotFoundError,
    PrivilegeEscalationError,
    ScopeForbiddenError,
    SelfLockoutError,
    ValidationError,
)
from ..storage.protocols_auth import KeyRecord, PrincipalReader, PrincipalState, PrincipalWriter
from ..types import TIER_RANK, Principal
from . import principals as pm
from .scopes import check_scope, within_any

OPERATOR = Principal(
    id="operator",
    name="operator",
    perms=frozenset({"read", "write", "admin"}),
    tier="enterprise",
    scopes=(),
    active_scope="",
    groups=frozenset(),
    doc_quota=None,
    is_operator=True,
)


def require_admin(actor: Principal) -> None:
    if not (actor.is_operator or actor.has("admin")):
        raise ForbiddenError("the admin permission is required")


def check_grant(
    actor: Principal,
    *,
    perms: Iterable[str] | None = None,
    tier: str | None = None,
    scopes: Iterable[str] | None = None,
    groups: Iterable[str] | None = None,
    doc_quota: int | None | str = "unset",
) -> None:
    """Raise unless a tenant admin holds everything it is about to grant."""
    if actor.is_operator:
        return
    for s in scopes or ():
        check_scope(s)
        if not within_any(s, actor.scopes):
            raise ScopeForbiddenError("cannot grant a scope outside your own grants")
    extra = set(perms or ()) - actor.perms
    if extra:
        raise PrivilegeEscalationError(f"cannot grant perms you do not hold: {sorted(extra)}")
    if tier is not None and TIER_RANK.get(tier, 99) > TIER_RANK[actor.tier]:
        raise PrivilegeEscalationError(f"cannot grant tier {tier!r} above your own ({actor.tier})")
    extra_g = set(groups or ()) - actor.groups
    if extra_g:
        raise PrivilegeEscalationError(f"cannot grant groups you are not in: {sorted(extra_g)}")
    capped = doc_quota != "unset" and actor.doc_quota is not None
    if capped and (doc_quota is None or int(doc_quota) > int(actor.doc_quota or 0)):
        raise PrivilegeEscalationError("cannot grant a document quota above your own")


def _strings(value: Any, name: str, limit: int) -> list[str]:
    """A JSON list of strings, checked before anything hashes or sorts it (a bare string would
    otherwise become a list of characters, a nested list a TypeError)."""
    if not isinstance(value, list) or len(value) > limit:
        raise ValidationError(f"{name}: a list of at most {limit} strings", field=name)
    if not all(isinstance(v, str) and 0 < len(v) <= 512 for v in value):
        raise ValidationError(f"{name}: every item must be a non-empty string", field=name)
    return value


def _count(value: Any, name: str) -> int | None:
    """None or a non-negative integer that fits SQLite's 64-bit INTEGER."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**63:
        raise ValidationError(f"{name} must be a non-negative integer or null", field=name)
    return value


def _string(value: Any, name: str) -> str:
    if not isinstance(value, str):
        raise ValidationError(f"{name} must be a string", field=name)
    return value


_LISTS = {"perms": 8, "scopes": pm.MAX_SCOPES, "groups": pm.MAX_GROUPS}


def _fields(spec: dict[str, Any]) -> dict[str, Any]:
    """Type-check the principal fields present in ``spec`` (create and update), strictly.

    null means "none" only where it has a meaning (no quota, no expiry); anywhere else it is a
    422 like any other wrong type, before anything is read or written.
    """
    out = dict(spec)
    for name, limit in _LISTS.items():
        if name in spec:
            out[name] = _strings(spec[name], name, limit)
    for name in ("name", "tier", "active_scope"):
        if name in spec:
            out[name] = _string(spec[name], name)
    for name in ("doc_quota", "expires_at"):
        if name in spec:
            out[name] = _count(spec[name], name)
    if "disabled" in spec and not isinstance(spec["disabled"], bool):
        raise ValidationError("disabled must be true or false", field="disabled")
    return out


def _manageable(actor: Principal, target: Principal) -> bool:
    """Visibility: an admin sees every principal whose scopes all lie within its own."""
    return actor.is_operator or (
        actor.has("admin") and all(within_any(s, actor.scopes) for s in target.scopes)
    )


def _exceeds(actor: Principal, target: Principal, *, quota: bool) -> list[str]:
    """The parts of the target's power the actor does not hold itself (empty: within)."""
    out = []
    if not target.perms <= actor.perms:
        out.append("perms")
    if TIER_RANK.get(target.tier, len(TIER_RANK)) > TIER_RANK[actor.tier]:
        out.append("tier")
    if not all(within_any(s, actor.scopes) for s in target.scopes):
        out.append("scopes")
    if not target.groups <= actor.groups:
        out.append("groups")
    capped = actor.doc_quota is not None
    if quota and capped and (target.doc_quota is None or target.doc_quota > (actor.doc_quota or 0)):
        out.append("doc_quota")
    return out


def _reads_beyond(store: PrincipalReader, actor: Principal, target: Principal) -> bool:
    """True when the target can read a Unit the actor cannot, exactly: the store tests the
    target's own Units and those shared into its groups against the very predicate every read
    uses (D-181). An actor without ``read`` reads nothing."""
    if not target.has("read"):
        return False
    return store.reads_beyond(target, actor if actor.has("read") else None)


def may_manage(actor: Principal, target: Principal) -> None:
    """Disable, demote, re-quota, re-scope or revoke a key of ``target``: only when its perms,
    tier, scopes and groups are all within the actor's own; else 403 ``privilege_escalation``."""
    if actor.is_operator:
        return
    lacks = _exceeds(actor, target, quota=False)
    if lacks:
        raise PrivilegeEscalationError(
            f"{target.name!r} holds more than you do ({', '.join(lacks)})", lacks=lacks
        )


def may_issue_for(store: PrincipalReader, actor: Principal, target: Principal) -> None:
    """Create or rotate a key of ``target``: a key makes its holder the target, so the target's
    whole power (perms, tier, quota, scopes, groups, and every Unit it can read) must be within
    the actor's own; else 403 ``privilege_escalation``."""
    if actor.is_operator:
        return
    lacks = _exceeds(actor, target, quota=True)
    if not lacks and _reads_beyond(store, actor, target):
        lacks = ["units"]
    if lacks:
        raise PrivilegeEscalationError(
            f"a key for {target.name!r} would hold more than you do ({', '.join(lacks)})",
            lacks=lacks,
        )


def _tenants(scopes: Iterable[str]) -> set[str]:
    return {s.split("/", 1)[0] for s in scopes}


def check_keeps_admin(
    store: PrincipalReader,
    actor: Principal,
    target: Principal,
    *,
    was_disabled: bool,
    after: Principal,
    disabled: bool,
) -> None:
    """No admin disables itself (403 ``self_lockout``); no change leaves a tenant (scope root)
    the target administered without another enabled admin (409 ``last_admin``). The operator
    is unbounded: it is how a locked-out tenant is recovered."""
    if actor.is_operator:
        return
    if target.id == actor.id and disabled:
        raise SelfLockoutError("an admin cannot disable itself")
    if was_disabled or not target.has("admin"):
        return
    kept = _tenants(after.scopes) if after.has("admin") and not disabled else set()
    lost = _tenants(target.scopes) - kept
    if not lost:
        return
    covered: set[str] = set()
    for other in store.enabled_admins(excluding=target.id):
        covered |= _tenants(other.scopes)
    if lost - covered:
        raise LastAdminError(
            f"{target.name!r} is the last enabled admin of its tenant", tenants=sorted(lost)
        )


def _now() -> int:
    return int(time.time() * 1000)


def _visible(store: PrincipalReader, actor: Principal, name: str) -> PrincipalState:
    state = store.named(name)
    if state is None or not _manageable(actor, state.principal):
        raise NotFoundError("principal not found")
    return state


def get_principal(store: PrincipalReader, actor: Principal, name: str) -> Principal:
    """A principal the actor may manage, else 404 (existence is never revealed)."""
    return _visible(store, actor, name).principal


def get_state(store: PrincipalReader, actor: Principal, name: str) -> PrincipalState:
    """The principal and whether it is disabled, as :func:`get_principal` sees it."""
    require_admin(actor)
    return _visible(store, actor, name)


def principal_dict(p: Principal, disabled: bool = False) -> dict[str, Any]:
    return {
        "name": p.name,
        "perms": sorted(p.perms),
        "tier": p.tier,
        "scopes": list(p.scopes),
        "active_scope": p.active_scope,
        "groups": sorted(p.groups),
        "doc_quota": p.doc_quota,
        "disabled": disabled,
    }


def list_principals(store: PrincipalReader, actor: Principal) -> list[dict[str, Any]]:
    require_admin(actor)
    return [
        principal_dict(st.principal, st.disabled)
        for st in store.every()
        if _manageable(actor, st.principal)
    ]


def create_principal(
    store: PrincipalWriter, actor: Principal, spec: dict[str, Any]
) -> tuple[Principal, str, str]:
    """Create a principal and its first key; returns (principal, key_id, key)."""
    require_admin(actor)
    allowed = {
        "name",
        "perms",
        "tier",
        "scopes",
        "active_scope",
        "groups",
        "doc_quota",
        "expires_at",
    }
    unknown = set(spec) - allowed
    if unknown:
        raise ValidationError(f"unknown field(s): {sorted(unknown)}")
    spec = _fields(spec)
    expires = spec.get("expires_at")
    name = spec.get("name")
    if not isinstance(name, str) or not name or len(name) > 64 or not name.isascii():
        raise ValidationError("name: 1-64 ASCII characters", field="name")
    perms = list(spec.get("perms") or ["read"])
    tier = str(spec.get("tier") or ("free" if actor.is_operator else actor.tier))
    scopes = list(spec.get("scopes") or [])
    groups = list(spec.get("groups") or [])
    quota = spec.get("doc_quota")
    check_grant(actor, perms=perms, tier=tier, scopes=scopes, groups=groups, doc_quota=quota)
    p = pm.create_principal(
        store,
        name,
        perms=perms,
        tier=tier,
        scopes=scopes,
        active_scope=spec.get("active_scope"),
        groups=groups,
        doc_quota=quota,
    )
    # Its first key is a key like any other: a name that already owns Units (ingested with
    # ``acl_owner`` before the principal existed) must not read what the actor cannot.
    may_issue_for(store, actor, p)
    kid, key = pm.add_key(store, p.id, expires_at=expires, issued_by=actor.name)
    return p, kid, key


def update_principal(
    store: PrincipalWriter, actor: Principal, name: str, changes: dict[str, Any]
) -> Principal:
    require_admin(actor)
    allowed = {"perms", "tier", "scopes", "active_scope", "groups", "doc_quota", "disabled"}
    unknown = set(changes) - allowed
    if unknown:
        raise ValidationError(f"unknown field(s): {sorted(unknown)}")
    changes = _fields(changes)
    if "scopes" in changes and not changes["scopes"]:
        raise ValidationError("a principal needs at least one scope", field="scopes")
    state = _visible(store, actor, name)
    target = state.principal
    may_manage(actor, target)
    perms = list(changes.get("perms", target.perms))
    tier = changes.get("tier", target.tier)
    scopes = list(changes.get("scopes", target.scopes))
    groups = list(changes.get("groups", target.groups))
    quota = changes.get("doc_quota", target.doc_quota)
    check_grant(
        actor,
        perms=perms if "perms" in changes else None,
        tier=tier if "tier" in changes else None,
        scopes=scopes if "scopes" in changes else None,
        groups=groups if "groups" in changes else None,
        doc_quota=quota if "doc_quota" in changes else "unset",
    )
    if "active_scope" in changes:
        active = changes["active_scope"]  # validated below: must lie within the scopes
    else:
        active = target.active_scope if within_any(target.active_scope, scopes) else scopes[0]
    perms_l, scopes_l, active = pm.validate_principal_fields(perms, tier, scopes, active)
    was_disabled = state.disabled
    disabled = bool(changes.get("disabled", was_disabled))
    after = Principal(
        id=target.id,
        name=target.name,
        perms=frozenset(perms_l),
        tier=tier,
        scopes=tuple(scopes_l),
        active_scope=active,
        groups=frozenset(pm.validate_groups(groups)),
        doc_quota=quota,
    )
    check_keeps_admin(
        store, actor, target, was_disabled=was_disabled, after=after, disabled=disabled
    )
    store.update(after, disabled)
    return get_principal(store, OPERATOR, name)


def list_keys(store: PrincipalReader, actor: Principal, name: str) -> list[dict[str, Any]]:
    require_admin(actor)
    target = get_principal(store, actor, name)
    return [
        {
            "key_id": k.key_id,
            "prefix": k.prefix,
            "created_at": k.created_at,
            "expires_at": k.expires_at,
            "revoked_at": k.revoked_at,
            "last_used_at": k.last_used_at,
            "issued_by": k.issued_by,
        }
        for k in store.keys_of(target.id)
    ]


def _key_owner(
    store: PrincipalReader, actor: Principal, key_id: str
) -> tuple[KeyRecord, Principal]:
    """The key and its principal, when the actor sees that principal; else 404."""
    k = store.key(key_id)
    if k is None:
        raise NotFoundError("key not found")
    try:
        target = get_principal(store, actor, k.principal_name)
    except NotFoundError:
        raise NotFoundError("key not found") from None
    return k, target


def create_key(
    store: PrincipalWriter, actor: Principal, name: str, expires_at: int | None = None
) -> tuple[str, str]:
    require_admin(actor)
    target = get_principal(store, actor, name)
    may_issue_for(store, actor, target)
    return pm.add_key(store, target.id, expires_at=expires_at, issued_by=actor.name)


def revoke_key(store: PrincipalWriter, actor: Principal, key_id: str) -> str:
    require_admin(actor)
    k, target = _key_owner(store, actor, key_id)
    may_manage(actor, target)
    store.revoke_key(key_id, _now())
    return k.principal_name


def rotate_key(
    store: PrincipalWriter, actor: Principal, key_id: str, overlap_s: int = 0
) -> tuple[str, str, str]:
    """A new key for the same principal; the old one keeps working for ``overlap_s`` seconds."""
    require_admin(actor)
    if overlap_s < 0 or overlap_s > 30 * 86400:
        raise ValidationError("overlap_s must be between 0 and 30 days", field="overlap_s")
    k, target = _key_owner(store, actor, key_id)
    may_issue_for(store, actor, target)
    if k.revoked_at is not None:
        raise ValidationError("cannot rotate a revoked key", field="key_id")
    until = _now() + overlap_s * 1000
    if overlap_s == 0:
        store.revoke_key(key_id, _now())  # not revoked yet: checked above, in this transaction
    else:
        current = k.expires_at
        store.set_key_expiry(key_id, min(current, until) if current else until)
    kid, key = pm.add_key(store, k.principal_id, expires_at=k.expires_at, issued_by=actor.name)
    return k.principal_name, kid, key
