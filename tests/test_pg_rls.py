"""Row-level security on PostgreSQL (D-263): the database refuses what a broken filter would let
through, the API's connections act for the request's tenants and go back to the pool clean."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import pg_stack
from conftest import add_principal, auth, make_service
from superchargedb import acting
from superchargedb.errors import ForbiddenError
from superchargedb.readfilter import ReadFilter
from superchargedb.storage.protocols import JobSpec

if pg_stack.available():
    pytest.skip(pg_stack.available() or "", allow_module_level=True)

import psycopg  # noqa: E402

from superchargedb.storage.postgres import filter_sql, rls  # noqa: E402
from superchargedb.storage.postgres.backend import PgBackend  # noqa: E402
from superchargedb.storage.postgres.search_store import PgSearchStore  # noqa: E402

DIM = 8


@pytest.fixture
def backend(tmp_path: Path) -> Iterator[PgBackend]:
    """Three Units in ``alpha`` (one in a sub-scope), three in ``beta``, a doc and a job each."""
    b = PgBackend.open(
        pg_stack.database(tmp_path),
        dim=DIM,
        model_id="m",
        audit_key=bytes(32),
        objects_dir=tmp_path / "o",
    )
    scopes = ["alpha", "alpha/eng", "alpha", "beta", "beta/x", "beta"]
    with b.write() as tx:
        for i, s in enumerate(scopes):
            tx.units.insert(pg_stack.unit(i, s), np.ones(DIM, np.float32))
        for tenant in ("alpha", "beta"):
            tx.docs.reserve([(tenant, "doc", "alice")], "alice", 10)
            tx.jobs.enqueue(JobSpec("k", tenant, "alice", "alice", (), "doc", "{}"))
    yield b
    b.close()


def _count(b: PgBackend, table: str) -> int:
    with b._conn() as conn:
        row = conn.execute(f"SELECT count(*) FROM {table}".encode()).fetchone()
    return int(row[0]) if row else -1


def _lexical(b: PgBackend, scopes: tuple[str, ...]) -> set[int]:
    """The lexical leg in SQL (the derived index's candidates come from its own signature
    filter, which this file does not break; its exact re-check is the SQL filter again)."""
    rf = ReadFilter(principal="alice", scopes=scopes, groups=frozenset(), planes=("text",))
    store = PgSearchStore(b._conn, b.exact_max, None)
    return set(store.view(rf).lexical(["shared"], 50, defer_check=False).keys)


def _break_filter(monkeypatch: pytest.MonkeyPatch) -> None:
    """The bug row-level security is there for: a filter that admits every row."""
    monkeypatch.setattr(filter_sql, "scope_sql", lambda col, scopes: ("TRUE", []))
    monkeypatch.setattr(filter_sql, "acl_sql", lambda alias, owner, groups: ("TRUE", []))


def test_a_broken_filter_is_held_to_the_acting_tenant(
    backend: PgBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert len(_lexical(backend, ("beta",))) == 3  # the real filter
    _break_filter(monkeypatch)
    assert len(_lexical(backend, ("beta",))) == 6  # the process itself: not confined
    with acting.acting_for(["beta/x"]):
        assert len(_lexical(backend, ("beta",))) == 3
    # The teeth: the policy is what held it, not something else in the path.
    monkeypatch.setattr(rls, "enter", lambda conn, tenants: None)
    with acting.acting_for(["beta/x"]):
        assert len(_lexical(backend, ("beta",))) == 6


def test_each_tenant_table_shows_only_the_acting_tenant(backend: PgBackend) -> None:
    expected = {"units": 3, "docs": 1, "jobs": 1, "objects": 0}
    for table, n in expected.items():
        with acting.acting_for(["beta"]):
            assert _count(backend, table) == n, table
        with acting.acting_for(["gamma"]):  # a tenant with nothing
            assert _count(backend, table) == 0, table
        assert _count(backend, table) == (2 * n if table != "units" else 6), table
    with acting.acting_for([]):  # no tenant at all: no row
        assert _count(backend, "units") == 0
    with acting.acting_for(["beta"]):
        with pytest.raises(ForbiddenError), backend.write() as tx:
            tx.units.insert(pg_stack.unit(99, "alpha"), np.ones(DIM, np.float32))
        with backend._conn() as conn, pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("UPDATE meta SET value = 'x' WHERE key = 'model_id'")
    assert _count(backend, "units") == 6  # the refused write left nothing behind


def test_the_role_owns_nothing_and_cannot_bypass(backend: PgBackend) -> None:
    with psycopg.connect(backend.url, autocommit=True) as conn:
        role = conn.execute(
            "SELECT rolcanlogin, rolbypassrls, rolsuper FROM pg_roles WHERE rolname = %s",
            (rls.ROLE,),
        ).fetchone()
        owned = conn.execute(
            "SELECT count(*) FROM pg_class c JOIN pg_roles r ON r.oid = c.relowner"
            " WHERE r.rolname = %s",
            (rls.ROLE,),
        ).fetchone()
        policed = {
            str(r[0])
            for r in conn.execute(
                "SELECT relname FROM pg_class WHERE relrowsecurity AND relkind = 'r'"
            )
        }
    assert role == (False, False, False)
    assert owned == (0,)
    assert policed == set(rls.TENANT_TABLES) | set(rls.UNIT_TABLES)


def test_the_api_acts_for_the_callers_tenants_and_returns_clean_connections(
    tmp_path: Path, embedder: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from fastapi.testclient import TestClient

    from superchargedb.api.app import create_app

    url = pg_stack.database(tmp_path)
    svc = make_service(tmp_path / "data", embedder, database_url=url)
    try:
        keys = {
            t: add_principal(svc, f"p{t}", perms=["read", "write"], scopes=[t])
            for t in ("alpha", "beta")
        }
        seen: list[tuple[str, ...] | None] = []
        real_enter = rls.enter

        def spy(conn: psycopg.Connection[Any], tenants: Any) -> None:
            seen.append(tuple(tenants))
            real_enter(conn, tenants)

        monkeypatch.setattr(rls, "enter", spy)
        with TestClient(create_app(svc), raise_server_exceptions=False) as c:
            for t, key in keys.items():
                r = c.post(
                    "/v1/ingest",
                    headers=auth(key),
                    json={"units": [{"text": f"the {t} runbook", "scope": t, "doc_id": "rb"}]},
                )
                assert r.status_code == 200, r.text
            seen.clear()
            _break_filter(monkeypatch)
            r = c.post("/v1/search?scope=beta", headers=auth(keys["beta"]), json={"q": "runbook"})
            assert r.status_code == 200, r.text
            texts = [h["text"] for h in r.json()["hits"]]
        assert texts == ["the beta runbook"]
        assert seen and set(seen) == {("beta",)}
        backend = svc.parts.backend
        assert isinstance(backend, PgBackend)
        with backend.pool.connection() as conn:  # what the next borrower gets
            who = conn.execute(
                "SELECT current_user, coalesce(current_setting(%s, true), '')", (rls.GUC,)
            ).fetchone()
        assert who == ("postgres", "")
    finally:
        svc.close()


def test_the_group_leg_keeps_its_index_under_the_policy(backend: PgBackend) -> None:
    with psycopg.connect(backend.url, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO units (unit_id, scope, doc_id, plane, modality, text, acl_owner,"
            " acl_groups, content_hash, created_at, event_at, model_id, terms, dl, embedding)"
            " SELECT 'bulk' || i, 'acme', 'd' || i, 'text', 'text', 'x', 'o' || i,"
            " ARRAY['g' || (i %% 400)], md5(i::text), 1, 1, 'm', ARRAY['x'], 1,"
            " array_fill(1, ARRAY[%s])::halfvec"
            " FROM generate_series(1, 4000) i",
            (DIM,),
        )
        conn.execute("ANALYZE units")
    with psycopg.connect(backend.url, autocommit=True) as conn:
        assert not rls.degraded_plans(conn)
    rf = ReadFilter(
        principal="nobody", scopes=("acme",), groups=frozenset({"g7"}), planes=("text",)
    )
    where, params = filter_sql.where_sql(rf)
    with acting.acting_for(["acme"]), backend._conn() as conn:
        plan = "\n".join(
            str(r[0])
            for r in conn.execute(
                f"EXPLAIN SELECT count(*) FROM units u WHERE {where}".encode(), params
            )
        )
        got = conn.execute(f"SELECT count(*) FROM units u WHERE {where}".encode(), params)
        n = got.fetchone()
    assert "units_groups" in plan, plan
    assert n == (10,)
