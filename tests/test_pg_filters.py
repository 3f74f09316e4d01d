"""The PostgreSQL rendering of a ReadFilter admits exactly what ``ReadFilter.admits`` does, on
every read path (get, dense, lexical), for filters on every field: scopes with look-alikes on
both sides of the '/' boundary, owner-only and group-shared ACLs, planes, modalities (including
the no-modality marker), doc ids, the time window, the request's ACL filter, and NUL bytes that
PostgreSQL text cannot hold."""

from __future__ import annotations

import hashlib
import random
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import pg_stack
from superchargedb.readfilter import NO_MODALITY, ReadFilter
from superchargedb.storage.protocols import UnitRecord

if pg_stack.available():
    pytest.skip(pg_stack.available() or "", allow_module_level=True)

from superchargedb.storage.postgres.backend import PgBackend  # noqa: E402

DIM = 8
SCOPES = ["acme", "acme/alpha", "acme/alpha/x", "acme/alphabet", "acme/alpha-b", "acme/alpha0",
          "acme/beta", "beta", "beta/alpha"]  # fmt: skip
OWNERS = ["alice", "bob", "carol", "dave"]
GROUPS = [(), ("eng",), ("ops",), ("eng", "ops"), ("sales",)]
MODALITIES = ["text", "image", "audio"]
T0 = 1_700_000_000_000


def world(n: int = 90) -> list[UnitRecord]:
    rng = random.Random(3)
    return [
        UnitRecord(
            unit_id=f"u{i}",
            scope=rng.choice(SCOPES),
            doc_id=f"d{i % 12}",
            plane="text" if i % 4 else "visual",
            modality=rng.choice(MODALITIES),
            text=f"moraine transect {i}",
            acl_owner=rng.choice(OWNERS),
            acl_groups=rng.choice(GROUPS),
            content_hash=hashlib.sha256(str(i).encode()).hexdigest(),
            created_at=T0,
            event_at=T0 + i * 1000,
        )
        for i in range(n)
    ]


def filters() -> list[ReadFilter]:
    rng = random.Random(11)
    out = []
    for _ in range(40):
        scopes = tuple(rng.sample(SCOPES, rng.randint(1, 3)))

        def some(*choices: Any) -> Any:  # each request filter on a third of the reads
            return rng.choice(choices) if rng.random() < 0.3 else None

        out.append(
            ReadFilter(
                principal=rng.choice([*OWNERS, "erin", "nul\0name"]),
                scopes=scopes if rng.random() > 0.1 else (*scopes, "acme\0/alpha"),
                groups=frozenset(rng.choice(GROUPS)),
                planes=tuple(rng.sample(["text", "visual"], rng.randint(1, 2))),
                modalities=some(("text",), ("image", "audio"), (NO_MODALITY,)) or (),
                doc_ids=some(("d1",), ("d2", "d3", "d\0")) or (),
                time_lo_ms=some(T0 + 20_000),
                time_hi_ms=some(T0 + 60_000),
                acl_owner=some("bob", "alice"),
                acl_groups=frozenset(some(("eng",), ("ops", "sales")) or ()),
            )
        )
    return out


def vec(i: int) -> np.ndarray:
    return np.random.default_rng(i).standard_normal(DIM).astype(np.float32)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, list[UnitRecord]]]:
    tmp = tmp_path_factory.mktemp("filters")
    b = PgBackend.open(
        pg_stack.database(tmp), dim=DIM, model_id="m", audit_key=bytes(32), objects_dir=tmp / "o"
    )
    units = world()
    with b.write() as tx:
        for i, u in enumerate(units):
            tx.units.insert(u, vec(i))
    b.outbox.replay()
    yield b, units
    b.close()


def admitted(rf: ReadFilter, units: list[UnitRecord], plane: str | None = None) -> set[str]:
    return {
        u.unit_id
        for u in units
        if (plane is None or u.plane == plane)
        and rf.admits(
            scope=u.scope,
            owner=u.acl_owner,
            groups=u.acl_groups,
            plane=u.plane,
            modality=u.modality,
            doc_id=u.doc_id,
            event_at=u.event_at,
        )
    }


@pytest.mark.parametrize("i", range(40))
def test_every_read_path_admits_what_the_rule_admits(store: tuple[Any, Any], i: int) -> None:
    b, units = store
    rf = filters()[i]
    want = admitted(rf, units)
    got = {u.unit_id for u in units if b.units.get(u.unit_id, rf) is not None}
    assert got == want
    for plane in ("text", "visual"):
        dense = {h.unit_id for h in b.vectors.search(plane, vec(999), 200, rf)}
        assert dense == admitted(rf, units, plane), plane
    lexical = {h.unit_id for h in b.lexical.search("moraine transect", 200, rf)}
    assert lexical == want
    # The search path's view: both legs over every plane of the filter, hydrated by key, and
    # the exact re-check of every key of the store (only the admitted ones stay).
    view = b.search.view(rf)
    leg = view.dense(vec(999), 200)
    assert {r.unit_id for r in view.hits(leg.keys).values()} == want and len(leg.keys) == len(want)
    leg = view.lexical(["moraine", "transect"], 200, defer_check=True)
    assert {r.unit_id for r in view.hits(leg.keys).values()} == want
    every = [ReadFilter(o, ("acme", "beta"), frozenset(), ("text", "visual")) for o in OWNERS]
    # Each owner reads its own Units everywhere: together, every key of the store.
    all_keys = sorted({k for e in every for k in b.search.view(e).dense(vec(999), 200).keys})
    assert len(all_keys) == len(units)
    kept, rows = view.recheck([(k, 1.0) for k in all_keys], len(all_keys))
    assert {rows[k].unit_id for k, _ in kept} == want


def test_the_filters_are_not_trivial(store: tuple[Any, Any]) -> None:
    """Most filters admit something and none admits everything: the checks above can fail."""
    _, units = store
    sizes = [len(admitted(rf, units)) for rf in filters()]
    assert sum(1 for s in sizes if s > 0) >= 10
    assert max(sizes) < len(units)
