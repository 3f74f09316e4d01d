"""Shared fixtures: real temporary data dirs, the real default model, real servers."""

from __future__ import annotations

import inspect
import json
import logging
import os
import socket
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

import superchargedb  # noqa: F401  (imports onnxruntime before usearch)
from superchargedb.auth import principals as principals_mod
from superchargedb.models.embedder import Embedder, make_embedder
from superchargedb.service import Service
from superchargedb.settings import Settings
from superchargedb.storage.sqlite.backend import SqliteBackend
from superchargedb.wiring import open_service

pytest_plugins = ["stack_engines", "backend_suite"]  # engines on first use; the PG pass

# The audit key and anchors live outside any data dir; keep both away from the real home.
os.environ.setdefault("SCDB_AUDIT_KEY", "11" * 32)
os.environ.setdefault("XDG_CONFIG_HOME", tempfile.mkdtemp(prefix="scdb-config-"))
# Functional tests drive the server far faster than a client would; the rate-limit tests set
# their own limits explicitly.
os.environ.setdefault("SCDB_RATE_KEY_RPS", "0")
os.environ.setdefault("SCDB_RATE_IP_RPS", "0")


@pytest.fixture(scope="session")
def embedder() -> Embedder:
    return make_embedder("minilm-int8")


class DocMemoEmbedder:
    """The session's real model with document vectors memoized per text: suites that ingest
    the same corpus into a fresh Service per test pay for its embedding once. The model is
    deterministic, so a memoized vector is the vector it would compute; queries go to the
    model itself (its own LRU), and so do token counts and spans."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.model_id, self.dim, self.max_tokens = inner.model_id, inner.dim, inner.max_tokens
        self.memo: dict[str, np.ndarray] = {}

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        texts = list(texts)
        missing = [t for t in dict.fromkeys(texts) if t not in self.memo]
        if missing:
            for t, v in zip(missing, self.inner.embed(missing), strict=True):
                self.memo[t] = v
        return np.stack([self.memo[t] for t in texts]) if texts else self.inner.embed([])

    def embed_query(self, text: str) -> np.ndarray:
        return self.inner.embed_query(text)

    def count_tokens(self, text: str) -> int:
        return self.inner.count_tokens(text)

    def token_spans(self, text: str) -> list[tuple[int, int]]:
        return self.inner.token_spans(text)


@pytest.fixture(scope="session")
def memo_embedder(embedder: Embedder) -> DocMemoEmbedder:
    return DocMemoEmbedder(embedder)


@pytest.fixture
def fake() -> Iterator[Any]:
    """The OpenAI-compatible chat server the answer tests point their provider at."""
    from fake_openai import FakeOpenAI

    with FakeOpenAI() as f:
        yield f


# The backend every service the tests build runs on: the embedded default, or the server
# stack's PostgreSQL (`SCDB_TEST_BACKEND=postgres`, a database per data dir on the session's
# server). `make test` runs the server and service tests on both (backend_suite.py).
BACKEND = os.environ.get("SCDB_TEST_BACKEND", "sqlite")
if BACKEND not in ("sqlite", "postgres"):
    raise RuntimeError(f"SCDB_TEST_BACKEND={BACKEND!r}: sqlite or postgres")
if BACKEND == "postgres":
    # A service a test leaves open keeps its pool, which retries (and logs) every few seconds
    # once the module's database is dropped: noise, not a result.
    logging.getLogger("psycopg.pool").setLevel(logging.CRITICAL)


def make_service(tmp: Path, embedder: Embedder, **overrides: Any) -> Service:
    if BACKEND == "postgres" and "database_url" not in overrides:
        import pg_stack

        overrides["database_url"] = pg_stack.database(tmp)
    settings = Settings(data_dir=tmp, **overrides)
    return open_service(settings, embedder=embedder)


@pytest.fixture(scope="module", autouse=BACKEND == "postgres")
def _drop_test_databases() -> Iterator[None]:
    """After a module (its module-scoped services are closed by then), its databases go."""
    yield
    import pg_stack

    pg_stack.drop_created()


def embedded(svc: Service) -> SqliteBackend:
    """The service's backend as the embedded one, for a test that inspects SQLite internals
    (its catalog, index sync, vector store or job queue) rather than a Protocol."""
    backend = svc.parts.backend
    if BACKEND == "postgres" and not isinstance(backend, SqliteBackend):
        # The suite's PostgreSQL pass (backend_suite.py): what follows is the SQLite files'.
        caller = inspect.stack()[1]
        where = f"{Path(caller.filename).name}:{caller.lineno}"
        pytest.skip(f"embedded-only: {where} inspects the SQLite backend's own internals")
    assert isinstance(backend, SqliteBackend), f"not the embedded backend: {type(backend)}"
    return backend


def stored_unit_ids(svc: Service) -> set[str]:
    """Every Unit id the store holds, read from storage itself (no filter, either backend)."""
    return {str(r[0]) for r in stored_rows(svc, "SELECT unit_id FROM units")}


def stored_rows(svc: Service, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
    """The rows of a plain SELECT on the store's own tables, read from storage itself on either
    backend: PostgreSQL through its own connection (committed state), SQLite through the
    catalog's reader. Write the SQL both dialects share, with ``?`` placeholders (and no ``?``
    or ``%`` in a literal: they become psycopg's); a list column (``acl_groups``: PostgreSQL's
    ``text[]``, SQLite's JSON text) goes through ``as_list``."""
    url = svc.settings.database_url
    if url:
        import psycopg

        # Tenants over several clusters (D-277): the tenants' tables are the clusters' rows.
        clusters = [c.split("=", 1)[1] for c in svc.settings.cluster_urls.split(",") if c]
        out: list[tuple[Any, ...]] = []
        for u in clusters or [url]:
            with psycopg.connect(u, autocommit=True) as conn:
                query = sql.replace("?", "%s").encode()
                cur = conn.execute(query, tuple(params)) if params else conn.execute(query)
                out += [tuple(r) for r in cur.fetchall()]
        return out
    rows = embedded(svc).catalog.reader().execute(sql, tuple(params)).fetchall()
    return [tuple(r) for r in rows]


def stored_value(svc: Service, sql: str, params: Sequence[Any] = ()) -> Any:
    """The first column of the first row of ``stored_rows`` (a COUNT, one Unit's field)."""
    rows = stored_rows(svc, sql, params)
    assert rows, f"no row: {sql} {params}"
    return rows[0][0]


def store_execute(svc: Service, sql: str, params: Sequence[Any] = ()) -> None:
    """One statement run on the store itself, committed, on either backend: a test that changes
    a row behind the service's back (ages a session, plants an old-format record). Same SQL
    rules as ``stored_rows``."""
    url = svc.settings.database_url
    if url:
        import psycopg

        with psycopg.connect(url, autocommit=True) as conn:
            query = sql.replace("?", "%s").encode()
            conn.execute(query, tuple(params)) if params else conn.execute(query)
        return
    with embedded(svc).catalog.write() as w:
        w.execute(sql, tuple(params))


def as_list(value: Any) -> list[Any]:
    """A stored list column as a list: PostgreSQL's array as it comes, SQLite's JSON decoded."""
    return list(value) if isinstance(value, list) else list(json.loads(value))


def add_principal(
    svc: Service,
    name: str,
    *,
    perms: list[str],
    tier: str = "pro",
    scopes: list[str],
    groups: list[str] = (),  # type: ignore[assignment]
    active: str | None = None,
    quota: int | None = None,
) -> str:
    key = f"aegis_sk_test_{name}"
    with svc.auth_store.write() as tx:
        p = principals_mod.create_principal(
            tx.principals,
            name,
            perms=perms,
            tier=tier,
            scopes=scopes,
            active_scope=active,
            groups=groups,
            doc_quota=quota,
        )
        principals_mod.add_key(tx.principals, p.id, key)
    return key


@pytest.fixture
def svc(tmp_path: Path, embedder: Embedder) -> Iterator[Service]:
    from superchargedb.demo import seed_principals

    s = make_service(tmp_path / "data", embedder)
    seed_principals(s)
    yield s
    s.close()


@pytest.fixture
def client(svc: Service) -> Iterator[Any]:
    from fastapi.testclient import TestClient

    from superchargedb.api.app import create_app

    with TestClient(create_app(svc), raise_server_exceptions=False) as c:
        yield c


def auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


ALICE = auth("aegis_sk_alice")
BOB = auth("aegis_sk_bob")
CAROL = auth("aegis_sk_carol")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LiveServer:
    """uvicorn in a thread on a real loopback port, configured as `serve` configures it."""

    def __init__(self, svc: Service) -> None:
        import uvicorn

        from superchargedb.api.app import create_app
        from superchargedb.api.transport import uvicorn_config

        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        # The production server configuration (deadlines, trusted proxies), on a free port.
        config = uvicorn_config(create_app(svc), svc.settings, host="127.0.0.1", port=self.port)
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> LiveServer:
        self.thread.start()
        deadline = time.time() + 20
        while time.time() < deadline:
            try:
                httpx.get(self.url + "/healthz", timeout=1)
                return self
            except httpx.HTTPError:
                time.sleep(0.05)
        raise RuntimeError("server did not start")

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)


@pytest.fixture
def live(svc: Service) -> Iterator[LiveServer]:
    with LiveServer(svc) as srv:
        yield srv
