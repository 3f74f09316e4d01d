"""Isolation, property-based: generated scopes, principals and ACLs against a set-based reference.

The reference model below is written independently of the server's checks (it splits scopes into
segment lists and uses Python sets); the server must return EXACTLY the readable set, through
search (both legs), units/:id and the cache in either order. The test-only mutation switches prove
the property catches the classic bugs.
"""

from __future__ import annotations

import itertools
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from superchargedb.auth import principals as principals_mod
from superchargedb.auth import scopes as scopes_mod
from superchargedb.errors import SCDBError
from superchargedb.service import Service
from superchargedb.settings import Settings

EXAMPLES = int(os.environ.get("SCDB_ISOLATION_EXAMPLES", "40"))
SEGS = ["acme", "alpha", "alphabet", "al_ha", "beta"]
GROUPS = ["g1", "g2", "g3"]
POOL = [
    f"Shared report number {i} about topic {t}."
    for i, t in enumerate(
        ["storage", "billing", "search", "latency", "audit", "quotas", "tiers", "keys"]
    )
]


class MemoEmbedder:
    """The real model, memoized per text so generated cases reuse a pre-embedded pool."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.model_id, self.dim, self.max_tokens = inner.model_id, inner.dim, inner.max_tokens
        self.memo: dict[str, np.ndarray] = {}

    def embed(self, texts):
        missing = [t for t in dict.fromkeys(texts) if t not in self.memo]
        if missing:
            for t, v in zip(missing, self.inner.embed(missing), strict=True):
                self.memo[t] = v
        return np.stack([self.memo[t] for t in texts]) if texts else self.inner.embed([])

    def embed_query(self, text):
        return self.inner.embed_query(text)

    def count_tokens(self, text):
        return self.inner.count_tokens(text)

    def token_spans(self, text):
        return self.inner.token_spans(text)


# -- the independent reference ------------------------------------------------------------
def segs(s: str) -> list[str]:
    return s.split("/")


def ref_inside(inner: str, outer: str) -> bool:
    a, b = segs(inner), segs(outer)
    return a[: len(b)] == b


def ref_effective(request: str, grants: set[str]) -> set[str] | None:
    if any(ref_inside(request, g) for g in grants):
        return {request}
    inner = {g for g in grants if ref_inside(g, request)}
    # A grant nested inside another searched grant adds nothing: report the outermost ones.
    return {g for g in inner if not any(o != g and ref_inside(g, o) for o in inner)} or None


def ref_readable(unit: dict, name: str, groups: set[str], scopes: set[str]) -> bool:
    in_scope = any(ref_inside(unit["scope"], e) for e in scopes)
    return in_scope and (unit["owner"] == name or bool(set(unit["groups"]) & groups))


# -- generated worlds ----------------------------------------------------------------------
scope_st = st.lists(st.sampled_from(SEGS), min_size=1, max_size=3).map("/".join)
principal_st = st.fixed_dictionaries(
    {
        "grants": st.sets(scope_st, min_size=1, max_size=2),
        "groups": st.sets(st.sampled_from(GROUPS), max_size=2),
    }
)
unit_st = st.fixed_dictionaries(
    {
        "scope": scope_st,
        "owner": st.sampled_from(["p0", "p1", "p2"]),
        "groups": st.lists(st.sampled_from(GROUPS), max_size=2, unique=True),
        "text": st.sampled_from(POOL),
    }
)
world_st = st.fixed_dictionaries(
    {
        "principals": st.lists(principal_st, min_size=3, max_size=3),
        "units": st.lists(unit_st, min_size=1, max_size=10),
        "requests": st.lists(st.tuples(st.integers(0, 2), scope_st), min_size=1, max_size=4),
    }
)


@pytest.fixture(scope="module")
def memo_embedder(embedder):
    return MemoEmbedder(embedder)


def build(tmp: Path, world: dict, emb: Any) -> tuple[Service, dict[str, dict]]:
    svc = Service(Settings(data_dir=tmp), embedder=emb)
    with svc.catalog.write() as w:
        op = principals_mod.create_principal(
            w,
            "operator",
            perms=["read", "write", "admin"],
            tier="pro",
            scopes=sorted(set(SEGS)),
            groups=[],
        )
        principals_mod.add_key(w, op.id, "aegis_sk_operator")
        for i, p in enumerate(world["principals"]):
            pp = principals_mod.create_principal(
                w,
                f"p{i}",
                perms=["read"],
                tier="pro",
                scopes=sorted(p["grants"]),
                groups=sorted(p["groups"]),
            )
            principals_mod.add_key(w, pp.id, f"aegis_sk_p{i}")
    operator = svc.authenticate("Bearer aegis_sk_operator")
    units = [
        {
            "text": u["text"],
            "scope": u["scope"],
            "acl_owner": u["owner"],
            "acl_groups": u["groups"],
            "doc_id": f"doc{i}",
        }
        for i, u in enumerate(world["units"])
    ]
    res = svc.ingest(operator, {"units": units})
    stored = {}
    for u, r in zip(world["units"], res["results"], strict=True):
        assert r["ok"], r
        stored[r["unit_id"]] = u
    return svc, stored


def check_world(svc: Service, stored: dict[str, dict], world: dict) -> None:
    principals = [svc.authenticate(f"Bearer aegis_sk_p{i}") for i in range(3)]
    # units/:id against each principal's grants.
    for i, p in enumerate(principals):
        spec = world["principals"][i]
        for uid, u in stored.items():
            want = ref_readable(u, f"p{i}", spec["groups"], spec["grants"])
            try:
                svc.get_unit(p, uid)
                got = True
            except SCDBError as exc:
                assert exc.http_status == 404
                got = False
            assert got == want, (i, u)
    # search: exactly the readable set, cached repeats in both orders.
    for (i, request), order in itertools.product(world["requests"], ("fresh", "cached")):
        spec = world["principals"][i]
        eff = ref_effective(request, spec["grants"])
        if order == "fresh":
            svc.cache.clear()
        for j in (i, (i + 1) % 3, i):
            spec_j = world["principals"][j]
            eff_j = ref_effective(request, spec_j["grants"])
            try:
                out = svc.search(
                    principals[j], {"q": "shared report topic", "top_k": 100}, query_scope=request
                )
            except SCDBError as exc:
                assert eff_j is None and exc.http_status == 403, (request, spec_j)
                continue
            assert eff_j is not None
            assert set(out["context"]["effective_scopes"]) == eff_j
            want = {
                uid
                for uid, u in stored.items()
                if ref_readable(u, f"p{j}", spec_j["groups"], eff_j)
            }
            got = {h["unit_id"] for h in out["hits"]}
            assert got == want, (request, j, out["trace"]["cache"])
            # Cited answers see only what search sees: every citation is readable.
            ans = svc.answer(
                principals[j], {"q": "shared report topic", "top_k": 5}, query_scope=request
            )
            cited = {c["unit_id"] for c in ans["answer"]["citations"]}
            assert cited <= want, (request, j, cited - want)
            assert {h["unit_id"] for h in ans["hits"]} <= want
        del eff


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(world=world_st)
def test_isolation_property(tmp_path_factory, memo_embedder, world):
    svc, stored = build(tmp_path_factory.mktemp("iso"), world, memo_embedder)
    try:
        check_world(svc, stored, world)
    finally:
        svc.close()


@pytest.mark.parametrize("mutation", ["like_prefix", "ancestor", "cache_groups_only"])
def test_mutations_are_caught(tmp_path_factory, memo_embedder, mutation):
    """Each injected bug must make the property fail on some generated world."""
    caught = False

    @settings(
        max_examples=300,
        deadline=None,
        database=None,
        phases=[Phase.generate],
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(world=world_st)
    def prop(world):
        svc, stored = build(tmp_path_factory.mktemp("mut"), world, memo_embedder)
        try:
            check_world(svc, stored, world)
        finally:
            svc.close()

    scopes_mod.MUTATIONS.add(mutation)
    try:
        prop()
    except AssertionError:
        caught = True
    except ExceptionGroup as group:  # several distinct failures
        caught = group.subgroup(AssertionError) is not None
    finally:
        scopes_mod.MUTATIONS.discard(mutation)
    assert caught, f"the isolation property did not catch the {mutation!r} bug"
