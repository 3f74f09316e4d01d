"""Searches on a hot standby (D-270, D-271): the dense leg reads the standby while it trails the
primary by less than the bound, its keys are re-checked on the primary (a Unit deleted or
re-permissioned there never comes back, however far the standby lags), the writer reads its own
writes with ``X-Read-After``, and a standby past the bound is not used.

A real primary and a streaming standby of it (``pg_basebackup``), both from the wheel; replay
on the standby is paused to make it lag on purpose."""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
import pytest

import pg_stack
from conftest import BACKEND, add_principal, auth, make_service
from superchargedb.models.embedder import Embedder
from superchargedb.readfilter import ReadFilter

if pg_stack.available():
    pytest.skip(pg_stack.available() or "", allow_module_level=True)
if BACKEND != "postgres":
    pytest.skip("runs in the PostgreSQL pass (`make test-postgres`)", allow_module_level=True)

from fastapi.testclient import TestClient  # noqa: E402

from superchargedb import positions  # noqa: E402
from superchargedb.api.app import create_app  # noqa: E402
from superchargedb.stack import postgres, standby  # noqa: E402
from superchargedb.storage.postgres.backend import PgBackend  # noqa: E402

SCOPE = "acme/alpha"
UNIT = {"scope": SCOPE, "acl_groups": ["ops"]}


@pytest.fixture(scope="module")
def pair() -> Iterator[tuple[postgres.PostgresServer, postgres.PostgresServer]]:
    d = Path(tempfile.mkdtemp(prefix="scdb-replica-"))
    d.chmod(0o755)  # the postgres user must get through
    primary = postgres.start(d / "primary", durable=False)
    try:
        replica = standby.add_standby(primary, d / "standby", durable=False)
        try:
            yield primary, replica
        finally:
            replica.stop()
    finally:
        primary.stop()
        shutil.rmtree(d, ignore_errors=True)


def _replay(replica: postgres.PostgresServer, paused: bool) -> None:
    with psycopg.connect(replica.url(), autocommit=True) as conn:
        conn.execute(f"SELECT pg_wal_replay_{'pause' if paused else 'resume'}()".encode())


Stack = tuple[Any, PgBackend, postgres.PostgresServer]


@pytest.fixture
def stack(
    pair: tuple[postgres.PostgresServer, postgres.PostgresServer],
    tmp_path: Path,
    embedder: Embedder,
) -> Iterator[Stack]:
    """A service reading from the standby, its result cache off (each search is answered)."""
    with _service(pair, tmp_path, embedder, cache_max_bytes=0) as s:
        yield s


@pytest.fixture
def cached_stack(
    pair: tuple[postgres.PostgresServer, postgres.PostgresServer],
    tmp_path: Path,
    embedder: Embedder,
) -> Iterator[Stack]:
    with _service(pair, tmp_path, embedder) as s:
        yield s


@contextmanager
def _service(
    pair: tuple[postgres.PostgresServer, postgres.PostgresServer],
    tmp_path: Path,
    embedder: Embedder,
    **overrides: Any,
) -> Iterator[Stack]:
    primary, replica = pair
    name = f"r{time.monotonic_ns()}"
    with psycopg.connect(primary.url(), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"'.encode())
    svc = make_service(
        tmp_path / "data",
        embedder,
        database_url=primary.url(name),
        database_replica_urls=replica.url(name),
        replica_max_lag_ms=60_000,  # lagging on purpose below stays within the bound
        **overrides,
    )
    add_principal(svc, "ann", perms=["read", "write"], scopes=[SCOPE], groups=["ops"])
    add_principal(svc, "ben", perms=["read"], scopes=[SCOPE], groups=["ops"])
    backend = svc.parts.backend
    assert isinstance(backend, PgBackend) and backend.replicas is not None
    try:
        with TestClient(create_app(svc), raise_server_exceptions=False) as client:
            yield client, backend, replica
    finally:
        _replay(replica, paused=False)
        svc.close()


ANN, BEN = auth("aegis_sk_test_ann"), auth("aegis_sk_test_ben")


def _ingest(client: Any, doc: str, text: str) -> str:
    r = client.post(
        "/v1/ingest", headers=ANN, json={"units": [{**UNIT, "doc_id": doc, "text": text}]}
    )
    assert r.status_code == 200, r.text
    position = r.headers.get("X-Commit-Position")
    assert position, "a write on a deployment with replicas reports its commit position"
    return str(position)


def _dense(client: Any, who: dict[str, str], q: str, **headers: str) -> tuple[list[str], str]:
    r = client.post(
        "/v1/search", headers={**who, **headers}, json={"q": q, "mode": "dense", "top_k": 10}
    )
    assert r.status_code == 200, r.text
    body = r.json()
    detail = next(st for st in body["trace"]["stages"] if st["stage"] == "vectorize")["detail"]
    return [h["doc_id"] for h in body["hits"]], str(detail)


def _caught_up(client: Any, position: str) -> None:
    """Wait until the standby has replayed ``position`` and been sampled since."""
    replicas = client.app.state.svc.parts.backend.replicas
    deadline = time.monotonic() + 10
    while replicas.pick(positions.parse(position)) is None:
        assert time.monotonic() < deadline, "the standby did not catch up"
        time.sleep(0.05)


def _on_replica(client: Any, who: dict[str, str], q: str, position: str) -> list[str]:
    """The search the standby answers once it has replayed ``position``."""
    _caught_up(client, position)
    docs, detail = _dense(client, who, q)
    assert detail.endswith("on replica0"), detail
    return docs


def test_a_lagging_standby_never_returns_a_deleted_or_re_permissioned_unit(
    stack: Stack,
) -> None:
    client, backend, replica = stack
    _ingest(client, "survey", "the glacier survey of the northern icefield")
    position = _ingest(client, "moraine", "a glacier moraine forms where the ice stops")
    assert set(_on_replica(client, BEN, "glacier survey", position)) >= {"survey", "moraine"}
    _replay(replica, paused=True)
    r = client.patch("/v1/docs/survey", headers=ANN, json={"acl_groups": []})
    assert r.status_code == 200, r.text
    r = client.delete("/v1/docs/moraine", headers=ANN)
    assert r.status_code == 200, r.text

    # The standby's scan still holds both (it replays nothing now) ...
    view = backend.search.view(
        ReadFilter(principal="ben", scopes=(SCOPE,), groups=frozenset({"ops"}), planes=("text",))
    )
    vec = _query_vector(client, "glacier survey")
    leg = view.dense(vec, 10)
    assert leg.detail.endswith("on replica0") and not leg.checked and not leg.fresh
    assert len(leg.keys) == 2
    # ... the answer is the primary's: ben sees neither.
    docs, detail = _dense(client, BEN, "glacier survey")
    assert detail.endswith("on replica0")
    assert "survey" not in docs and "moraine" not in docs


def _query_vector(client: Any, text: str) -> Any:
    return client.app.state.svc.embedder.embed_query(text)


def test_the_writer_reads_its_writes_and_a_standby_past_the_bound_is_not_used(
    stack: Stack,
) -> None:
    client, backend, replica = stack
    first = _ingest(client, "first", "the avalanche bulletin for the western slopes")
    assert "first" in _on_replica(client, ANN, "avalanche bulletin", first)
    _replay(replica, paused=True)
    position = _ingest(client, "second", "an avalanche bulletin issued for the eastern slopes")

    docs, detail = _dense(client, ANN, "avalanche bulletin")
    assert detail.endswith("on replica0") and "second" not in docs  # stale, within the bound
    docs, detail = _dense(client, ANN, "avalanche bulletin", **{"X-Read-After": position})
    assert "on replica" not in detail and "second" in docs  # its own write: the primary
    r = client.post(
        "/v1/search", headers={**ANN, "X-Read-After": "yesterday"}, json={"q": "avalanche"}
    )
    assert r.status_code == 422 and r.json()["error"]["field"] == "X-Read-After"

    assert backend.replicas is not None
    backend.replicas.max_lag_s = 0.2  # the bound, tightened: the paused standby falls past it
    time.sleep(0.4)
    docs, detail = _dense(client, ANN, "avalanche bulletin")
    assert "on replica" not in detail and "second" in docs

    backend.replicas.max_lag_s = 60.0
    _replay(replica, paused=False)
    assert "second" in _on_replica(client, ANN, "avalanche bulletin", position)


def test_a_standby_answer_is_not_cached(cached_stack: Stack) -> None:
    client, backend, _ = cached_stack
    _caught_up(client, _ingest(client, "tide", "the tide table for the harbour entrance"))
    body = {"q": "tide table", "mode": "dense", "top_k": 5}
    client.post("/v1/search", headers=ANN, json=body)
    again = client.post("/v1/search", headers=ANN, json=body).json()
    assert again["trace"].get("cache") != "hit"
    stages = {st["stage"]: st for st in again["trace"]["stages"]}
    assert stages["vectorize"]["detail"].endswith("on replica0")
    # The same search answered by the primary is cached (the check above can fail).
    assert backend.replicas is not None
    backend.replicas.max_lag_s = -1.0  # no standby qualifies
    body["top_k"] = 6
    client.post("/v1/search", headers=ANN, json=body)
    assert client.post("/v1/search", headers=ANN, json=body).json()["trace"]["cache"] == "hit"
