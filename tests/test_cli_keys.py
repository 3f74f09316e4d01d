"""The operator's offline ``keys`` and ``audit`` commands on a real data dir (no server, no
model): a new principal and its key, a second key for it, the listing, rotate, revoke, and the
audit chain that recorded each change."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from superchargedb.cli.main import app
from superchargedb.operator import OperatorStore
from superchargedb.settings import Settings


def _run(*args: str) -> tuple[int, str]:
    r = CliRunner().invoke(app, list(args))
    return r.exit_code, r.stdout


def test_keys_and_audit_offline(tmp_path: Path) -> None:
    data = str(tmp_path / "d")
    code, out = _run(
        "keys", "create", "--principal", "ops", "--scopes", "acme/ops", "--perms", "read,write",
        "--data", data,
    )  # fmt: skip
    assert code == 0, out
    first = json.loads(out)
    assert first["principal"]["scopes"] == ["acme/ops"] and first["key"].startswith("aegis_sk_")
    assert first["principal"]["active_scope"] == "acme/ops"  # no --active-scope: the first one
    # The principal exists now: the same command adds a key to it (and ignores the new fields).
    code, out = _run("keys", "create", "--principal", "ops", "--scopes", "x", "--data", data)
    assert code == 0, out
    second = json.loads(out)
    assert set(second) == {"key_id", "key", "expires_at"}
    code, out = _run("keys", "list", "--data", data)
    assert code == 0, out
    (listed,) = [json.loads(line) for line in out.splitlines()]
    assert listed["name"] == "ops"
    assert [k["key_id"] for k in listed["keys"]] == [first["key_id"], second["key_id"]]
    assert first["key"] not in out and second["key"] not in out  # only the prefixes
    code, out = _run("keys", "rotate", second["key_id"], "--data", data)
    assert code == 0, out
    rotated = json.loads(out)
    code, out = _run("keys", "revoke", first["key_id"], "--data", data)
    assert code == 0 and json.loads(out) == {"revoked": first["key_id"]}
    code, out = _run("keys", "revoke", "k_missing", "--data", data)
    assert code == 1
    with OperatorStore(Settings(data_dir=Path(data))) as st:
        state = st.auth_store.principals.named("ops")
        assert state is not None and not state.disabled
        keys = {k.key_id: k for k in st.auth_store.principals.keys_of(state.principal.id)}
        assert set(keys) == {first["key_id"], second["key_id"], rotated["key_id"]}
        assert keys[first["key_id"]].revoked_at is not None
        assert keys[second["key_id"]].revoked_at is not None  # rotated without overlap
        assert keys[rotated["key_id"]].revoked_at is None
        assert all(k.issued_by == "operator" for k in keys.values())
        actions = [json.loads(line)["record"]["action"] for line in st.audit_export()]
    assert actions == ["principal.create", "key.create", "key.rotate", "key.revoke"]
    code, out = _run("audit", "verify", "--data", data)
    assert code == 0 and json.loads(out)["ok"], out
