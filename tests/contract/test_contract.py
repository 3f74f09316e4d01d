"""The storage contract on every backend kind (the server stack adds its kind to KINDS)."""

from __future__ import annotations

from pathlib import Path

import pytest

from contract.backends import KINDS
from contract.checks import CHECKS


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("check", sorted(CHECKS))
def test_backend_keeps_the_contract(kind: str, check: str, tmp_path: Path) -> None:
    CHECKS[check](KINDS[kind], tmp_path)
