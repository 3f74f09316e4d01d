"""The audit chain's signed head, kept outside the store (D-183): written atomically by either
backend from the head it reads (``sqlite/audit.py``, ``postgres/audit.py``).

Several processes of a server stack may close at once, each writing the head it saw: every
write is a whole file renamed into place (a temp name per process, so two never share one), and
an anchor one of them wrote over a newer one still names a record the chain holds.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
from pathlib import Path
from typing import Any

from .. import faults


def anchor_mac(key: bytes, seq: int, head_hash: str) -> str:
    return hmac.new(key, f"anchor|{seq}|{head_hash}".encode(), hashlib.sha256).hexdigest()


def store_anchor(key: bytes, seq: int, head_hash: str, path: Path, tmp: Path) -> dict[str, Any]:
    """Sign ``(seq, head_hash)`` and put it at ``path`` by way of ``tmp`` (fsynced, renamed,
    the directory fsynced)."""
    body = {"seq": seq, "hash": head_hash, "mac": anchor_mac(key, seq, head_hash)}
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(json.dumps(body).encode())
            f.flush()
            os.fsync(f.fileno())  # the bytes are durable before the name points at them
        faults.point("audit.anchor.before_replace")
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)  # ... and the rename itself survives a power cut
    finally:
        os.close(dir_fd)
    faults.point("audit.anchor.after_replace")
    return body
