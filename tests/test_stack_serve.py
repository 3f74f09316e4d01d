"""The server stack end to end, real processes on real engines:

- ``serve --workers 2`` on PostgreSQL: two API processes (two pids) accept on one port, a Unit
  ingested through one is found by a search through the other, one killed is reported and
  replaced, and SIGTERM to the parent ends both;
- ``superchargedb stack up`` starts the engines, the API and a worker; the demo key answers over
  HTTP; a second ``up`` starts nothing; ``stack down`` leaves no process of it running.

Which process holds a connection is read from ``/proc`` (the accepted socket's inode in the
process's fds), so nothing in the API reveals its pid.
"""

from __future__ import annotations

import http.client
import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

import pg_stack

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="reads /proc (Linux)"),
]

ALICE = {"Authorization": "Bearer aegis_sk_alice", "Content-Type": "application/json"}
CLI = [sys.executable, "-m", "superchargedb.cli.main"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _env(tmp: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SCDB_")}
    env.update(
        XDG_CONFIG_HOME=str(tmp / "config"),  # the audit key file, per test
        SCDB_RATE_KEY_RPS="0",
        SCDB_RATE_IP_RPS="0",
        SCDB_EMBED_THREADS="1",
        # These sources, not whatever checkout the package is installed from.
        PYTHONPATH=str(Path(__file__).resolve().parent.parent / "src"),
    )
    env.update(extra)
    return env


def _wait_ready(url: str, proc: subprocess.Popen[bytes] | None, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"exited with {proc.returncode}")
        try:
            host, port = url.removeprefix("http://").split(":")
            c = http.client.HTTPConnection(host, int(port), timeout=2)
            c.request("GET", "/readyz")
            if c.getresponse().status == 200:
                return
        except OSError:
            pass
        time.sleep(0.2)
    raise AssertionError(f"{url} not ready after {timeout_s} s")


def _wait_log(log: Path, line: str, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while line not in log.read_text(errors="replace"):
        assert time.monotonic() < deadline, f"no {line!r} in {log}"
        time.sleep(0.3)


def _children(pid: int) -> list[int]:
    """The API processes under a ``serve --workers`` parent (not multiprocessing's tracker)."""
    out = []
    for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split():
        try:
            cmd = Path(f"/proc/{c}/cmdline").read_bytes()
        except (FileNotFoundError, ProcessLookupError):
            continue  # it exited (was reaped) between the listing and this read
        if b"resource_tracker" not in cmd:
            out.append(int(c))
    return out


def _owner(pids: list[int], server_port: int, client_port: int) -> int | None:
    """Which of ``pids`` holds the server side of the connection from ``client_port``."""
    inode = None
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        f = line.split()
        local, remote = int(f[1].split(":")[1], 16), int(f[2].split(":")[1], 16)
        if local == server_port and remote == client_port and f[3] == "01":  # ESTABLISHED
            inode = f[9]
    if inode is None:
        return None
    for pid in pids:
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            try:
                if os.readlink(fd) == f"socket:[{inode}]":
                    return pid
            except OSError:
                continue
    return None


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat.rsplit(")", 1)[1].split()[0] in ("Z", "X")


def _replaced(parent: int, dead: int, timeout_s: float) -> list[int]:
    """The parent's two API processes once ``dead`` (killed) has been replaced."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        now = _children(parent)
        if len(now) == 2 and dead not in now:
            return now
        time.sleep(0.5)
    raise AssertionError(f"the killed API process {dead} was not replaced")


def _call(conn: http.client.HTTPConnection, method: str, path: str, body: object = None) -> dict:
    conn.request(method, path, body=None if body is None else json.dumps(body), headers=ALICE)
    r = conn.getresponse()
    data = r.read()
    assert r.status == 200, (r.status, data[:300])
    out: dict = json.loads(data)
    return out


def test_two_api_processes_share_one_port_and_stop_with_the_parent(tmp_path: Path) -> None:
    url = pg_stack.database(tmp_path)
    port = _free_port()
    env = _env(tmp_path, SCDB_DATABASE_URL=url)
    log = open(tmp_path / "serve.log", "wb")  # noqa: SIM115
    argv = ["serve", "--data", str(tmp_path / "data"), "--port", str(port), "--workers", "2"]
    parent = subprocess.Popen([*CLI, *argv, "--demo"], env=env, stdout=log, stderr=log)
    try:
        _wait_ready(f"http://127.0.0.1:{port}", parent, 300)
        deadline = time.monotonic() + 120
        while len(kids := _children(parent.pid)) < 2 and time.monotonic() < deadline:
            time.sleep(0.5)  # the second starts once the first serves
        assert len(kids) == 2, (tmp_path / "serve.log").read_text()[-3000:]
        _wait_log(tmp_path / "serve.log", f"API process 1 (pid {kids[1]}) serving", 300)
        # Connections in turn until each process holds one: the kernel picks the acceptor.
        held: dict[int, http.client.HTTPConnection] = {}
        for _ in range(200):
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            c.request("GET", "/healthz")
            assert c.getresponse().read() == b'{"status":"ok"}'
            owner = _owner(kids, port, c.sock.getsockname()[1])
            assert owner in kids
            if owner in held:
                c.close()
            else:
                held[owner] = c
            if len(held) == 2:
                break
        assert set(held) == set(kids), "one process accepted every connection"
        a, b = (held[k] for k in kids)
        # A write through one process is found by the next search through the other.
        unit = {
            "text": "The zeppelin maintenance window moves to the second Tuesday of March.",
            "scope": "acme/alpha/backend",
            "doc_id": "doc-zeppelin",
            "acl_groups": ["eng-backend"],
        }
        got = _call(a, "POST", "/v1/ingest", {"units": [unit]})
        uid = got["results"][0]["unit_id"]
        hits = _call(b, "POST", "/v1/search", {"q": "zeppelin maintenance window"})["hits"]
        assert uid in [h["unit_id"] for h in hits]
        assert _call(b, "GET", f"/v1/units/{uid}")["text"] == unit["text"]
        for c in held.values():
            c.close()
        # A process that dies is reported and replaced; the port keeps answering meanwhile.
        os.kill(kids[1], signal.SIGKILL)
        now = _replaced(parent.pid, kids[1], 120)
        assert kids[0] in now, "the other process was restarted too"
        text = (tmp_path / "serve.log").read_text()
        assert f"API process 1 (pid {kids[1]}) exited with code -9" in text
        kids = now
        _wait_log(tmp_path / "serve.log", f"API process 1 (pid {kids[1]}) serving", 300)
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        assert _call(c, "GET", f"/v1/units/{uid}")["text"] == unit["text"]
        c.close()
        parent.send_signal(signal.SIGTERM)
        assert parent.wait(90) == 0
        deadline = time.monotonic() + 30
        while not all(_gone(k) for k in kids) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert all(_gone(k) for k in kids)
        text = (tmp_path / "serve.log").read_text()
        assert "2 API processes" in text and text.count("exited with code") == 1
    finally:
        if parent.poll() is None:
            parent.kill()  # its API processes get SIGTERM from the kernel (PR_SET_PDEATHSIG)
            parent.wait(10)
        log.close()


def test_the_embedded_store_refuses_more_than_one_process(tmp_path: Path) -> None:
    out = subprocess.run(
        [
            *CLI,
            "serve",
            "--data",
            str(tmp_path / "d"),
            "--port",
            str(_free_port()),
            "--workers",
            "2",
        ],
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 2
    assert "the embedded store is owned by one process: --workers must be 1" in out.stderr


def _pids_naming(data: Path) -> list[int]:
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if str(data) in cmd and not _gone(int(d.name)):
            out.append(int(d.name))
    return out


def test_stack_up_serves_the_demo_and_down_leaves_nothing_running(tmp_path: Path) -> None:
    if (why := pg_stack.available()) is not None:
        pytest.skip(why)
    # Not under pytest's 0700 tmp dirs: PostgreSQL runs as its own user under root.
    data = Path(tempfile.mkdtemp(prefix="scdb-stack-"))
    data.chmod(0o755)
    port = _free_port()
    env = _env(tmp_path)
    stack = [*CLI, "stack"]
    try:
        up = subprocess.run(
            [*stack, "up", "--data", str(data), "--port", str(port), "--workers", "2"],
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert up.returncode == 0, up.stdout + up.stderr
        assert f"API: http://127.0.0.1:{port}" in up.stdout
        state = json.loads((data / "stack" / "state.json").read_text())
        pids = {name: p["pid"] for name, p in state["processes"].items()}
        assert set(pids) == {"postgres", "seaweedfs", "valkey", "api", "worker"}
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        me = _call(c, "GET", "/v1/me")
        assert me["name"] == "alice"
        hits = _call(c, "POST", "/v1/search", {"q": "renewals"})["hits"]
        assert hits, "the demo corpus is searchable"
        c.close()
        deadline = time.monotonic() + 120
        while len(kids := _children(pids["api"])) < 2 and time.monotonic() < deadline:
            time.sleep(0.5)
        assert len(kids) == 2
        status = subprocess.run(
            [*stack, "status", "--data", str(data)], env=env, capture_output=True, text=True
        )
        assert status.returncode == 0 and "NOT running" not in status.stdout, status.stdout
        exports = subprocess.run(
            [*stack, "status", "--data", str(data), "--env"],
            env=env,
            capture_output=True,
            text=True,
        ).stdout.splitlines()
        parsed = dict(
            shlex.split(line.removeprefix("export "))[0].split("=", 1) for line in exports
        )
        assert parsed == state["env"] and parsed["SCDB_RESULT_CACHE"] == "redis"
        again = subprocess.run(
            [*stack, "up", "--data", str(data), "--port", str(port)],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert again.returncode == 0 and "already running" in again.stdout
        assert json.loads((data / "stack" / "state.json").read_text()) == state
        down = subprocess.run(
            [*stack, "down", "--data", str(data)],
            env=env,
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert down.returncode == 0, down.stdout + down.stderr
        assert not (data / "stack" / "state.json").exists()
        for pid in [*pids.values(), *kids]:
            assert _gone(pid), pid
        assert _pids_naming(data) == []
        with socket.socket() as s:
            assert s.connect_ex(("127.0.0.1", port)) != 0, "the API port still answers"
    finally:
        if (data / "stack" / "state.json").exists():
            subprocess.run([*stack, "down", "--data", str(data)], env=env, timeout=180)
        subprocess.run(["rm", "-rf", str(data)], check=False)
