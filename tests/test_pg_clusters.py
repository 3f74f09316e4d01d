"""Tenants across clusters (D-277..D-279): a directory database and two PostgreSQL primaries on
loopback, tenants placed on one or the other.

Every request touches only its tenant's cluster (the other's statement counters and sessions
stay still), a principal's scopes lie in one cluster, jobs run where their tenant lives, each
cluster keeps its own audit chain and blob store, and the operator verifies every chain.
The isolation property with tenants spread over both clusters is ``test_pg_clusters_isolation.py``.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import pg_stack
from conftest import BACKEND, add_principal, auth

if pg_stack.available():
    pytest.skip(pg_stack.available() or "", allow_module_level=True)
if BACKEND != "postgres":
    pytest.skip("runs in the PostgreSQL pass (`make test-postgres`)", allow_module_level=True)

import psycopg  # noqa: E402
from fastapi.testclient import TestClient  # noqa: E402

from superchargedb.api.app import create_app  # noqa: E402
from superchargedb.errors import ClusterSpanError  # noqa: E402
from superchargedb.models.embedder import Embedder  # noqa: E402
from superchargedb.operator import OperatorStore  # noqa: E402
from superchargedb.service import Service  # noqa: E402
from superchargedb.settings import Settings  # noqa: E402
from superchargedb.storage.postgres.placement import choose  # noqa: E402
from superchargedb.storage.postgres.router import ClusterRouter  # noqa: E402
from superchargedb.wiring import open_service  # noqa: E402

OPERATOR = "aegis_sk_test_root"


def cluster_settings(tmp: Path, **extra: Any) -> dict[str, Any]:
    """A directory and cluster c1 on the suite's server, cluster c2 on a second server."""
    return {
        "database_url": pg_stack.database(tmp / "directory"),
        "cluster_urls": (
            f"c1={pg_stack.database(tmp / 'c1')},c2={pg_stack.database(tmp / 'c2', n=1)}"
        ),
        **extra,
    }


def open_clustered(tmp: Path, embedder: Embedder, **extra: Any) -> Service:
    return open_service(Settings(data_dir=tmp, **cluster_settings(tmp, **extra)), embedder)


def router_of(svc: Service) -> ClusterRouter:
    backend = svc.parts.backend
    assert isinstance(backend, ClusterRouter)
    return backend


@pytest.fixture
def two(tmp_path: Path, embedder: Embedder) -> Iterator[tuple[Service, TestClient]]:
    """acme on c1, globex on c2, placed before anything of them exists; alice writes acme,
    gus globex, root administers acme."""
    svc = open_clustered(tmp_path, embedder)
    r = router_of(svc)
    r.placement.place("acme", "c1")
    r.placement.place("globex", "c2")
    add_principal(svc, "alice", perms=["read", "write", "admin"], scopes=["acme"], groups=["eng"])
    add_principal(svc, "gus", perms=["read", "write", "admin"], scopes=["globex"])
    add_principal(svc, "root", perms=["read", "write", "admin"], scopes=["acme"])
    try:
        with TestClient(create_app(svc)) as client:
            yield svc, client
    finally:
        svc.close()


ALICE = auth("aegis_sk_test_alice")
GUS = auth("aegis_sk_test_gus")


def _ingest(client: TestClient, who: dict[str, str], scope: str, text: str, doc: str) -> str:
    r = client.post(
        "/v1/ingest",
        headers=who,
        json={"units": [{"text": text, "scope": scope, "doc_id": doc}]},
    )
    assert r.status_code == 200, r.text
    res = r.json()["results"][0]
    assert res["ok"], res
    return str(res["unit_id"])


def _rows(url: str, sql: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(url, autocommit=True) as conn:
        return [tuple(x) for x in conn.execute(sql.encode()).fetchall()]


def test_the_placement_rule() -> None:
    """Fewest tenants first; the order given breaks a tie."""
    assert choose({}, ["c1", "c2"]) == "c1"
    assert choose({"c1": 3, "c2": 1}, ["c1", "c2"]) == "c2"
    assert choose({"c1": 2, "c2": 2}, ["c2", "c1"]) == "c2"


def test_each_tenant_lives_in_its_own_cluster(two: tuple[Service, TestClient]) -> None:
    svc, client = two
    s = svc.settings
    urls = dict(item.split("=", 1) for item in s.cluster_urls.split(","))
    a = _ingest(client, ALICE, "acme/eng", "acme alpha reactor notes", "a1")
    g = _ingest(client, GUS, "globex/ops", "globex beta reactor notes", "g1")
    assert _rows(urls["c1"], "SELECT unit_id FROM units") == [(a,)]
    assert _rows(urls["c2"], "SELECT unit_id FROM units") == [(g,)]
    assert s.database_url is not None
    assert _rows(s.database_url, "SELECT count(*) FROM units") == [(0,)]  # the directory
    # Principals and keys only in the directory.
    assert _rows(urls["c1"], "SELECT count(*) FROM principals") == [(0,)]
    names = _rows(s.database_url, "SELECT name FROM principals ORDER BY name")
    assert names == [("alice",), ("gus",), ("root",)]
    # Each reads only its own: the other's Unit is a 404, as one that does not exist.
    hits = client.post("/v1/search?scope=acme", headers=ALICE, json={"q": "reactor notes"})
    assert hits.status_code == 200, hits.text
    assert [h["unit_id"] for h in hits.json()["hits"]] == [a]
    assert client.get(f"/v1/units/{g}", headers=ALICE).status_code == 404
    assert client.get(f"/v1/units/{a}", headers=GUS).status_code == 404
    assert client.get(f"/v1/units/{a}", headers=ALICE).status_code == 200


def test_a_principal_spanning_two_clusters_is_refused(two: tuple[Service, TestClient]) -> None:
    svc, client = two
    r = client.post(
        "/v1/admin/principals",
        headers=auth(OPERATOR),
        json={"name": "wide", "perms": ["read"], "scopes": ["acme", "globex"]},
    )
    assert r.status_code in (403, 409), r.text  # root administers acme only: 403 first
    with pytest.raises(ClusterSpanError, match="different clusters"):
        add_principal(svc, "wide", perms=["read"], scopes=["acme/x", "globex/y"])
    assert svc.auth_store.principals.named("wide") is None  # nothing written
    # A new tenant beside a placed one joins its cluster.
    add_principal(svc, "newco", perms=["read"], scopes=["acme", "initech"])
    assert router_of(svc).placement.known()["initech"] == "c1"


def _on_server(url: str) -> tuple[str, str]:
    """The database's name, and a URL of its server's own ``postgres`` database: what is read
    there touches nothing in the database watched."""
    return url.rsplit("/", 1)[1].split("?", 1)[0], url.rsplit("/", 1)[0] + "/postgres"


def _stat(url: str) -> tuple[int, int]:
    """Committed + rolled back transactions, and rows returned + fetched, in the database."""
    db, admin = _on_server(url)
    with psycopg.connect(admin, autocommit=True) as conn:
        row = conn.execute(
            "SELECT xact_commit + xact_rollback, tup_returned + tup_fetched"
            " FROM pg_stat_database WHERE datname = %s",
            (db,),
        ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


def _last_activity(url: str) -> float:
    """The newest start or state change of any session on the database (epoch seconds)."""
    db, admin = _on_server(url)
    with psycopg.connect(admin, autocommit=True) as conn:
        row = conn.execute(
            "SELECT coalesce(extract(epoch FROM max(greatest(backend_start, state_change))), 0)"
            " FROM pg_stat_activity WHERE datname = %s",
            (db,),
        ).fetchone()
    return float(row[0]) if row else 0.0


# An idle PostgreSQL session reports its counters at most ~10 s after its last statement
# (PGSTAT_IDLE_INTERVAL): a snapshot waits that long for the ones before it to land.
_SETTLE_S = 11.0


def test_a_request_leaves_the_other_cluster_untouched(two: tuple[Service, TestClient]) -> None:
    """Ingest, search, answer, reads, listings, an object's put/get/delete, a PATCH and the
    audit check of an acme admin: c2's statement counters, rows read and sessions do not move,
    while c1's do (the counters can see a request)."""
    svc, client = two
    urls = dict(item.split("=", 1) for item in svc.settings.cluster_urls.split(","))
    _ingest(client, GUS, "globex/ops", "globex beta reactor notes", "g1")  # c2 holds something
    a = _ingest(client, ALICE, "acme/eng", "acme alpha reactor notes", "a1")
    svc.background.stop()  # the process's own tail over every cluster would move both
    time.sleep(_SETTLE_S)
    c1, c2 = _stat(urls["c1"]), _stat(urls["c2"])
    quiet_since = time.time()
    assert _last_activity(urls["c2"]) < quiet_since

    _ingest(client, ALICE, "acme/eng", "acme gamma turbine log", "a2")
    for path, body in [
        ("/v1/search?scope=acme", {"q": "reactor"}),
        ("/v1/search?scope=globex", {"q": "reactor"}),  # not its grant: 403, no cluster
        ("/v1/answer?scope=acme", {"q": "what about the reactor?"}),
    ]:
        assert client.post(path, headers=ALICE, json=body).status_code in (200, 403)
    for path in [f"/v1/units/{a}", "/v1/docs?scope=acme", "/v1/units?scope=acme", "/v1/usage"]:
        assert client.get(path, headers=ALICE).status_code == 200, path
    put = client.put(
        "/v1/objects/acme/eng/note.txt",
        headers={**ALICE, "Content-Type": "text/plain"},
        content=b"an acme object",
    )
    assert put.status_code in (200, 201), put.text
    assert client.get("/v1/objects/acme/eng/note.txt", headers=ALICE).status_code == 200
    assert client.delete("/v1/objects/acme/eng/note.txt", headers=ALICE).status_code == 200
    patch = client.patch("/v1/docs/a1?scope=acme/eng", headers=ALICE, json={"acl_groups": ["eng"]})
    assert patch.status_code == 200, patch.text
    assert client.get("/v1/audit/verify", headers=ALICE).json()["ok"] is True

    time.sleep(_SETTLE_S)
    assert _stat(urls["c2"]) == c2, "a request of acme reached the cluster of globex"
    assert _last_activity(urls["c2"]) < quiet_since
    after = _stat(urls["c1"])
    assert after[0] > c1[0] and after[1] > c1[1]  # the counters do see acme's requests


def test_jobs_run_on_the_cluster_of_their_tenant(tmp_path: Path, embedder: Embedder) -> None:
    """A long text past the request's chunk budget is queued as a job on its tenant's cluster;
    the workers claim from both clusters and write each job's Units where its tenant lives."""
    svc = open_clustered(tmp_path, embedder, ingest_max_chunks=1, job_workers=1)
    try:
        r = router_of(svc)
        r.placement.place("acme", "c1")
        r.placement.place("globex", "c2")
        add_principal(svc, "alice", perms=["read", "write"], scopes=["acme"])
        add_principal(svc, "gus", perms=["read", "write"], scopes=["globex"])
        long = " ".join(f"sentence {i} about the reactor cooling loop." for i in range(400))
        with TestClient(create_app(svc)) as client:
            jobs = {}
            for who, scope in [(ALICE, "acme/eng"), (GUS, "globex/ops")]:
                res = client.post(
                    "/v1/ingest",
                    headers=who,
                    json={"units": [{"text": long, "scope": scope, "doc_id": "long"}]},
                ).json()["results"][0]
                assert res.get("status") == "queued", res
                jobs[scope] = (who, res["job_id"])
            deadline = time.time() + 120
            for who, job_id in jobs.values():
                while True:
                    got = client.get(f"/v1/jobs/{job_id}", headers=who).json()
                    if got.get("state") in ("done", "failed") or time.time() > deadline:
                        break
                    time.sleep(0.2)
                assert got["state"] == "done", got
                other = GUS if who is ALICE else ALICE
                assert client.get(f"/v1/jobs/{job_id}", headers=other).status_code == 404
        urls = dict(item.split("=", 1) for item in svc.settings.cluster_urls.split(","))
        for name, tenant in [("c1", "acme"), ("c2", "globex")]:
            scopes = _rows(urls[name], "SELECT DISTINCT split_part(scope, '/', 1) FROM units")
            assert scopes == [(tenant,)]
            assert _rows(urls[name], "SELECT state FROM jobs") == [("done",)]
    finally:
        svc.close()


def test_each_cluster_keeps_its_own_audit_chain(
    two: tuple[Service, TestClient], tmp_path: Path
) -> None:
    svc, client = two
    _ingest(client, ALICE, "acme/eng", "acme alpha", "a1")
    _ingest(client, GUS, "globex/ops", "globex beta", "g1")
    made = client.post("/v1/admin/principals/alice/keys", headers=ALICE, json={})
    assert made.status_code in (200, 201), made.text  # audited in the directory's chain
    s = svc.settings
    urls = dict(item.split("=", 1) for item in s.cluster_urls.split(","))
    op = {**s.model_dump(), "data_dir": tmp_path}
    with OperatorStore(Settings(**op)) as st:
        from superchargedb.auth.admin import OPERATOR as ROOT

        report = st.audit_verify(ROOT)
    assert report["ok"] is True, report
    assert set(report["chains"]) == {"directory", "c1", "c2"}
    assert all(c["ok"] and c["records"] >= 1 for c in report["chains"].values()), report
    # A tenant admin sees whether its chains verify and its own records, no other cluster's.
    mine = client.get("/v1/audit/verify", headers=ALICE).json()
    assert mine["ok"] is True and "chains" not in mine
    # A record rewritten on c2 breaks c2's chain only.
    with psycopg.connect(urls["c2"], autocommit=True) as conn:
        n = conn.execute(
            "UPDATE audit_log SET record = (record::jsonb || '{\"x\": 1}')::text"
        ).rowcount
        assert n >= 1
    with OperatorStore(Settings(**op)) as st:
        report = st.audit_verify(ROOT)
    assert report["ok"] is False
    assert report["chains"]["c2"]["ok"] is False
    assert report["chains"]["c1"]["ok"] is True and report["chains"]["directory"]["ok"] is True
    assert client.get("/v1/audit/verify", headers=ALICE).json()["ok"] is True


def test_objects_with_the_same_bytes_in_two_clusters_are_kept_apart(
    two: tuple[Service, TestClient],
) -> None:
    """The same content stored by both tenants: deleting one cluster's object collects its own
    blob, never the other cluster's copy."""
    svc, client = two
    body = b"the very same bytes"
    for who, key in [(ALICE, "acme/eng/same.txt"), (GUS, "globex/ops/same.txt")]:
        r = client.put(
            f"/v1/objects/{key}", headers={**who, "Content-Type": "text/plain"}, content=body
        )
        assert r.status_code in (200, 201), r.text
    r = client.delete("/v1/objects/acme/eng/same.txt", headers=ALICE)
    assert r.status_code == 200 and r.json()["blob_collected"] is True
    got = client.get("/v1/objects/globex/ops/same.txt", headers=GUS)
    assert got.status_code == 200 and got.content == body


def test_backup_and_restore_carry_the_directory_and_every_cluster(
    two: tuple[Service, TestClient], tmp_path: Path, embedder: Embedder
) -> None:
    """Backup while serving: one folder per database (with each cluster's blobs); a restore
    into empty databases brings back every tenant where it was, its objects and its chains."""
    from superchargedb.auth.admin import OPERATOR as ROOT
    from superchargedb.wiring import open_maintenance

    svc, client = two
    a = _ingest(client, ALICE, "acme/eng", "acme alpha reactor notes", "a1")
    g = _ingest(client, GUS, "globex/ops", "globex beta reactor notes", "g1")
    put = client.put(
        "/v1/objects/globex/ops/kept.txt",
        headers={**GUS, "Content-Type": "text/plain"},
        content=b"globex object bytes",
    )
    assert put.status_code in (200, 201), put.text
    dest = tmp_path / "backup"
    manifest = open_maintenance(svc.settings).backup(dest)
    assert manifest.units == 2 and manifest.objects == 1
    assert sorted(p.name for p in dest.iterdir()) == ["c1", "c2", "directory", "manifest.json"]

    fresh = tmp_path / "restored"
    settings = Settings(data_dir=fresh, **cluster_settings(fresh))
    restored = open_maintenance(settings).restore(dest)
    assert restored.units == 2
    svc2 = open_service(settings, embedder)
    try:
        assert svc2.audit_verify(ROOT)["ok"] is True
        with TestClient(create_app(svc2)) as c2:
            assert c2.get(f"/v1/units/{a}", headers=ALICE).status_code == 200
            assert c2.get(f"/v1/units/{g}", headers=GUS).status_code == 200
            assert c2.get(f"/v1/units/{g}", headers=ALICE).status_code == 404
            got = c2.get("/v1/objects/globex/ops/kept.txt", headers=GUS)
            assert got.status_code == 200 and got.content == b"globex object bytes"
        assert router_of(svc2).placement.known() == {"acme": "c1", "globex": "c2"}
    finally:
        svc2.close()
