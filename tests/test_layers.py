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


# No module above storage/sqlite/ opens the catalog's connection or runs a statement: SQL lives
# under storage/sqlite/ alone (docs/architecture.md, the storage seam). The regex is what such a
# use looks like; a module that needs one belongs under storage/sqlite/, behind a Protocol.
CATALOG_USE = re.compile(r"\.execute\(|\.executemany\(|catalog\.(reader|write|locked)\(\)")
# Below the seam, SQL is the point: the backends themselves, and the engine launchers' bootstrap
# (stack/postgres.py creates the vector extension in the server it starts).
BELOW_THE_SEAM = ("storage/sqlite/", "storage/postgres/", "stack/")


def test_no_sql_above_the_seam() -> None:
    pkg = ROOT / "src" / "superchargedb"
    using = {
        p.relative_to(pkg).as_posix()
        for p in pkg.rglob("*.py")
        if not p.relative_to(pkg).as_posix().startswith(BELOW_THE_SEAM)
        and CATALOG_USE.search(p.read_text())
    }
    assert not using, f"SQL above the storage seam: {sorted(using)}"


def test_the_sql_check_sees_a_use() -> None:
    """The pattern is not vacuous: the catalog uses the seam moved behind it match it."""
    for line in (
        "conn = self.catalog.reader()",
        "with self.catalog.write() as conn:",
        "with self.catalog.locked() as wconn:",
        'conn.execute("SELECT 1")',
        "conn.executemany(sql, rows)",
    ):
        assert CATALOG_USE.search(line), line
    assert not CATALOG_USE.search("with self.writes.write() as tx:")
