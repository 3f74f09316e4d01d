"""``superchargedb stack up/down/status``: the whole server stack on one machine, from wheels.

``up`` starts PostgreSQL + pgvector, SeaweedFS (one bucket) and Valkey on loopback ports under
``<data>/stack/``, then ``serve --workers N`` and one ``worker`` as detached processes whose
settings point at those engines, and waits for the API's ``/readyz``. Everything it started is
written to ``<data>/stack/state.json`` (pids with their start times, ports, URLs, the settings
given to the API; mode 0600: it holds the engines' passwords) as soon as it runs, so ``down``
can stop a stack whose start failed half way. ``down`` stops the API and the worker first (by
SIGTERM, so they drain and close), then the engines: Valkey by SIGTERM, SeaweedFS by SIGKILL
after a short grace (it ignores SIGTERM), PostgreSQL by its fast shutdown (SIGINT).

PostgreSQL's data (``stack/postgres/``) and SeaweedFS's (``stack/seaweedfs/``) survive a
``down``/``up``; Valkey keeps nothing (D-191). Each ``up`` picks fresh engine ports and a fresh
S3 access key.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import sys
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from . import postgres
from . import standby as standby_mod
from .procs import ProcRef, alive, spawn_detached, stop
from .seaweedfs import SeaweedFS
from .valkey import Valkey

DATABASE = "scdb"
BUCKET = "scdb"
READY_TIMEOUT_S = 600.0  # model loads and the demo corpus on a small machine
API_STOP_S = 60.0  # above serve --workers' own grace for its API processes (40 s)
# Stop order: what uses the engines first, then the engines; how each is asked to stop.
_STOPS: tuple[tuple[str, int, float], ...] = (
    ("api", signal.SIGTERM, API_STOP_S),
    ("worker", signal.SIGTERM, API_STOP_S),
    ("standby", signal.SIGINT, 30.0),  # before its primary, which would wait for it
    ("postgres-c2", signal.SIGINT, 30.0),  # the second cluster (--clusters)
    ("valkey", signal.SIGTERM, 5.0),
    ("seaweedfs", signal.SIGTERM, 2.0),  # ignored for many seconds: killed after the grace
    ("postgres", signal.SIGINT, 30.0),  # fast shutdown: roll back, checkpoint, exit
)


class StackError(RuntimeError):
    """The stack could not be started (the message says why and where the log is)."""


@dataclass
class StackState:
    data: str
    url: str
    workers: int
    started_at: str
    processes: dict[str, ProcRef] = field(default_factory=dict)
    logs: dict[str, str] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)  # the SCDB_ settings given to API/worker
    # PostgreSQL's nodes by role ("primary", "standby"): their dir under stack/ and port.
    nodes: dict[str, dict[str, Any]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "version": 1,
            "data": self.data,
            "url": self.url,
            "workers": self.workers,
            "started_at": self.started_at,
            "processes": {k: v.to_json() for k, v in self.processes.items()},
            "logs": self.logs,
            "env": self.env,
            "nodes": self.nodes,
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> StackState:
        procs = {k: ProcRef.from_json(v) for k, v in d.get("processes", {}).items()}
        return cls(
            d["data"],
            d["url"],
            int(d["workers"]),
            d["started_at"],
            procs,
            d["logs"],
            d["env"],
            d.get("nodes", {}),
        )

    def running(self) -> dict[str, bool]:
        return {name: alive(ref) for name, ref in self.processes.items()}


def stack_dir(data: Path) -> Path:
    return Path(data) / "stack"


def state_path(data: Path) -> Path:
    return stack_dir(data) / "state.json"


def read_state(data: Path) -> StackState | None:
    path = state_path(data)
    if not path.exists():
        return None
    try:
        return StackState.from_json(json.loads(path.read_text()))
    except (ValueError, KeyError, TypeError) as exc:
        raise StackError(f"unreadable stack state {path}: {exc}; remove it by hand") from exc


def _write_state(state: StackState) -> None:
    path = state_path(Path(state.data))
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(state.to_json(), f, indent=2)
    os.replace(tmp, path)


def _port_free(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def _ensure_database(server: postgres.PostgresServer, name: str) -> str:
    import psycopg

    with psycopg.connect(server.url(), autocommit=True) as conn:
        if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone() is None:
            conn.execute(f'CREATE DATABASE "{name}"'.encode())
    return server.url(name)


def _tail(path: str | Path, n: int = 30) -> str:
    try:
        lines = Path(path).read_text(errors="replace").splitlines()
    except OSError:
        return ""
    return "\n".join(lines[-n:])


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/readyz", timeout=5) as r:  # noqa: S310  (our own URL)
            return bool(r.status == 200)
    except OSError:
        return False


def _cli(*args: str) -> list[str]:
    """The ``superchargedb`` command line run by this very interpreter (its environment)."""
    return [sys.executable, "-m", "superchargedb.cli.main", *args]


def up(
    data: Path,
    *,
    port: int = 8080,
    workers: int = 2,
    demo: bool = True,
    standby: bool = False,
    clusters: bool = False,
    ready_timeout_s: float = READY_TIMEOUT_S,
    echo: Callable[[str], None] = print,
) -> tuple[StackState, bool]:
    """Start the stack (see the module doc); returns its state and whether it was started now
    (False: a stack was already running for ``data``, left as it is)."""
    data = Path(data).resolve()
    old = read_state(data)
    if old is not None:
        if all(old.running().values()):
            return old, False
        echo("a previous stack is partly down: stopping what is left of it first")
        down(data, echo=echo)
    if not _port_free("127.0.0.1", port):
        raise StackError(f"port {port} on 127.0.0.1 is in use: pick another with --port")
    root = stack_dir(data)
    logs = root / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    url = f"http://127.0.0.1:{port}"
    state = StackState(str(data), url, workers, datetime.now(UTC).isoformat(timespec="seconds"))
    try:
        start_engines(state, echo, standby=standby, clusters=clusters)
        _start_processes(data, port, workers, demo, state, logs)
        _write_state(state)
        _wait_ready(state, ready_timeout_s)
    except BaseException:
        if state.processes:
            _write_state(state)
            down(data, echo=lambda _m: None)
        raise
    return state, True


def start_engines(
    state: StackState,
    echo: Callable[[str], None] = print,
    *,
    standby: bool = False,
    clusters: bool = False,
) -> None:
    """PostgreSQL (with the database; with ``standby``, a synchronous hot standby too),
    SeaweedFS (with the bucket) and Valkey under the state's data dir; each is in
    ``state.processes`` as soon as it runs, and the settings the API needs are in
    ``state.env``; the state file is written at the end. With ``clusters``, tenants are spread
    over two clusters (D-277): the directory and cluster c1 are databases of the first
    PostgreSQL, cluster c2 a second PostgreSQL server."""
    if standby and clusters:
        raise StackError("--standby with --clusters is not built (a standby per cluster is)")
    root = stack_dir(Path(state.data))
    root.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    primary_dir, standby_dir = standby_mod.roles(root)
    pg = postgres.start(root / primary_dir, durable=True)
    state.processes["postgres"] = ProcRef.of(pg.process.pid)
    state.logs["postgres"] = str(pg.log_path)
    state.nodes["primary"] = {"dir": primary_dir, "port": pg.port}
    db_url = _ensure_database(pg, DATABASE)
    echo(f"PostgreSQL + pgvector on 127.0.0.1:{pg.port} ({time.monotonic() - t0:.1f} s)")
    db_env = {"SCDB_DATABASE_URL": db_url}
    if standby:
        t0 = time.monotonic()
        # Copied afresh from the primary each time: an old standby (or a fenced old primary)
        # may hold history the primary does not.
        shutil.rmtree(root / standby_dir, ignore_errors=True)
        sb = standby_mod.add_standby(pg, root / standby_dir, synchronous=True)
        state.processes["standby"] = ProcRef.of(sb.process.pid)
        state.logs["standby"] = str(sb.log_path)
        state.nodes["standby"] = {"dir": standby_dir, "port": sb.port}
        db_env = {
            "SCDB_DATABASE_URL": standby_mod.writable_url(
                pg.password, [pg.port, sb.port], DATABASE
            ),
            "SCDB_DATABASE_REPLICA_URLS": sb.url(DATABASE),
        }
        echo(f"synchronous standby on 127.0.0.1:{sb.port} ({time.monotonic() - t0:.1f} s)")
    if clusters:
        t0 = time.monotonic()
        pg2 = postgres.start(root / "postgres-c2", durable=True)
        state.processes["postgres-c2"] = ProcRef.of(pg2.process.pid)
        state.logs["postgres-c2"] = str(pg2.log_path)
        state.nodes["cluster-c2"] = {"dir": "postgres-c2", "port": pg2.port}
        c1 = _ensure_database(pg, f"{DATABASE}_c1")
        c2 = _ensure_database(pg2, DATABASE)
        db_env["SCDB_CLUSTER_URLS"] = f"c1={c1},c2={c2}"
        echo(f"second cluster on 127.0.0.1:{pg2.port} ({time.monotonic() - t0:.1f} s)")
    t0 = time.monotonic()
    weed = SeaweedFS(root / "seaweedfs", bucket=BUCKET)
    try:
        s3 = weed.start()
    finally:
        if weed.proc is not None:
            state.processes["seaweedfs"] = ProcRef.of(weed.proc.pid)
        state.logs["seaweedfs"] = str(root / "seaweedfs" / "weed.log")
    echo(f"SeaweedFS S3 on {s3.url}, bucket {s3.bucket} ({time.monotonic() - t0:.1f} s)")
    vk = Valkey(root / "valkey")
    try:
        kv = vk.start()
    finally:
        if vk.proc is not None:
            state.processes["valkey"] = ProcRef.of(vk.proc.pid)
        state.logs["valkey"] = str(root / "valkey" / "valkey.log")
    echo(f"Valkey on 127.0.0.1:{kv.port}")
    state.env = {
        **db_env,
        "SCDB_S3_ENDPOINT_URL": s3.url,
        "SCDB_S3_BUCKET": s3.bucket,
        "SCDB_S3_ACCESS_KEY": s3.access_key,
        "SCDB_S3_SECRET_KEY": s3.secret_key,
        "SCDB_S3_REGION": s3.region,
        "SCDB_REDIS_URL": kv.url,
        "SCDB_RESULT_CACHE": "redis",
    }
    _write_state(state)


def _start_processes(
    data: Path, port: int, workers: int, demo: bool, state: StackState, logs: Path
) -> None:
    env = {**os.environ, **state.env}
    # The caller's directory: relative paths in its settings (or PYTHONPATH) mean the same there.
    cwd = Path.cwd()
    serve = ["serve", "--data", str(data), "--port", str(port), "--workers", str(workers)]
    state.logs["api"] = str(logs / "api.log")
    # Derivation jobs are the worker's: the API processes keep their cores for requests (a
    # caller's own SCDB_JOB_WORKERS wins).
    api_env = {"SCDB_JOB_WORKERS": "0", **env}
    state.processes["api"] = spawn_detached(
        _cli(*serve, *(["--demo"] if demo else [])), api_env, logs / "api.log", cwd
    )
    state.logs["worker"] = str(logs / "worker.log")
    state.processes["worker"] = spawn_detached(
        _cli("worker", "--data", str(data)), env, logs / "worker.log", cwd
    )


def _wait_ready(state: StackState, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not _ready(state.url):
        for name in ("api", "worker"):
            if not alive(state.processes[name]):
                raise StackError(
                    f"the {name} process exited during start; its log ({state.logs[name]}) "
                    f"ends:\n{_tail(state.logs[name])}"
                )
        if time.monotonic() > deadline:
            raise StackError(
                f"the API did not answer {state.url}/readyz within {timeout_s:.0f} s; "
                f"see {state.logs['api']}"
            )
        time.sleep(0.5)


def down(data: Path, *, echo: Callable[[str], None] = print) -> StackState | None:
    """Stop everything the state file names, in order, and remove the file. None: no stack."""
    data = Path(data).resolve()
    state = read_state(data)
    if state is None:
        return None
    for name, sig, timeout_s in _STOPS:
        ref = state.processes.get(name)
        if ref is not None:
            echo(f"{name} (pid {ref.pid}): {stop(ref, sig, timeout_s)}")
    state_path(data).unlink(missing_ok=True)
    return state
