"""The facade's reads and the objects' catalog (``storage/protocols_service.py``), as checks
every backend must pass; ``test_contract_service.py`` runs them on each backend kind and on
broken variants of the embedded one.

They assert through the Protocols only. The oracle is the reference rule (``readfilter``) over
the isolation cases of ``checks.WORLD`` and ``checks.READERS`` (owner-only and group-shared
Units, the ``/`` boundary, look-alike scopes, parent and child scopes).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import threading
from pathlib import Path
from typing import Any

from contract.checks import READERS, WORLD, Factory, expected, fill, principal, unit, vector
from superchargedb.readfilter import ReadFilter, may_read
from superchargedb.storage.protocols_service import StoredObject
from superchargedb.storage.protocols_writes import UsageCount, Word
from superchargedb.types import PLANES


def _readers() -> list[ReadFilter]:
    """Every reader of the world over all its grants and every plane (a listing's filter)."""
    return [
        ReadFilter.of(principal(name, groups, scopes), scopes, PLANES)
        for name, groups, scopes in READERS
    ]


def _pages(fetch: Any, limit: int, position: Any) -> list[Any]:
    """Every row of a keyset-paged read, ``limit`` at a time."""
    out: list[Any] = []
    after = None
    while True:
        page = fetch(after, limit)
        out += page
        if len(page) < limit:
            return out
        after = position(page[-1])


def check_listing_follows_the_filter(kind: Factory, tmp: Path) -> None:
    """Documents and Units listed are exactly those the filter admits (a document counted over
    its admitted Units only), paged without a gap or a repeat, narrowed by planes, modalities,
    doc ids and time; a Unit committed but not yet applied is not listed until it is."""
    b = kind().open(tmp / "store")
    try:
        fill(b)
        # One document with a Unit shared with eng and one its owner alone reads.
        mixed = [
            dataclasses.replace(unit("mixed_a", "acme/alpha", "bob", ("eng",)), doc_id="doc-mx"),
            dataclasses.replace(unit("mixed_b", "acme/alpha", "bob", ()), doc_id="doc-mx"),
        ]
        with b.write() as tx:
            for i, u in enumerate(mixed):
                tx.units.insert(u, vector(100 + i))
        b.outbox.replay()
        for rf in _readers():
            want = expected(rf) | {
                u.unit_id
                for u in mixed
                if rf.admits(
                    scope=u.scope,
                    owner=u.acl_owner,
                    groups=u.acl_groups,
                    plane="text",
                    modality="text",
                )
            }
            rows = b.listing.units(rf, after=None, limit=100)
            assert {u.unit_id for _, u in rows} == want, (rf.principal, "units")
            by_id = {u.unit_id: u for _, u in rows}
            for name, scope, owner, groups in WORLD:
                if f"u-{name}" in by_id:
                    assert by_id[f"u-{name}"] == unit(name, scope, owner, groups)
            paged = _pages(
                lambda after, n, rf=rf: b.listing.units(rf, after=after, limit=n), 2, lambda r: r[0]
            )
            assert [u.unit_id for _, u in paged] == [u.unit_id for _, u in rows], rf.principal
            docs = b.listing.docs(rf, after=None, limit=100)
            per_doc: dict[tuple[str, str], int] = {}
            for u in by_id.values():
                per_doc[(u.scope, u.doc_id)] = per_doc.get((u.scope, u.doc_id), 0) + 1
            assert [(d.scope, d.doc_id) for d in docs] == sorted(per_doc), rf.principal
            for d in docs:
                assert d.units == per_doc[(d.scope, d.doc_id)], (rf.principal, d)
                assert d.planes == ("text",) and d.modalities == ("text",)
                assert d.created_at == d.updated_at == 1_700_000_000_000
            paged_docs = _pages(
                lambda after, n, rf=rf: b.listing.docs(rf, after=after, limit=n),
                2,
                lambda d: (d.scope, d.doc_id),
            )
            assert paged_docs == docs, rf.principal
            # The narrowing filters: each may only drop what it names.
            for narrowed in (
                dataclasses.replace(rf, planes=("visual",)),
                dataclasses.replace(rf, modalities=("image",)),
                dataclasses.replace(rf, time_lo_ms=1_700_000_000_001),
                dataclasses.replace(rf, time_hi_ms=1_700_000_000_000),
            ):
                assert b.listing.units(narrowed, after=None, limit=100) == [], narrowed
                assert b.listing.docs(narrowed, after=None, limit=100) == [], narrowed
            one = dataclasses.replace(rf, doc_ids=("doc-shared",), time_hi_ms=1_700_000_000_001)
            got = {u.unit_id for _, u in b.listing.units(one, after=None, limit=100)}
            assert got == want & {"u-shared"}, rf.principal
        alice = _readers()[0]
        late = unit("late", "acme/alpha", "alice", ())
        with b.write() as tx:
            tx.units.insert(late, vector(99))
        listed = {u.unit_id for _, u in b.listing.units(alice, after=None, limit=100)}
        assert "u-late" not in listed, "a Unit not yet applied was listed"
        assert ("acme/alpha", "doc-late") not in {
            (d.scope, d.doc_id) for d in b.listing.docs(alice, after=None, limit=100)
        }
        b.outbox.replay()
        listed = {u.unit_id for _, u in b.listing.units(alice, after=None, limit=100)}
        assert "u-late" in listed
    finally:
        b.close()


def check_usage_and_words(kind: Factory, tmp: Path) -> None:
    """A principal's Units are counted by plane with their text's length; request counts add
    up per route within the days asked for and for that principal only; word tables read back
    field for field, by Unit id (a Unit without words is absent)."""
    b = kind().open(tmp / "store")
    try:
        fill(b)
        owned = [unit(n, s, o, g) for n, s, o, g in WORLD if o == "bob"]
        got = b.usage.units_created("bob")
        assert dict(got.per_plane) == {"text": len(owned)}
        assert got.text_chars == sum(len(u.text) for u in owned)
        assert dict(b.usage.units_created("nobody").per_plane) == {}
        with b.write() as tx:
            tx.usage.add(
                [
                    UsageCount("alice", 10, "search", 2, 500),
                    UsageCount("alice", 12, "search", 1, 100),
                    UsageCount("alice", 12, "answer", 1, 7),
                    UsageCount("alice", 13, "ingest", 4, 0),
                    UsageCount("bob", 11, "search", 5, 5),
                ]
            )
        with b.write() as tx:
            tx.usage.add([UsageCount("alice", 10, "search", 1, 1)])
        reqs = {r.route: (r.requests, r.cost_micro_usd) for r in b.usage.requests("alice", 10, 12)}
        assert reqs == {"search": (4, 601), "answer": (1, 7)}
        assert b.usage.requests("alice", 14, 20) == []
        words = [
            Word(0, 7, t_start_ms=0, t_end_ms=480),
            Word(8, 14, page=2, box=(0.1, 0.2, 0.3, 0.4), conf=0.5),
            Word(15, 19),
        ]
        with b.write() as tx:
            tx.words.put("u-own", words)
        table = b.words.of_units(["u-own", "u-shared", "u-missing"])
        assert dict(table) == {"u-own": words}
    finally:
        b.close()


# Objects at keys: (label, key, owner, scope, groups), put in this order (later is newer).
OBJECTS = [
    ("alice_own", "acme/alpha/k.pdf", "alice", "acme/alpha", ()),
    ("bob_shared", "acme/alpha/k.pdf", "bob", "acme/alpha", ("eng",)),
    ("dave_only", "acme/alpha/k.pdf", "dave", "acme/alpha", ()),
    ("lookalike", "acme/alphabet/k.pdf", "bob", "acme/alphabet", ("eng",)),
    ("lookalike_dash", "acme/alpha-b/k.pdf", "bob", "acme/alpha-b", ("eng",)),
    ("child", "acme/alpha/x/k.pdf", "bob", "acme/alpha/x", ("eng",)),
    ("parent", "acme/k.pdf", "bob", "acme", ("eng",)),
    ("cited", "acme/alpha/c.pdf", "dave", "acme/alpha", ()),
    ("cited_stale", "acme/alpha/s.pdf", "dave", "acme/alpha", ()),
    ("cited_hidden", "acme/alpha/h.pdf", "dave", "acme/alpha", ()),
    ("other_tenant", "beta/alpha/k.pdf", "alice", "beta/alpha", ("eng",)),
]
# Units derived from objects: (name, object label, scope, owner, groups, same content?).
CITERS = [
    ("from_cited", "cited", "acme/alpha", "bob", ("eng",), True),
    ("from_stale", "cited_stale", "acme/alpha", "bob", ("eng",), False),
    ("from_hidden", "cited_hidden", "acme/alphabet", "bob", ("eng",), True),
    ("from_alice", "alice_own", "acme/alpha", "alice", (), True),
    ("from_bob_only", "bob_shared", "acme/alpha", "bob", (), True),
]


def _blob(b: Any, label: str) -> tuple[str, int]:
    info = b.objects.put(iter([f"bytes of {label}".encode()]), 1 << 20)
    return info.sha256, info.size


def _object_world(b: Any) -> dict[str, StoredObject]:
    stored = {}
    for label, key, owner, scope, groups in OBJECTS:
        sha, size = _blob(b, label)
        with b.write() as tx:
            stored[label] = tx.object_rows.put(
                StoredObject(key, owner, sha, size, "application/pdf", scope, groups, owner)
            )
    with b.write() as tx:
        for i, (name, label, scope, owner, groups, same) in enumerate(CITERS):
            obj = stored[label]
            sha = obj.sha256 if same else hashlib.sha256(name.encode()).hexdigest()
            u = dataclasses.replace(
                unit(name, scope, owner, groups),
                object_key=obj.object_key,
                object_sha=sha,
                source_uri=obj.object_key,
            )
            tx.units.insert(u, vector(200 + i))
    b.outbox.replay()
    return stored


def _citers_admitted(rf: ReadFilter, label: str, stored: dict[str, StoredObject]) -> list[str]:
    return [
        f"u-{name}"
        for name, lab, scope, owner, groups, same in CITERS
        if lab == label
        and same
        and rf.admits(scope=scope, owner=owner, groups=groups, plane="text", modality="text")
    ]


def _resolves_to(rf: ReadFilter, key: str, stored: dict[str, StoredObject]) -> str | None:
    """The reference: at the key, the reader's own object first, then the newest; the first
    one whose row the rule admits or that an admitted Unit cites by its exact content."""
    at_key = [lab for lab, k, *_ in OBJECTS if k == key]
    order = sorted(
        at_key,
        key=lambda lab: (stored[lab].acl_owner != rf.principal, -stored[lab].created_at),
    )
    for lab in order:
        o = stored[lab]
        if may_read(rf.scopes, rf.principal, rf.groups, o.scope, o.acl_owner, o.acl_groups):
            return lab
        if _citers_admitted(rf, lab, stored):
            return lab
    return None


def check_objects_resolve_by_the_rule(kind: Factory, tmp: Path) -> None:
    """What a read of a key resolves to: the reader's own object, else the newest it may read
    (the row's scope on the ``/`` boundary and its ACL, or a Unit the reader can read derived
    from exactly its content); Units cited from an object follow the filter; own and the bytes
    held are the owner's alone."""
    b = kind().open(tmp / "store")
    try:
        stored = _object_world(b)
        labels = {(o.object_key, o.acl_owner): lab for lab, o in stored.items()}
        keys = sorted({k for _, k, *_ in OBJECTS})
        for rf in _readers():
            for key in keys:
                got = b.object_rows.resolve(key, rf)
                want = _resolves_to(rf, key, stored)
                assert (None if got is None else labels[(key, got.acl_owner)]) == want, (
                    rf.principal,
                    key,
                )
                if got is not None:
                    assert got == stored[want]
            for lab, obj in stored.items():
                cites = [u.unit_id for u in b.object_rows.citing(obj, rf)]
                assert cites == _citers_admitted(rf, lab, stored), (rf.principal, lab)
            owner_leg = dataclasses.replace(rf, groups=frozenset())
            for lab, obj in stored.items():
                cites = [u.unit_id for u in b.object_rows.citing(obj, owner_leg)]
                assert cites == _citers_admitted(owner_leg, lab, stored), (rf.principal, lab)
        assert b.object_rows.own("acme/alpha/k.pdf", "bob") == stored["bob_shared"]
        assert b.object_rows.own("acme/alpha/k.pdf", "erin") is None
        assert b.object_rows.own("acme/alpha/k", "bob") is None  # exact keys only
        held = sum(o.size for o in stored.values() if o.acl_owner == "bob")
        assert b.object_rows.bytes_held("bob", excluding="nothing") == held
        assert b.object_rows.bytes_held("bob", excluding="acme/k.pdf") == (
            held - stored["parent"].size
        )
    finally:
        b.close()


def check_object_writes_and_collection(kind: Factory, tmp: Path) -> None:
    """A put replaces only its owner's object at the key (keeping its scope, groups and
    creator), each write at a key is stamped later than every one before it, reads inside the
    write see it; a blob is collected only once nothing references it."""
    b = kind().open(tmp / "store")
    try:
        stored = _object_world(b)
        old = stored["bob_shared"]
        sha, size = _blob(b, "bob's new content")
        with b.write() as tx:
            new = tx.object_rows.put(
                StoredObject(
                    old.object_key, "bob", sha, size, "image/png", "acme/zzz", ("ops",), "eve"
                )
            )
            assert tx.object_rows.own(old.object_key, "bob") == new
            assert tx.object_rows.bytes_held("bob", excluding="nothing") == (
                b.object_rows.bytes_held("bob", excluding="nothing") - old.size + size
            )
        assert (new.sha256, new.size, new.content_type) == (sha, size, "image/png")
        assert (new.scope, new.acl_groups, new.created_by) == (old.scope, old.acl_groups, "bob")
        newest = max(o.created_at for o in stored.values() if o.object_key == old.object_key)
        assert new.created_at > newest
        stamps = []
        for i in range(3):  # within one millisecond, still strictly later each time
            with b.write() as tx:
                stamps.append(tx.object_rows.put(dataclasses.replace(new, size=i)).created_at)
        assert stamps == sorted(set(stamps)) and stamps[0] > new.created_at
        assert b.object_rows.own(old.object_key, "alice") == stored["alice_own"]
        # The old blob is cited by Units derived from it: kept. The new one: kept by its row.
        assert not b.object_rows.collect(old.sha256)
        assert b.objects.info(old.sha256) is not None
        assert not b.object_rows.collect(sha)
        lonely = stored["lookalike_dash"]
        with b.write() as tx:
            tx.object_rows.remove(lonely.object_key, lonely.acl_owner)
        assert b.object_rows.own(lonely.object_key, lonely.acl_owner) is None
        assert b.object_rows.collect(lonely.sha256)
        assert b.objects.info(lonely.sha256) is None
        assert not b.object_rows.collect(lonely.sha256)  # gone already
    finally:
        b.close()


def check_a_pinned_blob_outlives_the_collector(kind: Factory, tmp: Path) -> None:
    """A collector that runs while a write holds a pin on an unreferenced blob waits for the
    write to end: when the write names the blob, the blob is kept; once nothing references it,
    the next collection removes it."""
    b = kind().open(tmp / "store")
    try:
        sha, size = _blob(b, "pinned")
        result: list[bool] = []
        with b.write() as tx:
            tx.object_rows.pin(sha)
            collector = threading.Thread(target=lambda: result.append(b.object_rows.collect(sha)))
            collector.start()
            collector.join(0.5)
            assert collector.is_alive(), "the collector did not wait for the pin"
            tx.object_rows.put(
                StoredObject(
                    "acme/alpha/p.pdf",
                    "alice",
                    sha,
                    size,
                    "application/pdf",
                    "acme/alpha",
                    (),
                    "alice",
                )
            )
        collector.join(10)
        assert result == [False]
        assert b.objects.info(sha) is not None
        with b.write() as tx:
            tx.object_rows.remove("acme/alpha/p.pdf", "alice")
        assert b.object_rows.collect(sha)
        assert b.objects.info(sha) is None
    finally:
        b.close()


def check_backend_reports_its_state(kind: Factory, tmp: Path) -> None:
    """A freshly opened store is ready and its consistency report is ok; an object whose blob
    is lost makes the report not ok (data is lost) and names the blob; sizes are in MB."""
    b = kind().open(tmp / "store")
    try:
        fill(b)
        assert b.ready
        report = json.loads(b.doctor())
        assert report["ok"] is True, report
        lost = hashlib.sha256(b"never stored").hexdigest()
        with b.write() as tx:
            tx.object_rows.put(
                StoredObject(
                    "acme/alpha/lost.pdf",
                    "alice",
                    lost,
                    9,
                    "application/pdf",
                    "acme/alpha",
                    (),
                    "alice",
                )
            )
        report = json.loads(b.doctor())
        assert report["ok"] is False, report
        assert lost in json.dumps(report)
        sizes = b.sizes()
        assert sizes and all(k.endswith("_mb") and v >= 0 for k, v in sizes.items()), sizes
    finally:
        b.close()


CHECKS = {
    f.__name__: f
    for f in (
        check_a_pinned_blob_outlives_the_collector,
        check_backend_reports_its_state,
        check_listing_follows_the_filter,
        check_usage_and_words,
        check_objects_resolve_by_the_rule,
        check_object_writes_and_collection,
    )
}
