"""A streaming hot standby of a local PostgreSQL, its promotion and the old primary's fencing
(D-270, D-272).

``add_standby`` copies a running primary with ``pg_basebackup -R -X stream`` (the copy holds
``standby.signal`` and a ``primary_conninfo`` naming the standby by ``application_name``), then
starts it as ``postgres.start`` starts any server; with ``synchronous=True`` the primary is told
to wait for it (``synchronous_standby_names``), so an acknowledged commit is on both nodes.

``promote`` makes a standby the primary (``pg_promote``) and clears its own
``synchronous_standby_names``: it has no standby to wait for, and a commit that waits for a
missing standby never returns. ``fence`` is what keeps an old primary from taking writes once
it is replaced: its postmaster is killed if it still runs, and its data dir gets a
``standby.signal`` with a ``primary_conninfo`` naming the new primary. Restarted, it comes up in
recovery (read only): it follows the new primary when its history allows, and otherwise stays
a read-only node that an operator rewinds (``pg_rewind``) or rebuilds. It never comes up
writable, which is what split brain would need.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path
from urllib.parse import quote

from . import postgres
from .ports import wait_until

SYNC_TIMEOUT_S = 30.0
NODES = ("postgres", "standby")  # the two node dirs under a stack's dir
PRIMARY_FILE = "primary"  # names the node dir that is the primary (after a failover)


def roles(root: Path) -> tuple[str, str]:
    """The stack's (primary, standby) node dirs under ``root``: ``postgres`` is the primary
    until a failover promotes the other and records it in ``root/primary``."""
    try:
        primary = (Path(root) / PRIMARY_FILE).read_text().strip()
    except OSError:
        primary = NODES[0]
    if primary not in NODES:
        primary = NODES[0]
    return primary, NODES[1 - NODES.index(primary)]


def node_url(port: int, password: str, database: str = "postgres") -> str:
    """The superuser's URL of the node on ``port`` of the loopback."""
    pw = quote(password, safe="")
    return f"postgresql://{postgres.PG_USER}:{pw}@127.0.0.1:{port}/{quote(database, safe='')}"


def writable_url(password: str, ports: list[int], database: str = "scdb") -> str:
    """One URL naming every node: libpq tries them in turn and keeps the one that takes
    writes (``target_session_attrs=read-write``), so clients follow a promotion by
    reconnecting."""
    hosts = ",".join(f"127.0.0.1:{p}" for p in ports)
    pw = quote(password, safe="")
    return (
        f"postgresql://{postgres.PG_USER}:{pw}@{hosts}/{database}"
        "?target_session_attrs=read-write&connect_timeout=3"
    )


def add_standby(
    primary: postgres.PostgresServer,
    data_dir: Path,
    *,
    name: str = "standby1",
    durable: bool = True,
    synchronous: bool = False,
) -> postgres.PostgresServer:
    """A hot standby of ``primary`` under ``data_dir`` (copied now), streaming and started."""
    data_dir = Path(data_dir)
    as_user = postgres._run_as()
    postgres._hand_over(data_dir, as_user)
    pgdata = data_dir / "pgdata"
    if not (pgdata / "PG_VERSION").exists():
        env = {**os.environ, "PGPASSWORD": primary.password}
        conn = f"host=127.0.0.1 port={primary.port} user={postgres.PG_USER} application_name={name}"
        with open(data_dir / "postgres.log", "ab") as log:
            subprocess.run(
                [
                    str(postgres.bin_dir() / "pg_basebackup"),
                    "-d",
                    conn,
                    "-D",
                    str(pgdata),
                    "-R",  # standby.signal + primary_conninfo (with the password) in the copy
                    "-X",
                    "stream",
                    "-c",
                    "fast",
                ],
                env=env,
                check=True,
                stdout=log,
                stderr=subprocess.STDOUT,
                **as_user,
            )
        shutil.copy2(primary.data_dir / "password", data_dir / "password")
    standby = postgres.start(data_dir, durable=durable)
    wait_until(lambda: _streaming(primary, name), SYNC_TIMEOUT_S, f"standby {name} streaming")
    if synchronous:
        _set(primary, "synchronous_standby_names", f'"{name}"')
        wait_until(lambda: _sync(primary, name), SYNC_TIMEOUT_S, f"standby {name} synchronous")
    return standby


def _set(server: postgres.PostgresServer, name: str, value: str) -> None:
    import psycopg
    from psycopg import sql

    with psycopg.connect(server.url(), autocommit=True) as conn:
        # ALTER SYSTEM takes no parameters: the value is quoted as a literal.
        conn.execute(
            sql.SQL("ALTER SYSTEM SET {} = {}").format(sql.Identifier(name), sql.Literal(value))
        )
        conn.execute("SELECT pg_reload_conf()")


def _state(primary: postgres.PostgresServer, name: str) -> tuple[str, str] | None:
    import psycopg

    with psycopg.connect(primary.url(), autocommit=True, connect_timeout=2) as conn:
        row = conn.execute(
            "SELECT state, sync_state FROM pg_stat_replication WHERE application_name = %s",
            (name,),
        ).fetchone()
    return (str(row[0]), str(row[1])) if row else None


def _streaming(primary: postgres.PostgresServer, name: str) -> bool:
    st = _state(primary, name)
    return st is not None and st[0] == "streaming"


def _sync(primary: postgres.PostgresServer, name: str) -> bool:
    st = _state(primary, name)
    return st is not None and st[1] == "sync"


def in_recovery(url: str) -> bool:
    import psycopg

    with psycopg.connect(url, autocommit=True, connect_timeout=2) as conn:
        row = conn.execute("SELECT pg_is_in_recovery()").fetchone()
    return bool(row and row[0])


def promote(url: str, timeout_s: float = 60.0) -> None:
    """Make the standby at ``url`` (its superuser's) the primary; returns once it takes
    writes, with nothing to wait for (``synchronous_standby_names`` reset)."""
    import psycopg
    from psycopg import sql

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SELECT pg_promote(true, %s)", (int(timeout_s),))
    wait_until(lambda: not in_recovery(url), timeout_s, "promotion")
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(sql.SQL("ALTER SYSTEM RESET synchronous_standby_names"))
        conn.execute("SELECT pg_reload_conf()")


def postmaster_pid(pgdata: Path) -> int | None:
    """The pid a data dir's ``postmaster.pid`` names, when that process still runs."""
    try:
        pid = int((Path(pgdata) / "postmaster.pid").read_text().split("\n", 1)[0])
    except (OSError, ValueError):
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        pass  # it runs, as another user
    return pid


def fence(old_data_dir: Path, port: int, password: str, name: str = "fenced") -> None:
    """Keep the old primary under ``old_data_dir`` from ever taking a write again (module doc);
    the new primary listens on ``port`` of the loopback."""
    pgdata = Path(old_data_dir) / "pgdata"
    pid = postmaster_pid(pgdata)
    if pid is not None:
        # Its backends are in the postmaster's process group (postgres.start): all go at once.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while postmaster_pid(pgdata) is not None and time.monotonic() < deadline:
            time.sleep(0.05)
    conninfo = (
        f"host=127.0.0.1 port={port} user={postgres.PG_USER}"
        f" password={password} application_name={name}"
    )
    signal_file = pgdata / "standby.signal"
    signal_file.touch()
    with open(pgdata / "postgresql.auto.conf", "a", encoding="utf-8") as f:
        # Appended lines win over earlier ones; the timeline to follow is the new primary's.
        f.write(f"primary_conninfo = '{conninfo}'\nrecovery_target_timeline = 'latest'\n")
    st = os.stat(pgdata)
    for path in (signal_file, pgdata / "postgresql.auto.conf"):
        with contextlib.suppress(PermissionError):
            os.chown(path, st.st_uid, st.st_gid)
