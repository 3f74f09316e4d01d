"""The write side's storage contract on every backend kind (``checks_writes.py``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from contract.backends import KINDS, skip_pending
from contract.checks_writes import CHECKS


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("check", sorted(CHECKS))
def test_backend_keeps_the_write_contract(kind: str, check: str, tmp_path: Path) -> None:
    skip_pending(kind, "writes")
    CHECKS[check](KINDS[kind], tmp_path)
