"""SIGKILL at named fault points during ingest and delete; restart; nothing acknowledged is lost.

Each case copies a seeded data dir, starts a real server process with ``SCDB_CRASH_AT`` naming a
fault point, drives ingest + delete until the process dies, restarts it cleanly and checks:
every acknowledged Unit is readable and found by BOTH legs, acknowledged deletes stay deleted, the
batch in flight is all-or-nothing, and (offline) the catalog and index hold the same ids, SQLite
and FTS5 are consistent and the audit chain verifies.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from conftest import ALICE, free_port
from superchargedb.service import Service
from superchargedb.settings import Settings
from superchargedb.storage import audit

pytestmark = pytest.mark.slow

POINTS = [
    "catalog.before_commit:3",  # inside the batch transaction: nothing of it may survive
    "catalog.after_commit:3",  # after the catalog commit, before the vector apply
    "sync.before_apply:3",
    "vectors.apply.before_add:5",
    "vectors.apply.after_add:5",
    "vectors.apply.before_remove:1",
    "sync.after_apply:3",  # after the apply, before any checkpoint
    "vectors.checkpoint.before_save:1",
    "vectors.checkpoint.mid_save:1",  # in the middle of an index save
    "vectors.checkpoint.after_fsync:1",
    "vectors.checkpoint.after_rename:1",
    "vectors.checkpoint.before_cleanup:1",
    "sync.after_checkpoint:1",
]
TOPICS = [
    "harbor lighthouse",
    "desert caravan",
    "glacier survey",
    "orchard harvest",
    "subway timetable",
    "violin workshop",
    "volcano sensors",
    "library archive",
]


def text_for(i: int, j: int) -> str:
    return f"Crash record k{i}x{j} describes the {TOPICS[(i + j) % len(TOPICS)]} in detail."


def start(data: Path, port: int, crash_at: str | None) -> subprocess.Popen:
    env = {**os.environ, "SCDB_CHECKPOINT_EVERY": "4"}
    env.pop("SCDB_CRASH_AT", None)
    if crash_at:
        env["SCDB_CRASH_AT"] = crash_at
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "superchargedb.cli.main",
            "serve",
            "--data",
            str(data),
            "--port",
            str(port),
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def wait_ready(proc: subprocess.Popen, url: str, timeout: float = 60) -> bool:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            return False
        try:
            if httpx.get(url + "/readyz", timeout=1).status_code == 200:
                return True
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise TimeoutError("server not ready")


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="module")
def seeded(tmp_path_factory) -> Path:
    data = tmp_path_factory.mktemp("seed") / "data"
    port = free_port()
    env = dict(os.environ)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "superchargedb.cli.main",
            "serve",
            "--data",
            str(data),
            "--port",
            str(port),
            "--demo",
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    assert wait_ready(proc, f"http://127.0.0.1:{port}")
    stop(proc)
    return data


@pytest.mark.parametrize("point", POINTS)
def test_kill_at_fault_point(seeded, tmp_path, point):
    data = tmp_path / "data"
    shutil.copytree(seeded, data)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc = start(data, port, point)
    acked: dict[str, str] = {}  # unit_id -> text
    deleted: set[str] = set()
    in_flight: list[str] = []
    delete_in_flight: str | None = None  # unacknowledged delete: either outcome is allowed
    died = not wait_ready(proc, url)
    client = httpx.Client(base_url=url, headers=ALICE, timeout=30)
    i = 0
    while not died and i < 40:
        batch = [text_for(i, j) for j in range(3)]
        in_flight = batch
        try:
            r = client.post(
                "/v1/ingest",
                json={
                    "units": [{"text": t, "doc_id": f"crash-{i}-{j}"} for j, t in enumerate(batch)]
                },
            )
            assert r.status_code == 200, r.text
            for res, t in zip(r.json()["results"], batch, strict=True):
                acked[res["unit_id"]] = t
            in_flight = []
            if i % 2 == 1:
                victim = sorted(set(acked) - deleted)[0]
                delete_in_flight = victim
                r = client.delete(f"/v1/units/{victim}")
                assert r.status_code == 200
                deleted.add(victim)
                delete_in_flight = None
        except httpx.TransportError:
            died = True
        i += 1
    client.close()
    proc.wait(timeout=30)
    assert died and proc.returncode == -signal.SIGKILL, f"{point} was never reached"

    proc = start(data, port, None)
    try:
        assert wait_ready(proc, url), proc.stderr.read().decode()[-2000:] if proc.stderr else ""
        c = httpx.Client(base_url=url, headers=ALICE, timeout=30)
        for uid, text in acked.items():
            r = c.get(f"/v1/units/{uid}")
            if uid == delete_in_flight and r.status_code == 404:
                lex = c.post("/v1/search", json={"q": text.split()[2], "mode": "lexical"})
                assert uid not in [h["unit_id"] for h in lex.json()["hits"]]
                continue
            if uid in deleted:
                assert r.status_code == 404, (point, uid)
                continue
            assert r.status_code == 200, (point, uid)
            token = text.split()[2]  # e.g. k7x2
            lex = c.post("/v1/search", json={"q": token, "mode": "lexical"}).json()["hits"]
            assert uid in [h["unit_id"] for h in lex], (point, "lexical", token)
            dense = c.post("/v1/search", json={"q": text, "mode": "dense", "top_k": 5}).json()
            assert dense["hits"][0]["unit_id"] == uid, (point, "dense", text)
        # The batch in flight at the crash is all-or-nothing.
        if in_flight:
            found = 0
            for t in in_flight:
                token = t.split()[2]
                hits = c.post("/v1/search", json={"q": token, "mode": "lexical"}).json()["hits"]
                found += any(h["text"] == t for h in hits)
            assert found in (0, len(in_flight)), (point, found)
        c.close()
    finally:
        stop(proc)
    svc = Service(Settings(data_dir=data))
    try:
        report = svc.doctor()
        assert report["ok"], (point, report)
        chain = audit.verify(svc.catalog.reader(), svc.audit_key)
        assert chain["ok"], (point, chain)
    finally:
        svc.close()
