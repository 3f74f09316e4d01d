"""The operator's commands on the server stack's database (D-246): a key made offline, with no
model loaded and no data-dir lock, opens a running server's API, and the operator's audit
record joins the server's chain."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import pg_stack
from conftest import make_service
from superchargedb.auth.admin import OPERATOR
from superchargedb.errors import UnavailableError
from superchargedb.operator import OperatorStore
from superchargedb.settings import Settings


def test_a_key_made_by_the_operator_opens_the_running_server(tmp_path: Path, embedder: Any) -> None:
    url = pg_stack.database(tmp_path / "db")
    svc = make_service(tmp_path / "data", embedder, database_url=url)  # migrates, keeps serving
    try:
        with OperatorStore(Settings(data_dir=tmp_path / "ops", database_url=url)) as ops:
            out = ops.admin_create_principal(
                OPERATOR, {"name": "ci-bot", "perms": ["read"], "scopes": ["acme/alpha"]}
            )
        p = svc.authenticate(f"Bearer {out['key']}")
        assert p.name == "ci-bot" and p.scopes == ("acme/alpha",)
        assert svc.audit_trail.verify_chain().ok
    finally:
        svc.close()


def test_the_operator_refuses_a_database_no_server_has_migrated(tmp_path: Path) -> None:
    url = pg_stack.database(tmp_path / "empty")
    with pytest.raises(UnavailableError, match="start `superchargedb serve`"):
        OperatorStore(Settings(data_dir=tmp_path / "ops", database_url=url))
