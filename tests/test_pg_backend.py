"""What the contract suite does not reach on PostgreSQL: concurrent claimers, concurrent
writers and appliers of the outbox, concurrent migrators, a tampered audit chain, job retries."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import pg_stack
from pg_stack import unit
from superchargedb.errors import ConflictError, ValidationError
from superchargedb.readfilter import ReadFilter
from superchargedb.storage.protocols import JobSpec, UnitRecord
from superchargedb.storage.protocols_writes import UsageCount
from superchargedb.types import Locator, Principal

if pg_stack.available():
    pytest.skip(pg_stack.available() or "", allow_module_level=True)

import psycopg  # noqa: E402

from superchargedb.storage.postgres import migrations  # noqa: E402
from superchargedb.storage.postgres.backend import PgBackend  # noqa: E402

DIM = 8


def open_(url: str, tmp: Path, **kw: Any) -> PgBackend:
    return PgBackend.open(
        url, dim=DIM, model_id="m", audit_key=bytes(32), objects_dir=tmp / "o", **kw
    )


def run_all(fns: list[Any]) -> list[BaseException]:
    errors: list[BaseException] = []

    def wrap(f: Any) -> None:
        try:
            f()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=wrap, args=(f,)) for f in fns]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors


def test_concurrent_claimers_take_each_job_once(tmp_path: Path) -> None:
    url = pg_stack.database(tmp_path)
    workers = [open_(url, tmp_path) for _ in range(4)]
    try:
        with workers[0].write() as tx:
            ids = {
                tx.jobs.enqueue(JobSpec("k", "acme", "a", "a", (), f"d{i}", "{}"))
                for i in range(40)
            }
        claimed: list[list[str]] = [[] for _ in workers]

        def drain(i: int) -> None:
            w = workers[i]
            while (lease := w.jobs.claim()) is not None:
                claimed[i].append(lease.job_id)
                with w.write() as tx:
                    tx.jobs.complete(lease, "{}")

        assert not run_all([lambda i=i: drain(i) for i in range(len(workers))])
        flat = [j for c in claimed for j in c]
        assert sorted(flat) == sorted(ids)  # every job once, none twice
        assert workers[0].jobs.depth()["done"] == 40
    finally:
        for w in workers:
            w.close()


def test_a_failed_job_is_retried_until_its_attempts_run_out(tmp_path: Path) -> None:
    b = open_(pg_stack.database(tmp_path), tmp_path, max_attempts=2)
    try:
        with b.write() as tx:
            job = tx.jobs.enqueue(JobSpec("k", "acme", "a", "a", (), "d", "{}"))
        first = b.jobs.claim()
        assert first is not None and b.jobs.fail(first, "boom", retry=True) == "queued"
        second = b.jobs.claim()
        assert second is not None and second.attempt == 2
        assert b.jobs.fail(second, "boom", retry=True) == "failed"
        rec = b.jobs.get(job)
        assert rec is not None and rec.state == "failed" and rec.attempts == 2
        assert b.jobs.claim() is None
    finally:
        b.close()


def test_a_failed_jobs_document_stops_counting_unless_it_has_units(tmp_path: Path) -> None:
    """As in the embedded queue: a job that fails for good (by ``fail`` or by its last lease
    expiring) releases the document it reserved, but not one that holds Units already."""
    b = open_(pg_stack.database(tmp_path), tmp_path, max_attempts=1, lease_s=0.05)
    try:
        with b.write() as tx:
            for doc in ("d-empty", "d0", "d-expired"):
                tx.docs.reserve([("acme", doc, "alice")], "alice", 1)
                tx.jobs.enqueue(
                    JobSpec("derive", "acme", "alice", "alice", (), doc, f'{{"doc_id": "{doc}"}}')
                )
            tx.units.insert(unit(0), np.ones(DIM, dtype=np.float32))  # d0 has a Unit
        assert b.quota.docs_used("alice") == 3
        for _ in range(2):
            lease = b.jobs.claim()
            assert lease is not None
            assert b.jobs.fail(lease, "bad input", retry=True) == "failed"  # no attempt left
        assert b.quota.unknown_docs([("acme", "d-empty", "alice"), ("acme", "d0", "alice")]) == {
            ("acme", "d-empty", "alice")
        }
        assert b.jobs.claim() is not None  # d-expired, whose lease then runs out
        threading.Event().wait(0.1)
        assert b.jobs.claim() is None  # the expired last attempt failed instead
        assert b.quota.docs_used("alice") == 1
    finally:
        b.close()


def test_outbox_statistics_equal_the_postings_after_concurrent_writers(tmp_path: Path) -> None:
    """Writers commit while other processes apply the outbox; every row is applied exactly
    once, so the derived statistics equal what the postings say."""
    url = pg_stack.database(tmp_path)
    bs = [open_(url, tmp_path) for _ in range(3)]
    try:

        def writer(w: PgBackend, base: int) -> None:
            for i in range(base, base + 30):
                with w.write() as tx:
                    tx.units.insert(unit(i), np.ones(DIM, np.float32))
                    if i % 7 == 0:
                        tx.units.delete([f"u{i - 1}"])
                    if i % 5 == 0:
                        tx.units.set_groups([f"u{i - 2}"], ["ops", "eng", "x"])
                w.outbox.replay()

        assert not run_all([lambda w=w, n=n: writer(w, 100 * n) for n, w in enumerate(bs)])
        bs[0].outbox.replay()
        assert bs[0].outbox.applied() == bs[0].outbox.head()
        with psycopg.connect(url) as conn:
            stats = conn.execute("SELECT n_docs, total FROM lex_stats").fetchone()
            truth = conn.execute("SELECT count(*), sum(dl) FROM units").fetchone()
            assert stats == truth
            df = dict(conn.execute("SELECT term, df FROM lex_terms").fetchall())
            counted = dict(conn.execute("SELECT term, count(*) FROM postings GROUP BY term"))
            assert df == counted
    finally:
        for b in bs:
            b.close()


def test_migrators_racing_on_a_fresh_database_apply_once(tmp_path: Path) -> None:
    url = pg_stack.database(tmp_path)
    opened: list[PgBackend] = []
    assert not run_all([lambda: opened.append(open_(url, tmp_path)) for _ in range(3)])
    for b in opened:
        b.close()
    with psycopg.connect(url) as conn:
        got = conn.execute("SELECT version FROM schema_version ORDER BY version").fetchall()
    assert got == [(v,) for v, _, _ in migrations.MIGRATIONS]  # each step once
    with pytest.raises(ValueError, match="8-d"):
        PgBackend.open(url, dim=16, model_id="m", audit_key=bytes(32), objects_dir=tmp_path)


def test_the_vectors_are_kept_in_their_rows(tmp_path: Path) -> None:
    """D-273: a row past the TOAST threshold moves its text out of line, not its vector (which
    the exact scan reads for every admitted row): the column's storage is MAIN."""
    b = open_(pg_stack.database(tmp_path), tmp_path)
    try:
        with b.pool.connection() as conn:
            storage = conn.execute(
                "SELECT attstorage FROM pg_attribute"
                " WHERE attrelid = 'units'::regclass AND attname = 'embedding'"
            ).fetchone()
    finally:
        b.close()
    assert storage == ("m",)  # pgvector's default is EXTERNAL ("e")


def test_a_tampered_audit_record_is_named(tmp_path: Path) -> None:
    url = pg_stack.database(tmp_path)
    b = open_(url, tmp_path)
    try:
        for i in range(5):
            with b.write() as tx:
                tx.audit.append("alice", "ingest", {"i": i})
        assert b.audit.verify().ok
        with psycopg.connect(url) as conn:
            conn.execute(
                "UPDATE audit_log SET record = replace(record, '\"i\":2', '\"i\":9') WHERE seq = 3"
            )
        report = b.audit.verify()
        assert not report.ok and report.first_bad_seq == 3 and report.records == 3
        with psycopg.connect(url) as conn:
            conn.execute("DELETE FROM audit_log WHERE seq >= 3")
        truncated = b.audit.verify()  # the recorded head is past the end
        assert not truncated.ok and truncated.first_bad_seq == 3
    finally:
        b.close()


def test_closing_signs_the_head_outside_the_database(tmp_path: Path) -> None:
    """Each process signs the head it leaves on close (D-248): cutting the chain's end and
    rewriting the recorded head to match is then caught by the anchor alone."""
    url = pg_stack.database(tmp_path)
    anchor = tmp_path / "anchor" / "head.json"
    b = open_(url, tmp_path, audit_anchor=anchor)
    for i in range(4):
        with b.write() as tx:
            tx.audit.append("alice", "ingest", {"i": i})
    b.close()
    signed = json.loads(anchor.read_text())
    assert signed["seq"] == 4 and len(signed["mac"]) == 64
    assert not list(anchor.parent.glob("*.tmp"))  # the per-process temp file was renamed
    b = open_(url, tmp_path, audit_anchor=anchor)
    try:
        assert b.audit_trail.verify_chain().ok
        with psycopg.connect(url) as conn:
            h = conn.execute("SELECT hash FROM audit_log WHERE seq = 2").fetchone()[0]
            conn.execute("DELETE FROM audit_log WHERE seq >= 3")
            conn.execute("UPDATE kv SET value = %s WHERE key = 'audit_head'", (f"2:{h}",))
        report = b.audit_trail.verify_chain()
        assert not report.ok and "anchor" in report.reason, report
    finally:
        b.close()
    assert json.loads(anchor.read_text())["seq"] == 2  # the next close signs what is there


def test_a_unit_with_a_nul_byte_is_refused_with_nothing_written(tmp_path: Path) -> None:
    b = open_(pg_stack.database(tmp_path), tmp_path)
    try:
        bad = unit(1)
        with pytest.raises(ValueError, match="NUL"), b.write() as tx:
            tx.units.insert(unit(0), np.ones(DIM, np.float32))
            tx.units.insert(
                UnitRecord(**{**bad.__dict__, "text": "a\0b"}), np.ones(DIM, np.float32)
            )
        assert b.vectors.count("text") == 0 and b.outbox.head() == 0
        with pytest.raises(ValueError, match="acl_groups"), b.write() as tx:
            tx.units.insert(
                UnitRecord(**{**bad.__dict__, "acl_groups": ("a\0",)}), np.ones(DIM, np.float32)
            )
    finally:
        b.close()


@pytest.mark.parametrize(
    "loc",
    [
        Locator(kind="bbox", box=(0.1, 0.25, 0.5, 0.75), page=3),
        Locator(kind="time_range", t_start_ms=1500, t_end_ms=4250, shot_idx=2),
        Locator(kind="char_span", start=10, end=42),
    ],
)
def test_a_units_locator_and_optional_fields_round_trip(tmp_path: Path, loc: Locator) -> None:
    b = open_(pg_stack.database(tmp_path), tmp_path)
    try:
        u = UnitRecord(
            **{
                **unit(1).__dict__,
                "locator": loc,
                "source_uri": "obj/x.pdf#page=3",
                "mime": "application/pdf",
                "chunk_index": 2,
                "chunk_count": 5,
                "event_at": 77,
                "object_key": "obj/x.pdf",
                "object_sha": "ab" * 32,
            }
        )
        with b.write() as tx:
            tx.units.insert(u, np.ones(DIM, np.float32))
        rf = ReadFilter("alice", ("acme",), frozenset(), ("text",))
        assert b.units.get("u1", rf) == u
    finally:
        b.close()


def test_a_duplicate_unit_id_is_a_conflict_and_nothing_of_its_write_stays(tmp_path: Path) -> None:
    b = open_(pg_stack.database(tmp_path), tmp_path)
    try:
        with b.write() as tx:
            tx.units.insert(unit(1), np.ones(DIM, np.float32))
        head = b.outbox.head()
        with pytest.raises(ConflictError), b.write() as tx:
            tx.units.insert(unit(2), np.ones(DIM, np.float32))
            tx.units.insert(unit(1), np.ones(DIM, np.float32))  # pipelined: fails at the sync
            tx.kv.set("k", "v")
        assert b.vectors.count("text") == 1 and b.outbox.head() == head
        assert b.kv.get("k") is None
        rf = ReadFilter("alice", ("acme",), frozenset(), ("text",))
        assert b.units.get("u2", rf) is None
    finally:
        b.close()


def test_a_taken_principal_name_fails_only_its_statement(tmp_path: Path) -> None:
    """As in SQLite, where a failed statement leaves its transaction usable: the 409 of a taken
    name, caught inside the write, keeps what the write did before and after it."""

    def person(name: str, pid: str) -> Principal:
        return Principal(pid, name, frozenset({"read"}), "pro", ("acme",), "acme", frozenset())

    b = open_(pg_stack.database(tmp_path), tmp_path)
    try:
        with b.write() as tx:
            tx.principals.insert(person("alice", "p-1"), 1)
            with pytest.raises(ConflictError, match="alice"):
                tx.principals.insert(person("alice", "p-2"), 2)
            tx.principals.insert(person("bob", "p-3"), 3)
            tx.audit.append("operator", "principal.create", {"n": 2})
        assert [s.principal.id for s in b.principals.every()] == ["p-1", "p-3"]
        assert b.audit.verify().ok
    finally:
        b.close()


def test_nul_bytes_in_the_write_sides_values_never_reach_the_driver(tmp_path: Path) -> None:
    """PostgreSQL text cannot hold a NUL byte (D-207): a value to be stored with one is a 422
    with nothing written; a lookup or a removal by one finds nothing, as for any unknown key."""
    b = open_(pg_stack.database(tmp_path), tmp_path)
    bad = "x\0y"
    try:
        refused = [
            lambda tx: tx.principals.insert(
                Principal("p-1", bad, frozenset({"read"}), "pro", ("acme",), "acme", frozenset()),
                1,
            ),
            lambda tx: tx.principals.add_key(
                "k", "p", "h" * 64, bad, created_at=1, expires_at=None, issued_by=None
            ),
            lambda tx: tx.usage.add([UsageCount(bad, 1, "/v1/search", 1, 0)]),
            lambda tx: tx.jobs.enqueue(JobSpec("k", "acme", bad, "a", (), "d", "{}")),
            lambda tx: tx.units.set_groups(["u1"], [bad]),
        ]
        for step in refused:
            with pytest.raises(ValidationError, match="NUL"), b.write() as tx:
                tx.audit.append("operator", "before", {})
                step(tx)
        with pytest.raises(ValidationError):
            b.sessions.start(bad, "p", "k", at=1, expires_at=2)
        with b.write() as tx:  # lookups and removals by such a value: nothing there
            assert tx.docs.find([("acme", bad, "a", "h")]) == [[]]
            assert tx.docs.in_scopes(["acme"], unit_id=bad) == []
            assert tx.quota.unknown_docs([("acme", bad, "a")]) == {("acme", bad, "a")}
            assert tx.jobs.find(bad) is None
            assert tx.units.delete([bad]) == []
            tx.words.put(bad, [])
            tx.object_rows.remove(bad, "a")
            tx.principals.revoke_key(bad, 1)
            tx.docs.reserve([("acme", bad, "a")], "a", 1)
        assert b.principals.named(bad) is None and b.principals.by_key_hash(bad) is None
        assert b.sessions.find(bad) is None and not b.sessions.end(bad, "p")
        assert b.jobs.get(bad) is None
        assert b.audit.verify().records == 0  # each refused write rolled back whole
        assert b.quota.docs_used("a") == 0
    finally:
        b.close()
