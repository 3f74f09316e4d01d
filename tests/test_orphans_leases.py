"""What a crash leaves behind is cleaned up at the next start, and nothing else is.

Orphans: upload temp files and blobs no catalog row references are removed at startup (under the
data-dir lock, before requests); referenced blobs, including the old blob a queued job still
pins after its object was replaced, stay byte-exact. Leases: a job leased by a dead server
instance (a real SIGKILL at ``jobs.after_claim``) is claimable at once after a restart; a live
external worker's lease is not taken, and is released once that worker is really dead. The audit
anchor is written atomically and durably.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from conftest import add_principal, embedded, make_service
from superchargedb.storage.sqlite import audit
from superchargedb.storage.sqlite.catalog import Catalog
from superchargedb.storage.sqlite.jobs import JobQueue, LeaseOwner, proc_start

KEY = "aegis_sk_test_w"


def crash(code: str, point: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a fresh interpreter that SIGKILLs itself at fault point ``point``."""
    env = {**os.environ, "SCDB_CRASH_AT": point}
    p = subprocess.run(
        [sys.executable, "-c", "import superchargedb\n" + textwrap.dedent(code)],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert p.returncode == -signal.SIGKILL, (p.returncode, p.stderr[-2000:])
    return p


def put(svc: Any, key: str, body: bytes, if_match: str | None = None) -> str:
    p = svc.authenticate(f"Bearer {KEY}")
    out = svc.put_object(p, key, [body], "application/octet-stream", "acme", if_match=if_match)
    return str(out["sha256"])


def blob_files(data: Path) -> set[str]:
    return {p.name for p in (data / "objects").glob("??/??/*") if p.is_file()}


def enqueue(svc: Any, doc: str, sha: str = "0" * 64) -> str:
    with embedded(svc).catalog.write() as conn:
        conn.execute(
            "INSERT INTO docs(scope, doc_id, acl_owner, created_by, created_at)"
            " VALUES ('acme', ?, 'w', 'w', 0)",
            (doc,),
        )
        return embedded(svc).queue.enqueue(
            conn,
            "derive",
            {"doc_id": doc, "sha256": sha, "object_key": f"acme/{doc}"},
            principal="w",
            scope="acme",
            acl_owner="w",
            acl_groups=[],
            dedupe_key=doc,
        )


def job_row(svc: Any, job_id: str) -> Any:
    return (
        embedded(svc)
        .catalog.reader()
        .execute("SELECT * FROM jobs WHERE id = ?", (job_id,))
        .fetchone()
    )


# -- orphans ------------------------------------------------------------------------------------


@pytest.mark.slow
def test_startup_removes_orphans_and_keeps_every_referenced_blob(tmp_path, embedder):
    from test_media_ingest import make_pdf

    data = tmp_path / "d"
    s = make_service(data, embedder, job_workers=0)
    add_principal(s, "w", perms=["read", "write"], scopes=["acme"])
    pdf = make_pdf()
    try:
        kept = {"acme/a.bin": b"alpha" * 100, "acme/b.bin": b"beta" * 100}
        shas = {k: put(s, k, v) for k, v in kept.items()}
        # Replaced with nothing pinning the old content: the old blob is garbage.
        old_r = put(s, "acme/r.bin", b"first version")
        kept["acme/r.bin"] = b"second version"
        shas["acme/r.bin"] = put(s, "acme/r.bin", kept["acme/r.bin"], f'"{old_r}"')
        # A queued PDF job pins the blob it was queued with, even after its object is replaced.
        pinned = put(s, "acme/doc.pdf", pdf)
        r = s.ingest(
            s.authenticate(f"Bearer {KEY}"),
            {"units": [{"source_uri": "acme/doc.pdf", "mime": "application/pdf"}]},
            "acme",
        )
        job_id = r["results"][0]["job_id"]
        kept["acme/doc.pdf"] = pdf + b"\n%% v2\n%%EOF\n"
        shas["acme/doc.pdf"] = put(s, "acme/doc.pdf", kept["acme/doc.pdf"], f'"{pinned}"')
        assert job_row(s, job_id)["state"] == "queued"
    finally:
        s.close()

    # Real crashes: a blob durable without its row, and an upload's fsynced temp file.
    crash(
        f"""
        from superchargedb.wiring import open_service
        from superchargedb.settings import Settings
        s = open_service(Settings(data_dir={str(data)!r}, job_workers=0))
        p = s.authenticate("Bearer {KEY}")
        s.put_object(p, "acme/crashed.bin", [b"never committed"], None, "acme")
        """,
        "objects.put.before_row",
    )
    crash(
        f"""
        from pathlib import Path
        from superchargedb.storage.sqlite.objects import FileBlobStore
        FileBlobStore(Path({str(data / "objects")!r})).put([b"half an upload"], 1 << 20)
        """,
        "objects.blob.after_fsync",
    )
    crashed_sha = hashlib.sha256(b"never committed").hexdigest()
    objects = data / "objects"
    # The crashed server's own start already removed the replaced object's old blob.
    assert old_r not in blob_files(data) and pinned in blob_files(data)
    assert crashed_sha in blob_files(data)
    assert len(list((objects / "tmp").iterdir())) == 1
    # Orphans written directly: a stray temp file and a blob no row names.
    (objects / "tmp" / "tmpstray").write_bytes(b"x" * 10)
    stray = hashlib.sha256(b"stray").hexdigest()
    (objects / stray[:2] / stray[2:4]).mkdir(parents=True, exist_ok=True)
    (objects / stray[:2] / stray[2:4] / stray).write_bytes(b"stray")
    # Negative controls: a file written after the lock was taken, and a name that is no blob.
    late = objects / "tmp" / "tmplate"
    late.write_bytes(b"y")
    os.utime(late, (time.time() + 3600, time.time() + 3600))
    (objects / stray[:2] / stray[2:4] / "README").write_text("not a blob")
    before = blob_files(data)
    assert {pinned, crashed_sha, stray} <= before

    s = make_service(data, embedder, job_workers=0)
    try:
        assert s.swept is not None
        assert (s.swept["tmp_files"], s.swept["blobs"]) == (2, 2), s.swept
        after = blob_files(data)
        assert before - after == {crashed_sha, stray}
        assert pinned in after  # the queued job still derives from the old PDF
        assert sorted(p.name for p in (objects / "tmp").iterdir()) == ["tmplate"]
        assert (objects / stray[:2] / stray[2:4] / "README").exists()
        p = s.authenticate(f"Bearer {KEY}")
        for key, body in kept.items():
            obj = s.object_for_read(p, key)
            assert obj.sha256 == shas[key]
            assert s.blobs.path(obj.sha256).read_bytes() == body
        assert hashlib.sha256(s.blobs.path(pinned).read_bytes()).hexdigest() == pinned
        report = s.doctor()
        assert report["ok"], report
        obj = report["objects"]
        assert obj["missing_blobs"] == [] and obj["orphan_blobs"] == 0
        assert obj["orphan_tmp_files"] == 0 and obj["swept_at_startup"]["blobs"] == 2
    finally:
        s.close()


def test_doctor_reports_orphans_and_missing_blobs_without_deleting(svc):
    add_principal(svc, "w", perms=["read", "write"], scopes=["acme"])
    sha = put(svc, "acme/x.bin", b"payload")
    objects = svc.blobs.root
    old = time.time() - 3600
    orphans = []
    for i, age in enumerate((old, old, time.time())):  # the fresh one may be an upload in flight
        body = f"orphan {i}".encode()
        h = hashlib.sha256(body).hexdigest()
        f = objects / h[:2] / h[2:4] / h
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_bytes(body)
        os.utime(f, (age, age))
        orphans.append(f)
    tmp = objects / "tmp" / "tmpold"
    tmp.write_bytes(b"abc")
    os.utime(tmp, (old, old))
    rep = svc.doctor()
    assert rep["ok"] and rep["objects"]["ok"], rep
    assert rep["objects"]["orphan_blobs"] == 2 and rep["objects"]["orphan_tmp_files"] == 1
    assert rep["objects"]["orphan_bytes"] == len(b"orphan 0") * 2 + 3
    assert all(f.exists() for f in orphans) and tmp.exists()  # a running server only reports
    svc.blobs.path(sha).unlink()  # a referenced blob lost: data is gone, the doctor fails
    rep = svc.doctor()
    assert not rep["ok"] and rep["objects"]["missing_blobs"] == [sha]


# -- leases -------------------------------------------------------------------------------------


def test_dead_server_lease_is_claimable_at_once(tmp_path, embedder):
    data = tmp_path / "d"
    s = make_service(data, embedder, job_workers=0)
    add_principal(s, "w", perms=["read", "write"], scopes=["acme"])
    job_id = enqueue(s, "doc1")
    s.close()
    # A server instance: takes the data-dir lock, leases the job and is SIGKILLed holding it.
    p = crash(
        f"""
        import os
        from pathlib import Path
        from superchargedb.storage.sqlite.catalog import Catalog
        from superchargedb.storage.sqlite.jobs import JobQueue
        from superchargedb.storage.lock import DataDirLock
        DataDirLock(Path({str(data)!r})).acquire()
        q = JobQueue(Catalog(Path({str(data / "catalog.db")!r})), owner_kind="server")
        print(os.getpid(), flush=True)
        q.claim()
        """,
        "jobs.after_claim",
    )
    conn = Catalog(data / "catalog.db")
    row = conn.reader().execute("SELECT * FROM jobs WHERE id = ?", (job_id,)).fetchone()
    owner = LeaseOwner.from_json(row["lease_owner"])
    assert row["state"] == "running" and row["lease_until"] > time.time() * 1000 + 200_000
    assert owner is not None and owner.kind == "server" and owner.pid == int(p.stdout)
    conn.close()

    s = make_service(data, embedder, job_workers=0)  # default 300 s lease
    try:
        assert job_row(s, job_id)["state"] == "queued"
        lease = s.writes.jobs.claim()
        assert lease is not None and lease.job_id == job_id and lease.attempt == 2
    finally:
        s.close()


def test_live_external_worker_keeps_its_lease_until_it_dies(tmp_path, embedder):
    from superchargedb.wiring import open_worker

    data = tmp_path / "d"
    s = make_service(data, embedder, job_workers=0)
    add_principal(s, "w", perms=["read", "write"], scopes=["acme"])
    ids = [enqueue(s, "doc1"), enqueue(s, "doc2")]
    code = f"""
        import sys
        from pathlib import Path
        import superchargedb
        from superchargedb.storage.sqlite.catalog import Catalog
        from superchargedb.storage.sqlite.jobs import JobQueue
        job = JobQueue(Catalog(Path({str(data / "catalog.db")!r}))).claim()
        print(job.id, flush=True)
        sys.stdin.read()  # hold the lease until killed
        """
    w = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert w.stdout is not None
        held = w.stdout.readline().strip()
        assert held == ids[0]
        token = job_row(s, held)["lease_token"]
        s.close()
        s = make_service(data, embedder, job_workers=0)  # a server restart
        row = job_row(s, held)
        assert row["state"] == "running" and row["lease_token"] == token
        other = s.writes.jobs.claim()
        assert other is not None and other.job_id == ids[1]  # not the live worker's job
        assert s.writes.jobs.claim() is None
        # Another external worker starting up does not take it either.
        open_worker(s.settings, embedder=embedder).close()
        assert job_row(s, held)["lease_token"] == token
    finally:
        w.kill()
        w.wait()
    # Now it is dead: a worker starting on this machine proves it and releases the lease.
    open_worker(s.settings, embedder=embedder).close()
    try:
        row = job_row(s, held)
        assert row["state"] == "queued" and row["lease_token"] is None
        # The job leased by this (live) server instance is left alone.
        assert job_row(s, ids[1])["state"] == "running"
    finally:
        s.close()


def test_holder_dead_on_its_last_attempt_fails_and_releases_the_quota(tmp_path, embedder):
    data = tmp_path / "d"
    s = make_service(data, embedder, job_workers=0, job_max_attempts=1)
    add_principal(s, "w", perms=["read", "write"], scopes=["acme"])
    job_id = enqueue(s, "doc1")
    # An earlier server instance (another owner id) leased it, then "died": we restart below.
    assert JobQueue(embedded(s).catalog, owner_kind="server").claim() is not None
    s.close()
    s = make_service(data, embedder, job_workers=0, job_max_attempts=1)
    try:
        row = job_row(s, job_id)
        assert row["state"] == "failed" and "died" in row["error"]
        left = (
            embedded(s).catalog.reader().execute("SELECT COUNT(*) FROM docs WHERE doc_id = 'doc1'")
        )
        assert left.fetchone()[0] == 0
    finally:
        s.close()


def test_lease_owner_death_is_proven_never_guessed():
    me = LeaseOwner.current("server")
    assert me.start and me.start == proc_start(os.getpid())

    def other(**kw: Any) -> LeaseOwner:
        d = {**json.loads(me.to_json()), "id": "other", "kind": "worker", **kw}
        return LeaseOwner(**d)

    alive = other()  # same process identity: a live worker thread elsewhere in this pid
    assert not alive.is_dead(me, own_data_dir=True)
    assert other(start=str(int(me.start) + 1)).is_dead(me, own_data_dir=False)  # pid reused
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    assert other(pid=child.pid, start="1").is_dead(me, own_data_dir=False)  # no such process
    assert other(boot="another-boot").is_dead(me, own_data_dir=False)  # before a reboot
    assert not other(pidns="pid:[1]", start="1").is_dead(me, own_data_dir=False)  # other container
    assert not other(boot="", start="1").is_dead(me, own_data_dir=False)  # nothing to prove with
    server = other(kind="server")  # alive, but we hold the data-dir lock: a server here is dead
    assert server.is_dead(me, own_data_dir=True) and not server.is_dead(me, own_data_dir=False)
    again = LeaseOwner.from_json(me.to_json())
    assert again == me and not again.is_dead(me, own_data_dir=True)
    assert LeaseOwner.from_json("not json") is None and LeaseOwner.from_json(None) is None


# -- audit anchor -------------------------------------------------------------------------------


def _chain(tmp_path: Path, n: int) -> tuple[Catalog, bytes]:
    cat = Catalog(tmp_path / "catalog.db")
    key = bytes.fromhex("22" * 32)
    with cat.write() as conn:
        for i in range(n):
            audit.append(conn, key, "t", "test", {"i": i})
    return cat, key


def test_anchor_is_written_whole_fsynced_and_leaves_no_tmp(tmp_path, monkeypatch):
    import stat

    cat, key = _chain(tmp_path, 3)
    path = tmp_path / "anchors" / "a.json"
    synced: list[tuple[bool, int]] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        st = os.fstat(fd)
        synced.append((stat.S_ISDIR(st.st_mode), st.st_ino))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    body = audit.write_anchor(cat.reader(), key, path)
    assert body is not None and json.loads(path.read_text()) == body and body["seq"] == 3
    assert audit.check_anchor(cat.reader(), key, path) is None
    assert not path.with_suffix(".tmp").exists()
    assert (False, path.stat().st_ino) in synced  # the file's bytes (same inode after rename)
    assert (True, path.parent.stat().st_ino) in synced  # and the rename
    # A failure before the rename keeps the previous anchor whole and removes the tmp file.
    with cat.write() as conn:
        audit.append(conn, key, "t", "test", {"i": 3})

    def no_replace(*_: Any) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", no_replace)
    with pytest.raises(OSError):
        audit.write_anchor(cat.reader(), key, path)
    assert json.loads(path.read_text()) == body
    assert not path.with_suffix(".tmp").exists()
    cat.close()


def test_anchor_crash_before_rename_keeps_the_old_anchor(tmp_path):
    cat, key = _chain(tmp_path, 2)
    path = tmp_path / "anchor.json"
    first = audit.write_anchor(cat.reader(), key, path)
    with cat.write() as conn:
        audit.append(conn, key, "t", "test", {"i": 2})
    crash(
        f"""
        from pathlib import Path
        from superchargedb.storage.sqlite import audit
        from superchargedb.storage.sqlite.catalog import Catalog
        cat = Catalog(Path({str(tmp_path / "catalog.db")!r}))
        audit.write_anchor(cat.reader(), bytes.fromhex("22" * 32), Path({str(path)!r}))
        """,
        "audit.anchor.before_replace",
    )
    assert json.loads(path.read_text()) == first  # the old anchor, whole
    assert json.loads(path.with_suffix(".tmp").read_text())["seq"] == 3  # fsynced, not renamed
    second = audit.write_anchor(cat.reader(), key, path)
    assert second is not None and second["seq"] == 3 and json.loads(path.read_text()) == second
    assert not path.with_suffix(".tmp").exists()
    cat.close()


def test_expired_lease_on_the_last_attempt_fails_instead_of_running_again(tmp_path, embedder):
    s = make_service(tmp_path / "d", embedder, job_workers=0, job_max_attempts=2)
    add_principal(s, "w", perms=["read", "write"], scopes=["acme"])
    job_id = enqueue(s, "doc1")
    q = JobQueue(embedded(s).catalog, lease_s=0.05, max_attempts=2)
    try:
        for attempt in (1, 2):  # a live holder that never finishes: each lease just expires
            job = q.claim()
            assert job is not None and job.id == job_id and job.attempts == attempt
            time.sleep(0.1)
        assert q.claim() is None  # not a third run
        row = job_row(s, job_id)
        assert row["state"] == "failed" and "last attempt" in row["error"]
        left = (
            embedded(s).catalog.reader().execute("SELECT COUNT(*) FROM docs WHERE doc_id = 'doc1'")
        )
        assert left.fetchone()[0] == 0  # its quota reservation is released
    finally:
        s.close()
