"""The demo: the spec's principals and a small corpus written for this project.

Documents are ingested through the service facade exactly as an API client would.
"""

from __future__ import annotations

import dataclasses
from importlib import resources
from typing import Any

from .. import acting
from ..service import Service

# (principal name, key, perms, tier, scopes, active scope, groups, quota)
PRINCIPALS: list[tuple[str, str, list[str], str, list[str], str, list[str], int | None]] = [
    (
        "alice",
        "aegis_sk_alice",
        ["read", "write", "admin"],
        "pro",
        ["acme/alpha"],
        "acme/alpha/backend",
        ["eng-backend"],
        None,
    ),
    (
        "bob",
        "aegis_sk_bob",
        ["read"],
        "pro",
        ["acme/alpha"],
        "acme/alpha/backend",
        ["eng-backend"],
        None,
    ),
    (
        "carol",
        "aegis_sk_carol",
        ["read", "write"],
        "free",
        ["acme/beta"],
        "acme/beta",
        ["beta-team"],
        50,
    ),
]

# (file, owner, scope, groups)
DOCUMENTS: list[tuple[str, str, str, list[str]]] = [
    ("failover-runbook.md", "alice", "acme/alpha/backend", ["eng-backend"]),
    ("q4-forecast.md", "alice", "acme/alpha/backend", ["eng-backend"]),
    ("oncall-handbook.md", "alice", "acme/alpha/backend", ["eng-backend"]),
    ("api-style.md", "alice", "acme/alpha", ["eng-backend", "eng-frontend"]),
    ("beta-launch.md", "carol", "acme/beta", ["beta-team"]),
    ("beta-pricing.txt", "carol", "acme/beta", ["beta-team"]),
]


def seed_principals(svc: Service) -> None:
    for name, key, perms, tier, scopes, active, groups, quota in PRINCIPALS:
        svc.seed_principal(
            name,
            key,
            perms=perms,
            tier=tier,
            scopes=scopes,
            active_scope=active,
            groups=groups,
            doc_quota=quota,
        )


def seed(svc: Service) -> dict[str, Any]:
    """Create the demo principals and ingest the demo corpus (idempotent)."""
    seed_principals(svc)
    keys = {name: key for name, key, *_ in PRINCIPALS}
    results = {}
    files = resources.files(__package__)
    for fname, owner, scope, groups in DOCUMENTS:
        text = (files / fname).read_text(encoding="utf-8")
        # The operator seeds each document on its owner's behalf: api-style is shared with a
        # group its owner is not in, which an owner's own key may not do (acl.may_add_groups).
        p = dataclasses.replace(svc.authenticate(f"Bearer {keys[owner]}"), is_operator=True)
        unit = {
            "text": text,
            "scope": scope,
            "doc_id": fname.rsplit(".", 1)[0],
            "modality": "markdown" if fname.endswith(".md") else "text",
            "source_uri": f"{scope}/docs/{fname}",
            "mime": "text/markdown" if fname.endswith(".md") else "text/plain",
            "acl_groups": groups,
        }
        with acting.acting_for(p.scopes):  # as the gate would act for the owner's key
            results[fname] = svc.ingest(p, {"units": [unit]}, scope)
    return results
