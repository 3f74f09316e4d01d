"""The write side's contract (``storage/protocols_writes.py`` and the batch methods of the write
transaction), as checks every backend must pass; ``test_contract_writes.py`` runs them on each
backend kind. They assert through the Protocols only."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from contract.checks import WORLD, Factory, fill, unit, vector
from superchargedb.storage.protocols import JobSpec, UnitRecord
from superchargedb.types import Locator


def _chunks(name: str, scope: str, owner: str, n: int) -> list[UnitRecord]:
    base = unit(name, scope, owner, ())
    return [
        dataclasses.replace(
            base,
            unit_id=f"u-{name}-{i}",
            text=f"{base.text} part {i}",
            chunk_index=i,
            chunk_count=n,
        )
        for i in range(n)
    ]


def check_docs_find_by_key_and_document(kind: Factory, tmp: Path) -> None:
    """``find`` answers per idempotency key in the keys' order with the Units in chunk order
    (empty for an unknown key); ``units_of`` answers per document; both see the transaction's
    own writes; ``insert_many`` stores a batch as ``insert`` would."""
    b = kind().open(tmp / "store")
    try:
        parts = _chunks("long", "acme/alpha", "alice", 3)
        vecs = np.stack([vector(i) for i in range(3)])
        with b.write() as tx:
            tx.units.insert_many(list(reversed(parts)), vecs[::-1].copy())
            key = ("acme/alpha", "doc-long", "alice", parts[0].content_hash)
            seen = tx.docs.find([key])
            assert [u.unit_id for u in seen[0]] == ["u-long-0", "u-long-1", "u-long-2"]
        fill(b)
        unknown = ("acme/alpha", "doc-long", "alice", "0" * 64)
        shared = ("acme/alpha", "doc-shared", "bob", unit("shared", "", "", ()).content_hash)
        found = b.docs.find([unknown, key, shared])
        assert found[0] == []
        assert [u.unit_id for u in found[1]] == ["u-long-0", "u-long-1", "u-long-2"]
        got = found[2][0]
        assert (got.unit_id, got.scope, got.doc_id, got.acl_owner) == (
            "u-shared",
            "acme/alpha",
            "doc-shared",
            "bob",
        )
        assert got.acl_groups == ("eng",) and got.plane == "text"
        with b.write() as tx:
            per_doc = tx.docs.units_of(
                [("acme/alpha", "doc-long", "alice"), ("acme/alpha", "doc-long", "bob")]
            )
        assert sorted(u.unit_id for u in per_doc[0]) == ["u-long-0", "u-long-1", "u-long-2"]
        assert per_doc[1] == []
    finally:
        b.close()


def check_in_scopes_keeps_the_boundary(kind: Factory, tmp: Path) -> None:
    """What a delete or an ACL change may act on lies within the scopes on the ``/`` boundary
    (a look-alike sibling never, a child always); by Unit id only once the indexes hold it."""
    b = kind().open(tmp / "store")
    try:
        world = [(f"d-{n}", s, o, g) for n, s, o, g in WORLD]
        for name, scope, owner, groups in world:  # one document id in every scope
            with b.write() as tx:
                u = dataclasses.replace(unit(name, scope, owner, groups), doc_id="doc-all")
                tx.units.insert(u, vector(len(name)))
        b.outbox.replay()
        with b.write() as tx:
            got = {u.scope for u in tx.docs.in_scopes(["acme/alpha"], doc_id="doc-all")}
            assert got == {"acme/alpha", "acme/alpha/x"}
            assert tx.docs.in_scopes(["acme/alpha"], unit_id="u-d-lookalike") == []
            one = tx.docs.in_scopes(["acme/alpha"], unit_id="u-d-child")
            assert [u.unit_id for u in one] == ["u-d-child"]
            assert tx.docs.in_scopes(["acme/alpha/x"], unit_id="u-d-own") == []
        with b.write() as tx:
            tx.units.insert(unit("late", "acme/alpha", "alice", ()), vector(99))
        with b.write() as tx:
            assert tx.docs.in_scopes(["acme/alpha"], unit_id="u-late") == []
        b.outbox.replay()
        with b.write() as tx:
            assert [u.unit_id for u in tx.docs.in_scopes(["acme"], unit_id="u-late")] == ["u-late"]
    finally:
        b.close()


def check_quota_is_counted_in_the_write(kind: Factory, tmp: Path) -> None:
    """A reserved document counts once against its creator, and not when the transaction
    rolls back; ``unknown_docs`` names what a write would newly create."""
    b = kind().open(tmp / "store")
    try:
        d1, d2 = ("acme", "doc-1", "alice"), ("acme", "doc-2", "alice")
        with pytest.raises(RuntimeError), b.write() as tx:
            tx.docs.reserve([d1], "alice", 1)
            assert tx.quota.docs_used("alice") == 1
            raise RuntimeError("abort")
        assert b.quota.docs_used("alice") == 0
        with b.write() as tx:
            tx.docs.reserve([d1, d1], "alice", 1)
            tx.docs.reserve([d1], "alice", 2)  # known: kept, not counted again
            assert tx.quota.unknown_docs([d1, d2, d2]) == {d2}
        assert b.quota.docs_used("alice") == 1 and b.quota.docs_used("bob") == 0
    finally:
        b.close()


def check_media_use_and_reservations(kind: Factory, tmp: Path) -> None:
    """Pages and media time count what a principal created from objects (not what it owns
    or what others created); queued and running derivations' reservations add up, a done or
    failed one's do not."""
    b = kind().open(tmp / "store")
    try:
        page = unit("page", "acme", "alice", ())
        pages = [
            dataclasses.replace(
                page,
                unit_id=f"u-page-{i}",
                content_hash=f"{i:064x}",
                plane="doc_visual",
                modality="page",
                locator=Locator(kind="bbox", page=1 + i // 2, box=(0.1, 0.1, 0.5, 0.2)),
                object_key="acme/scan.pdf",
                object_sha="a" * 64,
                created_by="alice",
            )
            for i in range(4)  # two Units on each of two pages
        ]
        audio = dataclasses.replace(
            unit("talk", "acme", "bob", ()),
            plane="audio",
            modality="audio_segment",
            locator=Locator(kind="time_range", t_start_ms=0, t_end_ms=90_000),
            object_key="acme/talk.wav",
            object_sha="b" * 64,
            created_by="alice",  # alice created it for bob: it is alice's media time
        )
        with b.write() as tx:
            tx.units.insert_many([*pages, audio], np.stack([vector(i) for i in range(5)]))
            for i, (pages_n, ms) in enumerate(((3, 0), (0, 60_000), (5, 0))):
                tx.jobs.enqueue(
                    JobSpec(
                        "derive",
                        "acme",
                        "alice",
                        "alice",
                        (),
                        f"media-{i}",
                        json.dumps({"cost_pages": pages_n, "cost_ms": ms}),
                    )
                )
        use = b.quota.media_use("alice")
        assert (use.media_pages, use.media_ms) == (2, 90_000)
        assert b.quota.media_use("bob").media_ms == 0
        assert b.quota.media_reserved("alice") == (8, 60_000)
        lease = b.jobs.claim()
        assert lease is not None
        assert b.quota.media_reserved("alice") == (8, 60_000)  # running still holds it
        with b.write() as tx:
            tx.jobs.complete(lease, "{}")
        assert b.quota.media_reserved("alice") == (5, 60_000)
        assert b.quota.media_reserved("bob") == (0, 0)
    finally:
        b.close()


def check_jobs_found_by_dedupe_key(kind: Factory, tmp: Path) -> None:
    """``find`` returns the newest job of a dedupe key that has not failed, with its groups
    (changed by ``set_groups``) and, once done, its result."""
    b = kind().open(tmp / "store")
    try:
        spec = JobSpec("embed", "acme", "alice", "alice", ("eng",), "dd", '{"n": 1}')
        with b.write() as tx:
            assert tx.jobs.find("dd") is None
            job_id = tx.jobs.enqueue(spec)
            found = tx.jobs.find("dd")
            assert found is not None and found.job_id == job_id and found.state == "queued"
            assert found.acl_groups == ("eng",)
        lease = b.jobs.claim()
        assert lease is not None and lease.job_id == job_id
        assert (lease.principal, lease.scope, lease.acl_owner, lease.acl_groups) == (
            "alice",
            "acme",
            "alice",
            ("eng",),
        )
        with b.write() as tx:
            tx.jobs.complete(lease, '{"unit_ids": ["u-1"]}')
            tx.jobs.set_groups(job_id, ["eng", "ops"])
        with b.write() as tx:
            done = tx.jobs.find("dd")
        assert done is not None and done.state == "done"
        assert done.acl_groups == ("eng", "ops")
        assert json.loads(done.result_json or "{}") == {"unit_ids": ["u-1"]}
        with b.write() as tx:
            tx.jobs.enqueue(dataclasses.replace(spec, dedupe_key="gone"))
        lost = b.jobs.claim()
        assert lost is not None
        assert b.jobs.fail(lost, "bad input", retry=False) == "failed"
        with b.write() as tx:
            assert tx.jobs.find("gone") is None
    finally:
        b.close()


def check_import_batch_is_one_write(kind: Factory, tmp: Path) -> None:
    """A bulk batch stores the new Units readable through the indexes, counts their documents
    for the importer, audits once; the same batch again stores nothing and audits nothing."""
    b = kind().open(tmp / "store")
    try:
        units = [
            dataclasses.replace(unit(n, s, o, g), created_by="importer") for n, s, o, g in WORLD
        ]
        vecs = np.stack([vector(i) for i in range(len(units))])
        with b.write() as tx:
            assert tx.units.import_batch(units, vecs, "importer") == len(units)
        b.outbox.replay()
        assert b.vectors.count("text") == len(units)
        assert b.quota.docs_used("importer") == len(units)
        with b.write() as tx:
            assert tx.units.import_batch(units, vecs, "importer") == 0
        report = b.audit.verify()
        assert report.ok and report.records == 1
    finally:
        b.close()


def check_bulk_load_pipelines_the_apply(kind: Factory, tmp: Path) -> None:
    """Batches applied with their vector add behind the next write are all in the indexes
    after the wait, and after a checkpoint and a crash they are still there."""
    k = kind()
    b = k.open(tmp / "store")
    units = [dataclasses.replace(unit(n, s, o, g), created_by="importer") for n, s, o, g in WORLD]
    vecs = np.stack([vector(i) for i in range(len(units))])
    half = len(units) // 2
    with b.bulk.tuned(64):
        for part, v in ((units[:half], vecs[:half]), (units[half:], vecs[half:])):
            with b.ordered():
                with b.write() as tx:
                    tx.units.import_batch(part, v, "importer")
                b.bulk.wait_behind()
                b.bulk.apply_behind()
        with b.ordered():
            b.bulk.wait_behind()
            assert b.vectors.count("text") == len(units)
            assert b.outbox.applied() >= b.outbox.head()
            b.bulk.checkpoint()
    k.crash(b)
    b = k.open(tmp / "store")
    try:
        assert b.vectors.count("text") == len(units)
    finally:
        b.close()


CHECKS = {
    f.__name__: f
    for f in (
        check_docs_find_by_key_and_document,
        check_in_scopes_keeps_the_boundary,
        check_quota_is_counted_in_the_write,
        check_media_use_and_reservations,
        check_jobs_found_by_dedupe_key,
        check_import_batch_is_one_write,
        check_bulk_load_pipelines_the_apply,
    )
}
