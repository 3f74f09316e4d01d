"""``python -m bench.peers``: see bench/peers/__init__.py."""

from __future__ import annotations

import sys

from bench.peers.cli import main

sys.exit(main())
