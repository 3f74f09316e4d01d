"""The local PostgreSQL launcher (``stack/postgres.py``, D-208): a real server from the wheel."""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from superchargedb.stack import postgres
from superchargedb.stack.ports import wait_until

try:
    postgres.bin_dir()
    import psycopg
except (postgres.StackUnavailableError, ImportError) as exc:  # pragma: no cover
    pytest.skip(f"{exc} ({postgres.INSTALL_HINT})", allow_module_level=True)


@pytest.fixture
def data_dir() -> Iterator[Path]:
    # Not pytest's tmp_path: its parents are 0700 root, which the postgres user cannot traverse.
    d = Path(tempfile.mkdtemp(prefix="scdb-pgtest-"))
    yield d
    shutil.rmtree(d, ignore_errors=True)


def test_start_stop_restart_keeps_data(data_dir: Path) -> None:
    server = postgres.start(data_dir, durable=False)
    try:
        assert server.url().startswith("postgresql://postgres:")
        assert (data_dir / "pgdata" / "PG_VERSION").exists()
        assert (data_dir / f".s.PGSQL.{server.port}").exists()  # the socket lives in the data dir
        with psycopg.connect(server.url()) as conn:
            ext = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
            row = ext.fetchone()
            assert row is not None and tuple(int(x) for x in row[0].split(".")[:2]) >= (0, 8)
            conn.execute("CREATE TABLE t (x int)")
            conn.execute("INSERT INTO t VALUES (42)")
        with pytest.raises(psycopg.OperationalError):
            psycopg.connect(server.url().replace(server.password, "wrong"), connect_timeout=3)
    finally:
        server.stop()
    assert server.process.returncode == 0  # a clean shutdown, not a kill
    again = postgres.start(data_dir, durable=False)
    try:
        with psycopg.connect(again.url()) as conn:
            row = conn.execute("SELECT x FROM t").fetchone()
            assert row == (42,)
    finally:
        again.stop()


def test_stop_kills_a_server_that_does_not_exit(data_dir: Path) -> None:
    server = postgres.start(data_dir, durable=False)
    os.kill(server.process.pid, signal.SIGSTOP)  # a hung postmaster ignores the shutdown request
    server.stop(timeout_s=1)
    assert server.process.returncode == -signal.SIGKILL

    def group_gone() -> bool:
        try:
            os.killpg(server.process.pid, 0)
        except ProcessLookupError:
            return True
        return False

    wait_until(group_gone, 10, "the server's process group to go")  # no backend outlives it
