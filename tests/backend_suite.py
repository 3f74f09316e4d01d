"""Which tests run on the server stack's backend too, and the ones that stay embedded-only.

`make test` runs the suite on the embedded default, then again with `SCDB_TEST_BACKEND=postgres`
(`pytest -p backend_suite`), where every test that builds a service (the `svc`, `client` and
`live` fixtures, or `make_service`/`open_service` directly) runs on a PostgreSQL database of its
own and the rest are deselected (they run once, above). A test that cannot run there is listed
in ``EMBEDDED_ONLY`` with the reason; ``test_backend_suite.py`` fails on an entry without one
or one that names no test.
"""

from __future__ import annotations

import os

import pytest

SERVICE_FIXTURES = {"svc", "client", "live"}
# Modules whose services a helper module builds (through make_service).
BUILT_BY_HELPERS = ("tests/test_isolation_property.py",)

# node id, or a prefix of one (a whole file: "tests/test_x.py"), -> why it is embedded-only.
EMBEDDED_ONLY: dict[str, str] = {
    "tests/test_audit.py": (
        "tampers with the SQLite catalog's audit rows by hand; the PostgreSQL chain's tamper"
        " cases are tests/test_pg_backend.py and the contract suite's audit checks"
    ),
    "tests/test_backup_reindex.py": (
        "drives the SQLite backup, restore and reindex functions directly; PostgreSQL's"
        " Maintenance (pg_dump backup, restore, reindex) runs in the contract suite"
    ),
    "tests/test_isolation_property.py::test_mutations_are_caught": (
        "injects each bug into the SQLite backend's SQL to prove the property has teeth; the"
        " property itself runs on PostgreSQL, and the contract suite's teeth cover its rules"
    ),
    "tests/test_isolation_objects.py::test_object_mutations_are_caught": (
        "injects each bug into the SQLite objects catalog to prove the property has teeth; the"
        " object property itself runs on PostgreSQL"
    ),
    "tests/test_migrate.py": (
        "uses both backends whatever the pass: its source is always an embedded data dir and"
        " its target a PostgreSQL database of its own, so it runs once, in the embedded pass"
    ),
    "tests/test_cli_maintenance.py::test_backup_restore_reindex_through_the_cli": (
        "restores into fresh data dirs, which on PostgreSQL would be fresh databases named by"
        " the CLI; PostgreSQL's Maintenance runs in the contract suite"
    ),
}


def builds_a_service(item: pytest.Item) -> bool:
    names = set(getattr(item, "fixturenames", ()))
    module = getattr(item, "module", None)
    direct = module is not None and any(
        hasattr(module, f) for f in ("make_service", "open_service", "build_components")
    )
    helped = item.nodeid.startswith(BUILT_BY_HELPERS)
    return bool(names & SERVICE_FIXTURES) or direct or helped


def embedded_only(nodeid: str) -> str | None:
    for prefix, why in EMBEDDED_ONLY.items():
        if nodeid == prefix or nodeid.startswith((prefix + "::", prefix + "[")):
            return why
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.environ.get("SCDB_TEST_BACKEND", "sqlite") != "postgres":
        return
    keep, drop = [], []
    for item in items:
        (keep if builds_a_service(item) else drop).append(item)
    for item in keep:
        why = embedded_only(item.nodeid)
        if why is not None:
            item.add_marker(pytest.mark.skip(reason=f"embedded-only: {why}"))
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep
