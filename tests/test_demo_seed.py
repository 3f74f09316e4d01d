"""The demo's principals are seeded through the facade: once, with their known keys; a second
start (``serve --demo`` on the same data dir) creates nothing and replaces nobody."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from conftest import make_service
from superchargedb.auth.admin import OPERATOR
from superchargedb.demo import PRINCIPALS, seed_principals
from superchargedb.errors import AuthError


def test_seed_principals_is_idempotent(tmp_path: Path, embedder: Any) -> None:
    svc = make_service(tmp_path / "data", embedder)
    try:
        assert svc.seed_principal(
            "carol",
            "aegis_sk_carol_own",
            perms=["read"],
            tier="free",
            scopes=["acme/beta"],
            active_scope="acme/beta",
            groups=[],
            doc_quota=None,
        )
        seed_principals(svc)
        seed_principals(svc)
        names = [p["name"] for p in svc.admin_list_principals(OPERATOR)["principals"]]
        assert sorted(names) == sorted(name for name, *_ in PRINCIPALS)
        alice = svc.authenticate("Bearer aegis_sk_alice")
        assert alice.scopes == ("acme/alpha",) and alice.groups == frozenset({"eng-backend"})
        assert svc.authenticate("Bearer aegis_sk_bob").perms == frozenset({"read"})
        # carol existed before the seed: her own key still works, the demo's was never added.
        assert svc.authenticate("Bearer aegis_sk_carol_own").name == "carol"
        with pytest.raises(AuthError):
            svc.authenticate("Bearer aegis_sk_carol")
        assert not svc.seed_principal(
            "alice",
            "aegis_sk_other",
            perms=["read"],
            tier="free",
            scopes=["x"],
            active_scope="x",
            groups=[],
            doc_quota=None,
        )
    finally:
        svc.close()
