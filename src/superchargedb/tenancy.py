"""Tenant operations on the facade: principals, keys and the audit chain, each change audited.

Kept apart from ``service.py`` so the facade stays one concept per module; ``Service`` mixes
this in.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from . import acting
from .auth import admin
from .auth import principals as principals_mod
from .auth.admin import require_admin
from .errors import ValidationError
from .readfilter import ancestors
from .types import Principal

if TYPE_CHECKING:
    from .settings import Settings
    from .storage.protocols_auth import AuthStore, AuthTx
    from .storage.protocols_reads import AuditTrail, ChainReport


@dataclass(frozen=True)
class TierCaps:
    """What one principal of a tier may hold; None = no cap."""

    object_bytes: int | None
    media_pages: int | None
    media_minutes: int | None


def tier_caps(settings: Settings, tier: str) -> TierCaps:
    """The tier table of storage caps (settings ``SCDB_{FREE,PRO}_*``; enterprise uncapped)."""
    if tier not in ("free", "pro"):
        return TierCaps(None, None, None)

    def cap(name: str) -> int | None:
        value = int(getattr(settings, f"{tier}_{name}"))
        return value if value > 0 else None

    return TierCaps(cap("object_bytes"), cap("media_pages"), cap("media_minutes"))


class TenancyMixin:
    auth_store: AuthStore
    audit_key: bytes
    audit_trail: AuditTrail

    @contextmanager
    def _audited(self, actor: Principal, action: str, record: dict[str, Any]) -> Iterator[AuthTx]:
        """A write transaction that appends ``record`` (filled in by the body) to the chain,
        committed with the change or not at all (D-182)."""
        with self.auth_store.write() as tx:
            yield tx
            tx.audit.append(actor, action, record)

    def admin_create_principal(self, actor: Principal, spec: Any) -> dict[str, Any]:
        if not isinstance(spec, dict):
            raise ValidationError("body must be a JSON object")
        record: dict[str, Any] = {}
        with self._audited(actor, "principal.create", record) as tx:
            p, kid, key = admin.create_principal(tx.principals, actor, spec)
            record.update(admin.principal_dict(p), key_id=kid)
        return {"principal": admin.principal_dict(p), "key_id": kid, "key": key}

    def seed_principal(
        self,
        name: str,
        key: str,
        *,
        perms: list[str],
        tier: str,
        scopes: list[str],
        active_scope: str,
        groups: list[str],
        doc_quota: int | None,
    ) -> bool:
        """The operator's seeding of a principal with a known ``key`` (the demo's fixed
        principals), unless one of that name exists; True when created. Not audited, as
        seeding never was (D-189)."""
        with self.auth_store.write() as tx:
            if tx.principals.named(name) is not None:
                return False
            p = principals_mod.create_principal(
                tx.principals,
                name,
                perms=perms,
                tier=tier,
                scopes=scopes,
                active_scope=active_scope,
                groups=groups,
                doc_quota=doc_quota,
            )
            principals_mod.add_key(tx.principals, p.id, key)
        return True

    def admin_list_principals(self, actor: Principal) -> dict[str, Any]:
        return {"principals": admin.list_principals(self.auth_store.principals, actor)}

    def admin_get_principal(self, actor: Principal, name: str) -> dict[str, Any]:
        state = admin.get_state(self.auth_store.principals, actor, name)
        return admin.principal_dict(state.principal, state.disabled)

    def admin_update_principal(self, actor: Principal, name: str, changes: Any) -> dict[str, Any]:
        if not isinstance(changes, dict):
            raise ValidationError("body must be a JSON object")
        record: dict[str, Any] = {"name": name}
        with self._audited(actor, "principal.update", record) as tx:
            admin.update_principal(tx.principals, actor, name, changes)
            record.update(changes=sorted(changes))
        return self.admin_get_principal(admin.OPERATOR, name)

    def admin_create_key(
        self, actor: Principal, name: str, expires_at: int | None = None
    ) -> dict[str, Any]:
        record: dict[str, Any] = {"principal": name}
        with self._audited(actor, "key.create", record) as tx:
            kid, key = admin.create_key(tx.principals, actor, name, expires_at)
            record["key_id"] = kid
        return {"key_id": kid, "key": key, "expires_at": expires_at}

    def admin_list_keys(self, actor: Principal, name: str) -> dict[str, Any]:
        return {"keys": admin.list_keys(self.auth_store.principals, actor, name)}

    def admin_revoke_key(self, actor: Principal, key_id: str) -> dict[str, Any]:
        record: dict[str, Any] = {"key_id": key_id}
        with self._audited(actor, "key.revoke", record) as tx:
            record["principal"] = admin.revoke_key(tx.principals, actor, key_id)
        return {"revoked": key_id}

    def admin_rotate_key(self, actor: Principal, key_id: str, overlap_s: int = 0) -> dict[str, Any]:
        record: dict[str, Any] = {"key_id": key_id, "overlap_s": overlap_s}
        with self._audited(actor, "key.rotate", record) as tx:
            name, kid, key = admin.rotate_key(tx.principals, actor, key_id, overlap_s)
            record.update(principal=name, new_key_id=kid)
        return {"key_id": kid, "key": key, "old_key_id": key_id, "overlap_s": overlap_s}

    def audit_verify(self, actor: Principal) -> dict[str, Any]:
        """The operator gets the whole report; a tenant admin whether the chain verifies and
        its own tenants' record count, nothing about the rest of the deployment (no global
        count, no head, no position of a bad record: D-188)."""
        require_admin(actor)
        if actor.is_operator:
            with acting.as_process():  # every chain of the deployment, not one cluster's
                return chain_dict(self.audit_trail.verify_chain())
        report = self.audit_trail.verify_chain()
        tenants = {ancestors(s)[0] for s in actor.scopes}  # a tenant is a scope root
        return {"ok": report.ok, "records": self.audit_trail.tenant_records(tenants)}

    def audit_export(self) -> Iterator[str]:
        """The chain as JSON lines, each record's body as stored (``audit verify`` offline)."""
        for e in self.audit_trail.entries():
            yield (
                f'{{"seq":{e.seq},"prev_hash":"{e.prev_hash}","hash":"{e.hash}",'
                f'"record":{e.record_json}}}'
            )


def chain_dict(r: ChainReport) -> dict[str, Any]:
    """The operator's report: the head when the chain verifies, else its first break."""
    out: dict[str, Any]
    if r.ok:
        out = {"ok": True, "records": r.records, "head": r.head}
    else:
        out = {"ok": False, "records": r.records, "first_bad_seq": r.first_bad_seq}
        out["reason"] = r.reason
    if r.chains:
        out["chains"] = {name: chain_dict(c) for name, c in r.chains.items()}
    return out
