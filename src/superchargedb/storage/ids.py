"""The identifiers and digests a writer puts in its records, the same for every backend:
time-ordered Unit ids, the clock in epoch milliseconds, and the Merkle root a batch's audit
record proves its content with."""

from __future__ import annotations

import hashlib
import time
import uuid
from collections.abc import Sequence


def uuid7() -> str:
    """A time-ordered UUIDv7 (RFC 9562)."""
    ms = int(time.time() * 1000)
    rand = uuid.uuid4().int & ((1 << 74) - 1)
    value = (ms & ((1 << 48) - 1)) << 80
    value |= 0x7 << 76
    value |= (rand >> 62) << 64
    value |= 0b10 << 62
    value |= rand & ((1 << 62) - 1)
    return str(uuid.UUID(int=value))


def now_ms() -> int:
    return int(time.time() * 1000)


def merkle_root(hashes: Sequence[str]) -> str:
    """Root over content hashes: a batch record proves its content without holding it."""
    level = [
        bytes.fromhex(h) if len(h) == 64 else hashlib.sha256(h.encode()).digest() for h in hashes
    ] or [b"\0" * 32]
    while len(level) > 1:
        if len(level) % 2:
            level.append(level[-1])
        level = [hashlib.sha256(level[i] + level[i + 1]).digest() for i in range(0, len(level), 2)]
    return level[0].hex()
