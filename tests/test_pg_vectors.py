"""The PostgreSQL dense leg's plan rule (D-202), asserted with EXPLAIN, and its recall@10 against
brute force: selective filters of each kind (doc id, owner-only, group-shared, scope, time) take
the exact plan through their btree/GIN index (recall 1.0); broad ones the plane's HNSW index
with iterative scan (recall >= 0.95)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import pg_stack
from superchargedb.readfilter import ReadFilter
from superchargedb.storage.protocols import UnitRecord

if pg_stack.available():
    pytest.skip(pg_stack.available() or "", allow_module_level=True)

# Loading 4,000 Units through the write path (an HNSW insert each) takes 10-30 s on 2 shared cores.
pytestmark = pytest.mark.slow

from superchargedb.storage.postgres.backend import PgBackend  # noqa: E402

N, DIM, K = 4000, 48, 10
EXACT_MAX = 400  # 10 % of N: the 1 % filters below are exact, the 20 % and 100 % ones HNSW
T0 = 1_700_000_000_000


def units(rng: np.random.Generator) -> tuple[list[UnitRecord], np.ndarray]:
    out = []
    for i in range(N):
        rare = i % 100 == 0  # 1 % of the Units: a rare owner, group, scope, doc and hour
        out.append(
            UnitRecord(
                unit_id=f"u{i}",
                scope="acme/rare" if rare else f"acme/s{i % 7}",
                doc_id="d-rare" if rare else f"d{i // 40}",
                plane="text",
                modality="text",
                text=f"unit {i}",
                acl_owner="carol" if rare else "bob",
                acl_groups=("rare",) if rare else (("eng",) if i % 5 == 0 else ("ops",)),
                content_hash=hashlib.sha256(str(i).encode()).hexdigest(),
                created_at=T0,
                event_at=T0 + (10**9 if rare else i),
            )
        )
    vecs = rng.standard_normal((N, DIM)).astype(np.float32)
    return out, vecs


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, list[UnitRecord], Any]]:
    import psycopg

    tmp = tmp_path_factory.mktemp("vectors")
    url = pg_stack.database(tmp)
    b = PgBackend.open(
        url, dim=DIM, model_id="m", audit_key=bytes(32), objects_dir=tmp / "o", exact_max=EXACT_MAX
    )
    us, vecs = units(np.random.default_rng(5))
    for start in range(0, N, 500):
        with b.write() as tx:
            for u, v in zip(us[start : start + 500], vecs[start : start + 500], strict=True):
                tx.units.insert(u, v)
    b.outbox.replay()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("ANALYZE units")
    # What PostgreSQL holds: the f16 rounding of each unit vector (cosine is scale-free).
    stored = vecs / np.linalg.norm(vecs, axis=1, keepdims=True)
    stored = stored.astype(np.float16).astype(np.float32)
    yield b, us, stored
    b.close()


def reader(name: str, groups: set[str], scopes: tuple[str, ...] = ("acme",), **kw: Any) -> Any:
    return ReadFilter(name, scopes, frozenset(groups), ("text",), **kw)


SELECTIVE = {  # each admits 1 % of the Units, through its own index
    "doc_id": (reader("alice", {"eng", "ops", "rare"}, doc_ids=("d-rare",)), "units_doc"),
    "owner_only": (reader("carol", set()), "units_owner"),
    "group_shared": (reader("erin", {"rare"}), "units_groups"),
    # The idempotency key's btree leads with the scope: it serves the scope range.
    "scope": (reader("alice", {"eng", "ops", "rare"}, ("acme/rare",)), "units_idempotency"),
    "time": (reader("alice", {"eng", "ops", "rare"}, time_lo_ms=T0 + 10**9), "units_event"),
}
BROAD = {
    "group_20pct": reader("erin", {"eng"}),
    "unfiltered": reader("alice", {"eng", "ops", "rare"}),
}


def brute(rf: ReadFilter, us: list[UnitRecord], stored: np.ndarray, q: np.ndarray) -> list[str]:
    ok = np.array(
        [
            rf.admits(
                scope=u.scope,
                owner=u.acl_owner,
                groups=u.acl_groups,
                plane=u.plane,
                modality=u.modality,
                doc_id=u.doc_id,
                event_at=u.event_at,
            )
            for u in us
        ]
    )
    sims = stored @ (q / np.linalg.norm(q))
    sims[~ok] = -np.inf
    top = np.argsort(-sims, kind="stable")[:K]
    return [us[i].unit_id for i in top if np.isfinite(sims[i])]


def recall(b: Any, rf: ReadFilter, us: list[UnitRecord], stored: np.ndarray) -> tuple[float, str]:
    rng = np.random.default_rng(17)
    got, plans = 0.0, set()
    for _ in range(10):
        q = rng.standard_normal(DIM).astype(np.float32)
        want = brute(rf, us, stored, q)
        hits, plan = b.vectors.search_planned("text", q, K, rf)
        plans.add(plan)
        got += len({h.unit_id for h in hits} & set(want)) / len(want)
    assert len(plans) == 1
    return got / 10, plans.pop()


@pytest.mark.parametrize("name", sorted(SELECTIVE))
def test_a_selective_filter_is_exact_through_its_index(store: Any, name: str) -> None:
    b, us, stored = store
    rf, index = SELECTIVE[name]
    plan, text = b.vectors.explain("text", np.ones(DIM, np.float32), K, rf)
    assert plan == "exact"
    assert index in text, text  # the filter's btree/GIN index finds the rows ...
    assert "units_hnsw_text" not in text, text  # ... and no graph walk can miss one
    r, took = recall(b, rf, us, stored)
    assert took == "exact" and r == 1.0


@pytest.mark.parametrize("name", sorted(BROAD))
def test_a_broad_filter_walks_the_planes_hnsw_index(store: Any, name: str) -> None:
    b, us, stored = store
    rf = BROAD[name]
    plan, text = b.vectors.explain("text", np.ones(DIM, np.float32), K, rf)
    assert plan == "hnsw"
    assert "Index Scan using units_hnsw_text" in text, text
    r, took = recall(b, rf, us, stored)
    assert took == "hnsw" and r >= 0.95, r


def test_hits_are_scored_by_cosine_best_first(store: Any) -> None:
    b, us, stored = store
    q = np.random.default_rng(3).standard_normal(DIM).astype(np.float32)
    rf = BROAD["unfiltered"]
    hits = b.vectors.search("text", q, K, rf)
    idx = {u.unit_id: i for i, u in enumerate(us)}
    want = stored[[idx[h.unit_id] for h in hits]] @ (q / np.linalg.norm(q))
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert np.allclose([h.score for h in hits], want, atol=2e-3)  # f16 query rounding


@pytest.mark.parametrize("name", sorted(BROAD))
def test_a_broad_filter_walks_the_hnsw_index_under_row_level_security(
    store: Any, name: str
) -> None:
    """Row-level security's tenant predicate beside an owner-or-group filter made the planner
    expect a few hundred rows and scan and sort the whole plane (314 ms at 100k Units, D-269):
    the HNSW statement turns sorts off, so the graph walk is the plan whatever it estimates."""
    from superchargedb import acting

    b, us, stored = store
    rf = BROAD[name]
    with acting.acting_for(["acme"]):
        plan, text = b.vectors.explain("text", np.ones(DIM, np.float32), K, rf)
        assert plan == "hnsw"
        assert "Index Scan using units_hnsw_text" in text, text
        r, took = recall(b, rf, us, stored)
    assert took == "hnsw" and r >= 0.95, r
