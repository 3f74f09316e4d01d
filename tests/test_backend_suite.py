"""The embedded-only list of the PostgreSQL pass (backend_suite.py) stays honest: every entry
says why, and names a test file (and test) that exists."""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from backend_suite import BUILT_BY_HELPERS, EMBEDDED_ONLY, builds_a_service, embedded_only

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("entry", sorted(EMBEDDED_ONLY))
def test_every_embedded_only_entry_names_a_test_and_a_reason(entry: str) -> None:
    why = EMBEDDED_ONLY[entry]
    assert len(why.split()) >= 8, f"{entry}: say why it cannot run on PostgreSQL"
    path, _, name = entry.partition("::")
    source = (ROOT / path).read_text()
    if name:
        assert re.search(rf"^def {re.escape(name)}\(", source, re.M), entry


def test_an_entry_matches_its_tests_only() -> None:
    assert embedded_only("tests/test_audit.py::test_x") is not None
    assert embedded_only("tests/test_audit_more.py::test_x") is None
    node = "tests/test_cli_maintenance.py::test_backup_restore_reindex_through_the_cli"
    assert embedded_only(node) is not None
    assert embedded_only(node + "_more") is None
    assert embedded_only("tests/test_cli_maintenance.py::test_other") is None


def test_a_service_test_is_recognised(request: pytest.FixtureRequest) -> None:
    assert not builds_a_service(request.node)  # this one builds none
    by_fixture = SimpleNamespace(fixturenames=["tmp_path", "client"], module=None, nodeid="t")
    assert builds_a_service(by_fixture)  # type: ignore[arg-type]
    direct = SimpleNamespace(fixturenames=[], module=SimpleNamespace(make_service=1), nodeid="t")
    assert builds_a_service(direct)  # type: ignore[arg-type]
    helped = SimpleNamespace(fixturenames=[], module=None, nodeid=BUILT_BY_HELPERS[0] + "::t")
    assert builds_a_service(helped)  # type: ignore[arg-type]
