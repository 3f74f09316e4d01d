"""``superchargedb backup``, ``restore`` and ``reindex`` end to end through the CLI (the data
dir's ``Maintenance``): a backup restores with every Unit and a verified audit chain, a model
change re-embeds every Unit, and a bad target is a clear error with nothing written."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from conftest import add_principal, make_service
from superchargedb.cli.main import app
from superchargedb.models.embedder import make_embedder
from superchargedb.storage.sqlite.catalog import Catalog


def _json(output: str) -> Any:
    return json.loads(output[output.index("{") : output.rindex("}") + 1])


def test_backup_restore_reindex_through_the_cli(tmp_path: Path, embedder: Any) -> None:
    svc = make_service(tmp_path / "orig", embedder)
    try:
        add_principal(svc, "w", perms=["read", "write", "admin"], scopes=["acme"])
        p = svc.authenticate("Bearer aegis_sk_test_w")
        units = [{"text": f"maintenance note {i}", "doc_id": f"m{i}"} for i in range(3)]
        res = svc.ingest(p, {"units": units}, "acme/ops")
        assert all(r["ok"] for r in res["results"])
        ids = {r["unit_id"] for r in res["results"]}
    finally:
        svc.close()
    runner = CliRunner()

    out = runner.invoke(app, ["backup", str(tmp_path / "bk"), "--data", str(tmp_path / "orig")])
    assert out.exit_code == 0, out.output
    manifest = _json(out.output)
    assert manifest["units"] == 3 and manifest["model_id"] == embedder.model_id
    assert manifest["audit_head"] is None or manifest["audit_head"]["seq"] >= 1
    on_disk = json.loads((tmp_path / "bk" / "manifest.json").read_text())
    assert manifest == on_disk

    again = runner.invoke(app, ["backup", str(tmp_path / "bk"), "--data", str(tmp_path / "orig")])
    assert again.exit_code == 1 and "not empty" in again.output

    new = tmp_path / "new"
    out = runner.invoke(app, ["restore", str(tmp_path / "bk"), "--data", str(new)])
    assert out.exit_code == 0, out.output
    report = _json(out.output)
    assert report["ok"] is True and report["units"] == 3 and report["audit"]["ok"]
    out = runner.invoke(app, ["restore", str(tmp_path / "bk"), "--data", str(new)])
    assert out.exit_code == 1 and "not empty" in out.output

    # A different window is a different model id: every Unit is re-embedded, then served.
    env = {"SCDB_EMBED_MAX_TOKENS": "128"}
    out = runner.invoke(app, ["reindex", "--data", str(new)], env=env)
    assert out.exit_code == 0, out.output
    done = _json(out.output)
    assert done["reembedded"] == 3 and done["model_id"] != embedder.model_id
    catalog = Catalog(new / "catalog.db")
    try:
        models = {r[0] for r in catalog.reader().execute("SELECT model_id FROM units")}
    finally:
        catalog.close()
    assert models == {done["model_id"]}
    out = runner.invoke(app, ["reindex", "--data", str(new)], env=env)
    assert out.exit_code == 0 and _json(out.output)["reembedded"] == 0

    svc = make_service(new, make_embedder("minilm-int8", max_tokens=128))
    try:
        p = svc.authenticate("Bearer aegis_sk_test_w")
        hits = svc.search(p, {"q": "maintenance note", "top_k": 5}, query_scope="acme")["hits"]
        assert {h["unit_id"] for h in hits} == ids
    finally:
        svc.close()
