"""One real PostgreSQL per test session (D-206), started from the wheel on first use, and a database
per store. Skips (naming the install command) when the stack extra is not installed."""

from __future__ import annotations

import atexit
import hashlib
import shutil
import tempfile
import threading
from pathlib import Path

import pytest

from superchargedb.stack import postgres
from superchargedb.storage.protocols import UnitRecord

# Server 0 holds every test's databases; server 1 is a second cluster, started only by the tests
# that spread tenants over two (test_pg_clusters.py).
_servers: dict[int, postgres.PostgresServer] = {}
_lock = threading.Lock()


def available() -> str | None:
    """None when the stack can run here, else why not."""
    try:
        postgres.bin_dir()
        import pgvector  # noqa: F401
        import psycopg  # noqa: F401
        import psycopg_pool  # noqa: F401
    except (postgres.StackUnavailableError, ImportError) as exc:
        return f"PostgreSQL stack not installed ({exc}): {postgres.INSTALL_HINT}"
    return None


def server(n: int = 0) -> postgres.PostgresServer:
    why = available()
    if why is not None:
        pytest.skip(why)
    with _lock:
        s = _servers.get(n)
        if s is None or not s.alive():
            # Not under pytest's tmp dirs: their 0700 parents keep the postgres user out.
            d = Path(tempfile.mkdtemp(prefix=f"scdb-pg{n}-"))
            s = _servers[n] = postgres.start(d, durable=False)
            atexit.register(_stop, s)
        return s


def _stop(s: postgres.PostgresServer) -> None:
    s.stop()
    shutil.rmtree(s.data_dir, ignore_errors=True)


_created: list[tuple[int, str]] = []  # (server, database) made since the last drop_created()


def database(key: Path | str, n: int = 0) -> str:
    """The URL of the database for ``key`` on server ``n`` (created empty on first use; the
    same one after)."""
    import psycopg

    s = server(n)
    name = "t_" + hashlib.sha256(str(key).encode()).hexdigest()[:24]
    with psycopg.connect(s.url(), autocommit=True) as conn:
        if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone() is None:
            conn.execute(f'CREATE DATABASE "{name}"'.encode())
            _created.append((n, name))
    return s.url(name)


def drop_created() -> None:
    """Drop the databases made since the last call (a test's, once it is over): a suite run on
    PostgreSQL makes one per service, each a copy of the template."""
    import psycopg

    while _created:
        n, name = _created.pop()
        s = _servers.get(n)
        if s is None or not s.alive():
            continue
        with psycopg.connect(s.url(), autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'.encode())


def terminate(application_name: str) -> int:
    """Drop every server session of one client, as if its process died: nothing is closed or
    committed from its side. Returns how many sessions went."""
    import psycopg

    with psycopg.connect(server().url(), autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s",
            (application_name,),
        ).fetchall()
    return len(rows)


def unit(i: int, scope: str = "acme") -> UnitRecord:
    """A small text Unit owned by alice (odd ones shared with ``eng``) for backend tests."""
    return UnitRecord(
        unit_id=f"u{i}",
        scope=scope,
        doc_id=f"d{i}",
        plane="text",
        modality="text",
        text=f"word{i % 13} shared text number {i}",
        acl_owner="alice",
        acl_groups=("eng",) if i % 2 else (),
        content_hash=hashlib.sha256(str(i).encode()).hexdigest(),
        created_at=1,
    )
