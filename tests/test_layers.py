"""The layering is enforced by import-linter's contracts in pyproject.toml (the same check
``make lint`` runs): a lower layer importing a higher one, a cycle between sibling modules, the
client importing the server or a non-api module importing the web framework fails here."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _lint_imports() -> str:
    exe = Path(sys.executable).with_name("lint-imports")
    if not exe.exists():
        found = shutil.which("lint-imports")
        if found is None:
            pytest.skip("import-linter is not installed: make setup (the dev extra)")
        exe = Path(found)
    return str(exe)


def test_import_contracts_hold() -> None:
    out = subprocess.run(
        [_lint_imports(), "--no-cache"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"},
    )
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
    assert "0 broken" in out.stdout


def test_contracts_have_teeth(tmp_path: Path) -> None:
    """A copy of the package with one upward import (storage importing the service) breaks
    the layers contract: the check is not vacuous."""
    pkg = tmp_path / "src"
    shutil.copytree(ROOT / "src" / "superchargedb", pkg / "superchargedb")
    bad = pkg / "superchargedb" / "storage" / "sqlite" / "units.py"
    bad.write_text(bad.read_text() + "\nfrom ...service import Service  # noqa\n")
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    out = subprocess.run(
        [_lint_imports(), "--no-cache"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PYTHONPATH": str(pkg), "PATH": "/usr/bin:/bin"},
    )
    assert out.returncode != 0
    assert "superchargedb.storage.sqlite.units -> superchargedb.service" in out.stdout


# Modules above storage/sqlite/ that still open the catalog's connection (SQL above the seam):
# the storage seam's remaining debt (docs/architecture.md). A new module here fails the test; a
# module that no longer needs the connection must leave the list, so it only shrinks.
SQL_DEBT = {
    "components.py",
    "wiring.py",
}
CATALOG_USE = re.compile(r"\.execute\(|\.executemany\(|catalog\.(reader|write|locked)\(\)")


def test_sql_above_the_seam_only_shrinks() -> None:
    pkg = ROOT / "src" / "superchargedb"
    using = {
        p.relative_to(pkg).as_posix()
        for p in pkg.rglob("*.py")
        if "storage/sqlite" not in p.relative_to(pkg).as_posix()
        and CATALOG_USE.search(p.read_text())
    }
    assert not using - SQL_DEBT, f"new SQL above the storage seam: {sorted(using - SQL_DEBT)}"
    assert not SQL_DEBT - using, f"no longer SQL, drop from SQL_DEBT: {sorted(SQL_DEBT - using)}"
