"""Per-principal request metering and stored-object usage for ``GET /v1/usage``.

Counting a request must not cost a write, so counts accumulate in memory and are flushed to the
store's usage totals in one transaction every few seconds and at shutdown. Object usage is read
from what the principal holds (``QuotaLedger.media_use``).
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from typing import Any

from .storage.protocols_writes import QuotaLedger, UsageCount, WriteStore


class Meter:
    def __init__(self, store: WriteStore) -> None:
        self.store = store
        self._lock = threading.Lock()
        self._counts: dict[tuple[str, int, str], list[int]] = defaultdict(lambda: [0, 0])

    def record(self, principal: str, route: str, cost_usd: float = 0.0) -> None:
        day = int(time.time() // 86400)
        with self._lock:
            c = self._counts[(principal, day, route)]
            c[0] += 1
            c[1] += int(round(cost_usd * 1e6))

    def pending(self, principal: str, day_lo: int, day_hi: int) -> list[tuple[str, int, int]]:
        with self._lock:
            return [
                (route, c[0], c[1])
                for (p, day, route), c in self._counts.items()
                if p == principal and day_lo <= day <= day_hi
            ]

    def flush(self) -> None:
        with self._lock:
            items = list(self._counts.items())
            self._counts.clear()
        if not items:
            return
        with self.store.write() as tx:
            tx.usage.add([UsageCount(p, d, r, c[0], c[1]) for (p, d, r), c in items])


def object_usage(ledger: QuotaLedger, principal: str) -> dict[str, Any]:
    """What a principal holds: its objects' bytes (each object its full size, even when the
    blob is shared with identical content elsewhere, so the figure says nothing about other
    principals' content), document pages and media minutes derived from objects."""
    use = ledger.media_use(principal)
    return {
        "objects": use.objects,
        "object_bytes": use.object_bytes,
        "media_pages": use.media_pages,
        "media_minutes": round(use.media_ms / 60_000, 2),
    }
