"""The result cache in a real Valkey, shared by two service instances (two API processes'
worth of caches over one catalog): what one computes the other serves, a write through one is
never hidden behind the other's cached result, and no entry crosses principals or filters."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import add_principal, make_service
from superchargedb.readfilter import ReadFilter
from superchargedb.search.cache import ResultCache, cache_key, filter_identity
from superchargedb.search.cache_redis import RedisResultCache
from superchargedb.service import Service
from superchargedb.stack.ports import free_port
from superchargedb.stack.valkey import ValkeyEndpoint
from superchargedb.types import Principal

QUERY = {"q": "harbour lighthouse keeper logbook", "top_k": 5}


@pytest.fixture
def two(
    tmp_path: Path, memo_embedder: Any, valkey: ValkeyEndpoint, valkey_prefix: str
) -> Iterator[tuple[Service, Service]]:
    a = make_service(
        tmp_path / "data",
        memo_embedder,
        result_cache="redis",
        redis_url=valkey.url,
        redis_cache_prefix=valkey_prefix,
    )
    # The second process's facade: the same catalog and index, its own connection to Valkey.
    b_cache = RedisResultCache(valkey.url, a.audit_key, prefix=valkey_prefix)
    b = Service(dataclasses.replace(a.parts, cache=b_cache), a.background)
    b.ingestor = a.ingestor
    try:
        yield a, b
    finally:
        b_cache.close()
        a.close()


def key_of(name: str) -> str:
    return f"aegis_sk_test_{name}"


def who(svc: Service, name: str) -> Principal:
    return svc.authenticate(f"Bearer {key_of(name)}")


def ids(res: dict[str, Any]) -> set[str]:
    return {h["doc_id"] for h in res["hits"]}


def test_a_write_through_one_process_is_seen_by_the_other(two: tuple[Service, Service]) -> None:
    a, b = two
    assert isinstance(a.cache, RedisResultCache)
    add_principal(a, "wendy", perms=["read", "write"], scopes=["acme/port"], groups=["docks"])
    wendy = who(a, "wendy")
    a.ingest(
        wendy,
        {
            "units": [
                {
                    "text": "The harbour lighthouse keeper kept a logbook of ships.",
                    "doc_id": "log-1",
                }
            ]
        },
    )
    first = b.search(who(b, "wendy"), QUERY)
    assert first["trace"].get("cache") != "hit" and ids(first) == {"log-1"}
    # What b computed, a serves: the entry is in the shared store, not in b's process.
    again = a.search(wendy, QUERY)
    assert again["trace"]["cache"] == "hit" and ids(again) == {"log-1"}
    # A write through a bumps the scope's generation in its transaction ...
    a.ingest(
        wendy,
        {
            "units": [
                {
                    "text": "A second logbook: the lighthouse keeper's harbour storms.",
                    "doc_id": "log-2",
                }
            ]
        },
    )
    # ... so b, asking the same question, misses and sees the write.
    after = b.search(who(b, "wendy"), QUERY)
    assert after["trace"].get("cache") != "hit"
    assert ids(after) == {"log-1", "log-2"}
    # The stale entry is still in Valkey, under the old generations' key: it is never asked
    # for again (a key without the generations would have served it).
    stale = list(b.cache.client.scan_iter(match=b.cache.prefix + "*"))
    assert len(stale) == 2
    # A delete through a is not hidden behind b's cached result either.
    a.delete_doc(wendy, "log-2", None, None)
    gone = b.search(who(b, "wendy"), QUERY)
    assert gone["trace"].get("cache") != "hit" and ids(gone) == {"log-1"}


def test_entries_do_not_cross_principals(two: tuple[Service, Service]) -> None:
    a, b = two
    # Same scopes, same query: only the groups differ.
    add_principal(
        a, "dana", perms=["read", "write"], scopes=["acme/port"], groups=["docks", "yard"]
    )
    add_principal(a, "erin", perms=["read", "write"], scopes=["acme/port"], groups=["yard"])
    a.ingest(
        who(a, "dana"),
        {
            "units": [
                {
                    "text": "Harbour lighthouse keeper logbook, docks only.",
                    "doc_id": "docks-log",
                    "acl_groups": ["docks"],
                }
            ]
        },
    )
    dana = a.search(who(a, "dana"), QUERY)
    assert ids(dana) == {"docks-log"}
    assert a.search(who(a, "dana"), QUERY)["trace"]["cache"] == "hit"
    erin = b.search(who(b, "erin"), QUERY)
    assert erin["trace"].get("cache") != "hit"
    assert "docks-log" not in ids(erin)
    assert b.search(who(b, "erin"), QUERY)["trace"]["cache"] == "hit"  # erin's own entry
    # A re-permission through a (no new Unit: only the generations move) reaches erin on b.
    a.patch_doc(who(a, "dana"), "docks-log", {"acl_groups": ["docks", "yard"]}, None, None)
    shared = b.search(who(b, "erin"), QUERY)
    assert shared["trace"].get("cache") != "hit" and "docks-log" in ids(shared)


def test_every_field_of_the_read_filter_is_in_the_key() -> None:
    p = Principal(
        id="p1",
        name="ann",
        perms=frozenset({"read"}),
        tier="pro",
        scopes=("acme",),
        active_scope="acme",
        groups=frozenset({"g"}),
    )
    base = ReadFilter("ann", ("acme",), frozenset({"g"}), ("text",))
    variants = {
        "principal": dataclasses.replace(base, principal="bob"),
        "scopes": dataclasses.replace(base, scopes=("acme/x",)),
        "groups": dataclasses.replace(base, groups=frozenset({"h"})),
        "planes": dataclasses.replace(base, planes=("text", "visual")),
        "modalities": dataclasses.replace(base, modalities=("pdf",)),
        "doc_ids": dataclasses.replace(base, doc_ids=("d",)),
        "time_lo_ms": dataclasses.replace(base, time_lo_ms=1),
        "time_hi_ms": dataclasses.replace(base, time_hi_ms=1),
        "acl_owner": dataclasses.replace(base, acl_owner="ann"),
        "acl_groups": dataclasses.replace(base, acl_groups=frozenset({"g"})),
    }
    assert set(variants) == {f.name for f in dataclasses.fields(ReadFilter)}
    k0 = cache_key("search", {"q": "x"}, ["acme"], p, {"acme": 1}, "v", base)
    for name, rf in variants.items():
        assert cache_key("search", {"q": "x"}, ["acme"], p, {"acme": 1}, "v", rf) != k0, name
    assert filter_identity(base)["groups"] == ["g"]
    assert cache_key("search", {"q": "x"}, ["acme"], p, {"acme": 2}, "v", base) != k0


def test_deployments_sharing_a_valkey_do_not_share_entries(valkey, valkey_prefix) -> None:
    one = RedisResultCache(valkey.url, b"\x01" * 32, prefix=valkey_prefix)
    two = RedisResultCache(valkey.url, b"\x02" * 32, prefix=valkey_prefix)
    try:
        one.put("k", {"hits": ["secret"]})
        assert one.get("k") == {"hits": ["secret"]}
        assert two.get("k") is None
    finally:
        one.close()
        two.close()


def test_an_unreachable_valkey_is_a_miss_not_an_error() -> None:
    dead = RedisResultCache(f"redis://127.0.0.1:{free_port()}/0", b"k" * 32, timeout_s=0.2)
    dead.put("k", {"x": 1})
    assert dead.get("k") is None and dead.errors == 1
    # Skipped while it is down: no timeout added to every request.
    assert dead.get("k") is None and dead.errors == 1 and dead.misses == 2


def test_memory_is_still_the_default(tmp_path: Path, memo_embedder: Any) -> None:
    svc = make_service(tmp_path / "data", memo_embedder)
    try:
        assert isinstance(svc.cache, ResultCache)
    finally:
        svc.close()
