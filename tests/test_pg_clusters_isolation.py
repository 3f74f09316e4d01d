"""The isolation property (``test_isolation_property.py``) with its tenants spread over two
clusters (D-277): a directory database, cluster c1 on the suite's PostgreSQL and c2 on a
second server. Look-alike tenants sit on different clusters (``acme`` on c1, ``acme0`` and
``alpha`` ... on the other), so a routing or placement bug shows up as a marker in a body.

A generated world becomes a world a clustered deployment can hold: each principal keeps the
grants on the cluster of its first one (one principal's scopes lie in one cluster), what a
reader wrote lies on its cluster (else the operator wrote it), and a Unit is derived only from
an object on its own cluster. Every check is the property's own.

SCDB_CLUSTER_ISOLATION_EXAMPLES sets the number of worlds (default 8).
"""

from __future__ import annotations

import copy
import os
import shutil
import zlib
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

import pg_stack
from conftest import BACKEND

if pg_stack.available():
    pytest.skip(pg_stack.available() or "", allow_module_level=True)
if BACKEND != "postgres":
    pytest.skip("runs in the PostgreSQL pass (`make test-postgres`)", allow_module_level=True)

from isolation_checks import ALL_PATHS, EchoLLM  # noqa: E402
from isolation_model import SEGS, MemoEmbedder, worlds  # noqa: E402
from isolation_world import Harness, build  # noqa: E402
from superchargedb.service import Service  # noqa: E402
from superchargedb.settings import Settings  # noqa: E402
from superchargedb.storage.postgres.router import ClusterRouter  # noqa: E402
from superchargedb.wiring import open_service  # noqa: E402

EXAMPLES = int(os.environ.get("SCDB_CLUSTER_ISOLATION_EXAMPLES", "8"))
# Every tenant of the generated worlds, look-alikes on different clusters.
C1 = {"acme", "alphabet", "alpha-b", "al_ha"}
PLACED = {t: ("c1" if t in C1 else "c2") for t in SEGS}


def cluster_of(scope: str) -> str:
    """The world's placement: the named tenants as above, a generated look-alike (``acme-x``,
    ``alpha0``) by a stable hash of its name."""
    tenant = scope.split("/", 1)[0]
    return PLACED.get(tenant) or ("c1" if zlib.crc32(tenant.encode()) % 2 else "c2")


def tenants_of(spec: dict[str, Any]) -> set[str]:
    """Every tenant the world stores in or grants."""
    scopes = [g for p in spec["principals"] for g in p["grants"]]
    scopes += [x["scope"] for k in ("objects", "units", "media") for x in spec[k]]
    return {s.split("/", 1)[0] for s in scopes}


def spread(spec: dict[str, Any]) -> dict[str, Any]:
    """The world as two clusters can hold it (see the module's docstring)."""
    out = copy.deepcopy(spec)
    homes: dict[str, str] = {}
    for i, p in enumerate(out["principals"]):
        home = homes[f"p{i}"] = cluster_of(sorted(p["grants"])[0])
        p["grants"] = {g for g in p["grants"] if cluster_of(g) == home}
    # A reader's own writes land on its cluster; what it "created" elsewhere, the operator did.
    for x in [*out["units"], *out["media"]]:
        if x["creator"] in homes and cluster_of(x["scope"]) != homes[x["creator"]]:
            x["creator"] = "operator"
    objects = out["objects"]
    for u in out["units"]:
        o = u["object"]
        if (
            o is not None
            and o < len(objects)
            and cluster_of(objects[o]["scope"]) != cluster_of(u["scope"])
        ):
            u["object"] = None
    return out


def make_clustered(tmp: Path, emb: Any, *, tenants: set[str], **overrides: Any) -> Service:
    """A directory and two clusters, ``tenants`` placed by ``cluster_of`` before anything."""
    urls = f"c1={pg_stack.database(tmp / 'c1')},c2={pg_stack.database(tmp / 'c2', n=1)}"
    s = Settings(
        data_dir=tmp,
        database_url=pg_stack.database(tmp / "directory"),
        cluster_urls=urls,
        **overrides,
    )
    svc = open_service(s, embedder=emb)
    router = svc.parts.backend
    assert isinstance(router, ClusterRouter)
    for tenant in sorted(tenants | set(SEGS)):
        router.placement.place(tenant, cluster_of(tenant))
    return svc


@pytest.fixture(scope="module")
def memo_embedder(embedder: Any) -> MemoEmbedder:
    return MemoEmbedder(embedder)


@pytest.fixture(scope="module")
def echo_llm() -> Any:
    llm = EchoLLM()
    yield llm
    llm.httpd.shutdown()
    llm.httpd.server_close()


HARNESS: list[Harness] = []


@pytest.mark.slow
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(spec=worlds())
def test_isolation_property_over_two_clusters(
    tmp_path_factory: Any, memo_embedder: MemoEmbedder, echo_llm: EchoLLM, spec: dict[str, Any]
) -> None:
    tmp = tmp_path_factory.mktemp("isoc")
    world_spec = spread(spec)
    svc, world = build(
        tmp,
        world_spec,
        memo_embedder,
        echo_llm.url,
        make=partial(make_clustered, tenants=tenants_of(world_spec)),
        cluster_of=cluster_of,
    )
    try:
        if not HARNESS:
            HARNESS.append(Harness(svc))
        HARNESS[0].check(svc, world, echo_llm, ALL_PATHS, world_spec["patch"])
    finally:
        svc.close()
    pg_stack.drop_created()
    shutil.rmtree(tmp, ignore_errors=True)


def test_spread_worlds_keep_a_principal_on_one_cluster() -> None:
    """The transform itself: grants on one cluster, Units derived from their own cluster's
    objects, and the look-alike tenants on different clusters."""
    spec = {
        "principals": [{"grants": {"acme0/x", "acme", "alpha"}}],
        "objects": [{"scope": "alpha"}, {"scope": "acme/y"}],
        "units": [
            {"scope": "acme/z", "object": 0, "creator": "p0"},
            {"scope": "alpha", "object": None, "creator": "p0"},
        ],
        "media": [],
    }
    out = spread(spec)
    assert out["principals"][0]["grants"] == {"acme"}
    assert [u["object"] for u in out["units"]] == [None, None]
    assert [u["creator"] for u in out["units"]] == ["p0", "operator"]
    assert spec["principals"][0]["grants"] == {"acme0/x", "acme", "alpha"}  # a copy changed
    assert cluster_of("acme") != cluster_of("acme0")
    assert cluster_of("alpha") != cluster_of("alphabet") == cluster_of("alpha-b")
