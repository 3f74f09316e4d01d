"""The storage contract, as checks every backend must pass (``test_contract.py`` runs them on
each backend kind; ``test_teeth.py`` runs them on broken variants and expects failures).

Each check takes a :class:`~backends.Kind` factory and a fresh directory, opens what it needs
and asserts through the Protocols only (``storage/protocols.py``), with
:meth:`ReadFilter.admits` as the oracle for what a read may return.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from contract.backends import DIM, Kind
from superchargedb.errors import PayloadTooLargeError
from superchargedb.readfilter import ReadFilter
from superchargedb.storage.protocols import JobSpec, LeaseLostError, UnitRecord
from superchargedb.types import Principal

Factory = Callable[..., Kind]

# The isolation oracle's cases: look-alike scopes on both sides of the '/' boundary, an owner-only
# Unit, group-shared Units in and out of the reader's groups, a parent and a child scope.
WORLD = [
    # name, scope, owner, groups
    ("own", "acme/alpha", "alice", ()),
    ("shared", "acme/alpha", "bob", ("eng",)),
    ("other_group", "acme/alpha", "bob", ("ops",)),
    ("owner_only", "acme/alpha", "dave", ()),
    ("child", "acme/alpha/x", "bob", ("eng",)),
    ("lookalike", "acme/alphabet", "bob", ("eng",)),
    ("lookalike_dash", "acme/alpha-b", "bob", ("eng",)),
    ("lookalike_zero", "acme/alpha0", "bob", ("eng",)),
    ("parent", "acme", "bob", ("eng",)),
    ("other_tenant", "beta/alpha", "alice", ("eng",)),
]
READERS = [
    # principal, groups, scopes
    ("alice", {"eng"}, ("acme/alpha",)),
    ("carol", set(), ("acme/alpha",)),
    ("erin", {"eng", "ops"}, ("acme/alpha/x", "acme")),
    ("bob", {"ops"}, ("acme/alphabet",)),
]


def principal(name: str, groups: set[str], scopes: tuple[str, ...]) -> Principal:
    return Principal(
        id=f"p-{name}",
        name=name,
        perms=frozenset({"read", "write"}),
        tier="pro",
        scopes=scopes,
        active_scope=scopes[0],
        groups=frozenset(groups),
    )


def unit(name: str, scope: str, owner: str, groups: tuple[str, ...]) -> UnitRecord:
    return UnitRecord(
        unit_id=f"u-{name}",
        scope=scope,
        doc_id=f"doc-{name}",
        plane="text",
        modality="text",
        text=f"glacier survey note {name.replace('_', ' ')}",
        acl_owner=owner,
        acl_groups=groups,
        content_hash=hashlib.sha256(name.encode()).hexdigest(),
        created_at=1_700_000_000_000,
        event_at=1_700_000_000_000,
    )


def vector(i: int) -> np.ndarray:
    rng = np.random.default_rng(i)
    v = np.ones(DIM, dtype=np.float32) + 0.1 * rng.standard_normal(DIM).astype(np.float32)
    return v / np.linalg.norm(v)


def fill(b: Any, world: list[tuple[str, str, str, tuple[str, ...]]] = WORLD) -> None:
    with b.write() as tx:
        for i, (name, scope, owner, groups) in enumerate(world):
            tx.units.insert(unit(name, scope, owner, groups), vector(i))
    b.outbox.replay()


def expected(rf: ReadFilter) -> set[str]:
    return {
        f"u-{n}"
        for n, scope, owner, groups in WORLD
        if rf.admits(scope=scope, owner=owner, groups=groups, plane="text", modality="text")
    }


def check_reads_follow_the_filter(kind: Factory, tmp: Path) -> None:
    """Every read path returns exactly what the filter admits: get, vector and lexical search."""
    b = kind().open(tmp / "store")
    try:
        fill(b)
        q = np.ones(DIM, dtype=np.float32) / np.sqrt(DIM)
        for name, groups, scopes in READERS:
            rf = ReadFilter.of(principal(name, groups, scopes), scopes, ["text"])
            want = expected(rf)
            got = {f"u-{n}" for n, *_ in WORLD if b.units.get(f"u-{n}", rf) is not None}
            assert got == want, (name, "get")
            dense = {h.unit_id for h in b.vectors.search("text", q, 50, rf)}
            assert dense == want, (name, "vectors")
            lexical = {h.unit_id for h in b.lexical.search("glacier survey", 50, rf)}
            assert lexical == want, (name, "lexical")
    finally:
        b.close()


def check_records_round_trip(kind: Factory, tmp: Path) -> None:
    """A stored Unit reads back field for field; deleting and re-permissioning act at once."""
    b = kind().open(tmp / "store")
    try:
        fill(b)
        alice = principal("alice", {"eng"}, ("acme/alpha",))
        rf = ReadFilter.of(alice, ("acme/alpha",), ["text"])
        got = b.units.get("u-shared", rf)
        assert got == unit("shared", "acme/alpha", "bob", ("eng",))
        assert b.vectors.count("text") == len(WORLD)
        with b.write() as tx:
            gone = tx.units.delete(["u-shared", "u-missing"])
            tx.units.set_groups(["u-other_group"], ["eng"])
        b.outbox.replay()
        assert [u.unit_id for u in gone] == ["u-shared"]
        assert b.units.get("u-shared", rf) is None
        assert b.units.get("u-other_group", rf) is not None
        assert b.vectors.count("text") == len(WORLD) - 1
        q = np.ones(DIM, dtype=np.float32) / np.sqrt(DIM)
        hits = {h.unit_id for h in b.vectors.search("text", q, 50, rf)}
        assert "u-shared" not in hits and "u-other_group" in hits
    finally:
        b.close()


def check_write_is_atomic_and_bumps_generations(kind: Factory, tmp: Path) -> None:
    """Units, generations, KV, a job and the audit record commit together or not at all; the
    generations of the written scope and its ancestors move, a sibling's do not."""
    b = kind().open(tmp / "store")
    try:
        scopes = ["acme", "acme/alpha", "acme/alpha/x", "acme/beta"]
        before = dict(b.units.generations(scopes))
        rf = ReadFilter.of(principal("alice", set(), ("acme",)), ("acme",), ["text"])
        spec = JobSpec("embed", "acme/alpha/x", "alice", "alice", (), "dedupe-1", '{"n": 1}')
        with pytest.raises(RuntimeError), b.write() as tx:
            tx.units.insert(unit("own", "acme/alpha/x", "alice", ()), vector(0))
            tx.units.bump_generations(["acme/alpha/x"])
            tx.kv.set("contract:k", "v")
            tx.jobs.enqueue(spec)
            tx.audit.append("alice", "ingest", {"n": 1})
            raise RuntimeError("abort inside the transaction")
        b.outbox.replay()
        assert b.units.get("u-own", rf) is None
        assert dict(b.units.generations(scopes)) == before
        assert b.kv.get("contract:k") is None
        assert b.jobs.depth().get("queued", 0) == 0
        assert b.audit.verify().records == 0
        with b.write() as tx:
            tx.units.insert(unit("own", "acme/alpha/x", "alice", ()), vector(0))
            tx.units.bump_generations(["acme/alpha/x"])
            tx.kv.set("contract:k", "v")
            job_id = tx.jobs.enqueue(spec)
            tx.audit.append("alice", "ingest", {"n": 1})
        b.outbox.replay()
        after = b.units.generations(scopes)
        for s in ("acme", "acme/alpha", "acme/alpha/x"):
            assert after[s] > before[s], s
        assert after["acme/beta"] == before["acme/beta"]
        assert b.units.get("u-own", rf) is not None
        assert b.kv.get("contract:k") == "v"
        job = b.jobs.get(job_id)
        assert job is not None and job.state == "queued" and job.scope == "acme/alpha/x"
        report = b.audit.verify()
        assert report.ok and report.records == 1
    finally:
        b.close()


def check_outbox_replays_after_a_crash(kind: Factory, tmp: Path) -> None:
    """Units committed but not yet applied when the process died are in every index after a
    restart: the outbox is the indexes' source of truth."""
    k = kind()
    b = k.open(tmp / "store")
    with b.write() as tx:
        for i, (name, scope, owner, groups) in enumerate(WORLD):
            tx.units.insert(unit(name, scope, owner, groups), vector(i))
    assert b.outbox.head() > b.outbox.applied()
    k.crash(b)
    b = k.open(tmp / "store")
    try:
        assert b.outbox.applied() >= b.outbox.head()
        assert b.vectors.count("text") == len(WORLD)
        rf = ReadFilter.of(principal("alice", {"eng"}, ("acme/alpha",)), ("acme/alpha",), ["text"])
        q = np.ones(DIM, dtype=np.float32) / np.sqrt(DIM)
        assert {h.unit_id for h in b.vectors.search("text", q, 50, rf)} == expected(rf)
        assert {h.unit_id for h in b.lexical.search("glacier", 50, rf)} == expected(rf)
    finally:
        b.close()


def check_job_lease_is_fenced(kind: Factory, tmp: Path) -> None:
    """A leased job is not handed out again while its lease holds; after it expires another
    worker takes it over and the first holder's heartbeat and completion are refused."""
    k = kind(lease_s=0.3)
    b = k.open(tmp / "store")
    peer = k.peer(b)
    try:
        with b.write() as tx:
            job_id = tx.jobs.enqueue(JobSpec("embed", "acme", "alice", "alice", (), "d1", "{}"))
        first = b.jobs.claim()
        assert first is not None and first.job_id == job_id and first.attempt == 1
        assert peer.jobs.claim() is None, "a leased job was claimed again"
        assert b.jobs.claim() is None, "a leased job was claimed again"
        time.sleep(0.45)
        second = peer.jobs.claim()
        assert second is not None and second.job_id == job_id and second.attempt == 2
        assert second.token != first.token
        with pytest.raises(LeaseLostError):
            b.jobs.heartbeat(first, 0.5)
        with pytest.raises(LeaseLostError), b.write() as tx:
            tx.jobs.complete(first, '{"ok": false}')
        peer.jobs.heartbeat(second, 0.9)
        with peer.write() as tx:
            tx.jobs.complete(second, '{"ok": true}')
        done = b.jobs.get(job_id)
        assert done is not None and done.state == "done" and done.attempts == 2
        assert b.jobs.claim() is None
    finally:
        k.close_peer(peer)
        b.close()


def check_audit_has_one_chain_under_two_writers(kind: Factory, tmp: Path) -> None:
    """Two writers (two processes' handles) appending in turn and at once keep one chain."""
    k = kind()
    b = k.open(tmp / "store")
    peer = k.peer(b)
    errors: list[BaseException] = []

    def append(w: Any, tag: str, i: int) -> None:
        try:
            with w.write() as tx:
                tx.audit.append("alice", tag, {"i": i})
        except BaseException as exc:  # a writer refused (e.g. a fork caught by a constraint)
            errors.append(exc)

    def writer(w: Any, tag: str) -> None:
        for i in range(10):
            append(w, tag, i)

    try:
        for i in range(6):
            append(b if i % 2 == 0 else peer, "turn", i)
        threads = [threading.Thread(target=writer, args=(w, t)) for w, t in ((b, "a"), (peer, "b"))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors, errors
        report = b.audit.verify()
        assert report.ok, report
        assert report.records == 26
    finally:
        k.close_peer(peer)
        b.close()


def check_objects_range_and_etag(kind: Factory, tmp: Path) -> None:
    """Blobs are content-addressed (the ETag is the sha256), read by byte range, and a blob
    over the limit is refused with nothing kept."""
    b = kind().open(tmp / "store")
    try:
        data = bytes(range(256)) * 40
        info = b.objects.put([data[:1000], data[1000:]], max_bytes=len(data))
        assert info.sha256 == hashlib.sha256(data).hexdigest() and info.size == len(data)
        assert info.etag == f'"{info.sha256}"'
        assert b.objects.info(info.sha256) == info
        again = b.objects.put([data], max_bytes=len(data))
        assert again == info  # the same bytes, the same blob
        assert b.objects.read(info.sha256) == data
        assert b.objects.read(info.sha256, 0, 5) == data[:5]
        assert b.objects.read(info.sha256, 5000) == data[5000:]
        assert b.objects.read(info.sha256, len(data) - 3, len(data)) == data[-3:]
        assert b.objects.read(info.sha256, 10, 10) == b""
        big = b"x" * 101
        with pytest.raises(PayloadTooLargeError):
            b.objects.put([big[:50], big[50:]], max_bytes=100)
        assert b.objects.info(hashlib.sha256(big).hexdigest()) is None
        assert b.objects.info("0" * 64) is None
    finally:
        b.close()


CHECKS = {
    f.__name__: f
    for f in (
        check_reads_follow_the_filter,
        check_records_round_trip,
        check_write_is_atomic_and_bumps_generations,
        check_outbox_replays_after_a_crash,
        check_job_lease_is_fenced,
        check_audit_has_one_chain_under_two_writers,
        check_objects_range_and_etag,
    )
}
