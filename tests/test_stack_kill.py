"""``kill -9`` on the server stack under load: an API process and a media worker die mid-work
while clients ingest and search, and nothing acknowledged is lost or duplicated.

Real processes on PostgreSQL: ``serve --workers 2 --demo`` (the demo queues its keynote video
and runbook PDF as derivation jobs; the API processes run none, ``SCDB_JOB_WORKERS=0``) and an
external ``superchargedb worker``. Two writers ingest one Unit per request and keep the ids the
server acknowledged; a reader searches throughout. The worker dies by SIGKILL in the middle of a
job (its lease runs out and the next worker takes the job over), then one API process is killed
with ``kill -9`` (its parent replaces it). Afterwards, read from the database itself: every
acknowledged Unit is there exactly once, an unacknowledged attempt at most once, every job is
done with exactly the Units stored for its document, and the audit chain verifies.
"""

from __future__ import annotations

import http.client
import json
import os
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest

import pg_stack
from test_stack_serve import (
    ALICE,
    CLI,
    _children,
    _env,
    _free_port,
    _replaced,
    _wait_log,
    _wait_ready,
)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not Path("/proc").exists(), reason="reads /proc (Linux)"),
]


def _request(port: int, method: str, path: str, body: object = None) -> tuple[int, Any]:
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        c.request(method, path, body=None if body is None else json.dumps(body), headers=ALICE)
        r = c.getresponse()
        data = r.read()
        return r.status, json.loads(data) if data else None
    finally:
        c.close()


class Load:
    """Writers that record what the server acknowledged, and a reader."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.stop = threading.Event()
        self.acked: dict[str, str] = {}  # text -> unit id
        self.attempted: set[str] = set()
        self.failed_requests = 0
        self.searches = 0
        self.lock = threading.Lock()

    def writer(self, w: int) -> None:
        i = 0
        while not self.stop.is_set():
            text = f"Kill test note {w}-{i}: the tide tables for pier {w * 1000 + i} changed."
            i += 1
            unit = {"text": text, "scope": "acme/alpha/backend", "doc_id": f"kill-{w}-{i}"}
            with self.lock:
                self.attempted.add(text)
            try:
                status, body = _request(self.port, "POST", "/v1/ingest", {"units": [unit]})
            except (OSError, http.client.HTTPException):
                status, body = 0, None  # the process died under the request: not acknowledged
            if status == 200 and body["results"][0].get("ok"):
                with self.lock:
                    self.acked[text] = body["results"][0]["unit_id"]
            else:
                with self.lock:
                    self.failed_requests += 1
                time.sleep(0.1)

    def reader(self) -> None:
        while not self.stop.is_set():
            try:
                status, _ = _request(self.port, "POST", "/v1/search", {"q": "tide tables pier"})
                if status == 200:
                    self.searches += 1
            except (OSError, http.client.HTTPException):
                time.sleep(0.1)


def _jobs(port: int) -> list[dict[str, Any]]:
    status, body = _request(port, "GET", "/v1/jobs?limit=100")
    assert status == 200, body
    jobs: list[dict[str, Any]] = body["jobs"]
    return jobs


def settled_jobs(port: int, timeout_s: float = 900) -> list[dict[str, Any]]:
    """The jobs once none is queued or running any more."""
    deadline = time.monotonic() + timeout_s
    jobs = _jobs(port)
    while any(j["state"] in ("queued", "running") for j in jobs):
        assert time.monotonic() < deadline, jobs
        time.sleep(1.0)
        jobs = _jobs(port)
    return jobs


def stored(url: str) -> tuple[dict[str, list[str]], dict[str, set[str]]]:
    """From the database itself: the writers' Unit ids by text, and each media document's
    derived Unit ids."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        by_text: dict[str, list[str]] = {}
        for uid, text in conn.execute("SELECT unit_id, text FROM units WHERE doc_id LIKE 'kill-%'"):
            by_text.setdefault(str(text), []).append(str(uid))
        derived = {
            str(doc): {str(u) for u in ids}
            for doc, ids in conn.execute(
                "SELECT doc_id, array_agg(unit_id) FROM units WHERE object_key IS NOT NULL"
                " GROUP BY doc_id"
            )
        }
    return by_text, derived


def assert_nothing_lost(
    load: Load,
    jobs: list[dict[str, Any]],
    by_text: dict[str, list[str]],
    derived: dict[str, set[str]],
) -> None:
    """Every acknowledged Unit stored once, nothing stored that was not attempted, every job
    done with exactly the Units stored for its document (completed once in effect: a first
    attempt cut short left nothing beside the retry's)."""
    assert load.acked, "no write was acknowledged"
    lost = [t for t, uid in load.acked.items() if by_text.get(t) != [uid]]
    assert not lost, lost[:5]
    assert all(len(ids) == 1 for ids in by_text.values()), "a Unit stored twice"
    assert set(by_text) <= load.attempted
    assert all(j["state"] == "done" for j in jobs), jobs
    media = [j for j in jobs if j["kind"] == "derive"]
    assert len(media) == 2 and len(derived) == 2, (media, sorted(derived))
    for j in media:
        assert set(j["unit_ids"]) == derived[j["doc_id"]], j


def _start_worker(env: dict[str, str], data: Path, log: Path) -> subprocess.Popen[bytes]:
    out = open(log, "ab")  # noqa: SIM115  (the child keeps it)
    return subprocess.Popen([*CLI, "worker", "--data", str(data)], env=env, stdout=out, stderr=out)


def test_kill_9_of_an_api_process_and_a_worker_loses_and_duplicates_nothing(
    tmp_path: Path,
) -> None:
    url = pg_stack.database(tmp_path)
    port = _free_port()
    data = tmp_path / "data"
    env = _env(tmp_path, SCDB_DATABASE_URL=url, SCDB_JOB_WORKERS="0", SCDB_JOB_LEASE_S="6")
    log = tmp_path / "serve.log"
    out = open(log, "wb")  # noqa: SIM115
    argv = [*CLI, "serve", "--data", str(data), "--port", str(port), "--workers", "2", "--demo"]
    parent = subprocess.Popen(argv, env=env, stdout=out, stderr=out)
    workers: list[subprocess.Popen[bytes]] = []
    load = Load(port)
    threads = [threading.Thread(target=load.writer, args=(w,)) for w in range(2)]
    threads.append(threading.Thread(target=load.reader))
    try:
        _wait_ready(f"http://127.0.0.1:{port}", parent, 600)
        deadline = time.monotonic() + 300
        while len(kids := _children(parent.pid)) < 2 and time.monotonic() < deadline:
            time.sleep(0.5)
        assert len(kids) == 2, log.read_text()[-3000:]
        _wait_log(log, f"API process 1 (pid {kids[1]}) serving", 600)
        assert any(j["state"] == "queued" for j in _jobs(port)), "the demo queued no job"
        for t in threads:
            t.start()
        # The first worker SIGKILLs itself in the middle of its first job, after the job's Units
        # are derived and embedded and before the job completes (a fault point: an external
        # kill could land before the job starts or after it ends).
        crash = {**env, "SCDB_CRASH_AT": "jobs.after_embed"}
        workers.append(_start_worker(crash, data, tmp_path / "worker.log"))
        assert workers[0].wait(600) == -signal.SIGKILL, (tmp_path / "worker.log").read_text()
        running = [j["job_id"] for j in _jobs(port) if j["state"] == "running"]
        assert len(running) == 1, _jobs(port)  # the dead worker's job, its lease not yet out
        workers.append(_start_worker(env, data, tmp_path / "worker.log"))
        # An API process dies under the writers; its parent starts another.
        time.sleep(2.0)
        os.kill(kids[1], signal.SIGKILL)
        now = _replaced(parent.pid, kids[1], 300)
        _wait_log(log, f"API process 1 (pid {now[1]}) serving", 600)
        time.sleep(3.0)  # writes through the new process too
        load.stop.set()
        for t in threads:
            t.join(120)
        jobs = settled_jobs(port)
        status, audit = _request(port, "GET", "/v1/audit/verify")
    finally:
        load.stop.set()
        for w in workers:
            if w.poll() is None:
                w.send_signal(signal.SIGTERM)
                w.wait(60)
        if parent.poll() is None:
            parent.send_signal(signal.SIGTERM)
            try:
                parent.wait(90)
            except subprocess.TimeoutExpired:
                parent.kill()
        out.close()
    assert "exited with code -9" in log.read_text()
    assert load.acked and load.searches, (len(load.acked), load.searches)
    assert status == 200 and audit["ok"], audit
    assert_nothing_lost(load, jobs, *stored(url))
    killed = next(j for j in jobs if j["job_id"] == running[0])
    assert killed["attempts"] >= 2, killed  # the takeover really ran it again
