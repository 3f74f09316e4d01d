"""Consistency under concurrent writes and reads, for bench/load.py.

A writer sends batches of Units that share a fresh token; a reader searches for tokens of recent
batches. What the spec promises (D-13, D-44: one transaction per batch; the
acknowledgement follows the commit and the in-memory index apply):

- a batch is visible whole or not at all (never some of its Units);
- a batch rejected as a whole (422) is never visible, and neither is a Unit that failed alone;
- once the writer holds the acknowledgement, the next search finds every Unit of the batch.

A reader may see a batch before the writer has read the acknowledgement (the response is in
flight); it must then end acknowledged. Batches whose request timed out are left out.
"""

from __future__ import annotations

import asyncio
import random
import time
from typing import Any

import httpx

FILLER = (
    "This probe Unit checks that concurrent readers see a batch whole or not at all, and that "
    "an acknowledged batch is searchable at once."
)


class ConsistencyChecker:
    def __init__(self, client: httpx.AsyncClient, writer_key: str, reader_key: str, seed: int):
        self.client = client
        self.wh = {"Authorization": f"Bearer {writer_key}"}
        self.rh = {"Authorization": f"Bearer {reader_key}"}
        self.rng = random.Random(seed)
        # token -> {"kind": good|reject|poison, "k": Units, "state": pending|acked|rejected|...}
        self.batches: dict[str, dict[str, Any]] = {}
        self.recent: list[str] = []
        self.seen: set[str] = set()
        self.seen_pending: set[str] = set()
        self.reads = 0
        self.ack_checks = 0
        self.violations: list[str] = []

    def _token(self) -> str:
        return "cz" + "".join(self.rng.choice("0123456789abcdef") for _ in range(14))

    async def _search(self, headers: dict[str, str], token: str, until: float) -> list[Any] | None:
        """The hits of a search for ``token``, retrying after 429/503; None if never served."""
        while time.monotonic() < until:
            try:
                r = await self.client.post(
                    "/v1/search", headers=headers, json={"q": token, "top_k": 20}
                )
            except httpx.TransportError:  # timeouts included; the load report counts them
                await asyncio.sleep(0.5)
                continue
            if r.status_code == 200:
                return list(r.json()["hits"])
            if r.status_code in (429, 503):
                await asyncio.sleep(min(float(r.headers.get("Retry-After", "1")), 1.0))
                continue
            self.violations.append(f"search for {token}: HTTP {r.status_code}")
            return None
        return None

    @staticmethod
    def _count(hits: list[Any], token: str) -> int:
        return sum(token in (h.get("text") or "") for h in hits)

    def _observe(self, token: str, n: int, at: str) -> None:
        b = self.batches[token]
        if n == 0:
            return
        self.seen.add(token)
        if b["kind"] == "poison":
            self.violations.append(f"{at}: a Unit that failed alone is visible ({token})")
        elif n != b["k"]:
            self.violations.append(f"{at}: partial batch {token}: {n} of {b['k']} Units visible")
        elif b["state"] == "rejected":
            self.violations.append(f"{at}: rejected batch {token} is visible")
        elif b["state"] == "pending":
            self.seen_pending.add(token)

    async def writer(self, until: float) -> None:
        i = 0
        while time.monotonic() < until:
            i += 1
            tok, k = self._token(), self.rng.randint(2, 5)
            kind = "reject" if i % 5 == 0 else "good"
            units: list[dict[str, Any]] = [
                {"text": f"probe {tok} part {j} of {k}. {FILLER}", "doc_id": f"{tok}-{j}"}
                for j in range(k)
            ]
            poison = None
            if kind == "good" and i % 3 == 0:  # one Unit with a bad Locator fails alone
                poison = self._token()
                self.batches[poison] = {"kind": "poison", "k": 1, "state": "never"}
                units.insert(
                    self.rng.randrange(k + 1),
                    {
                        "text": f"probe {poison} poison. {FILLER}",
                        "doc_id": f"{poison}-0",
                        "locator": {"kind": "char_span", "start": 9, "end": 3},
                    },
                )
                self.recent.append(poison)
            body: dict[str, Any] = {"units": units}
            if kind == "reject":
                body["unknown_field"] = True  # a whole-request 422: nothing may be stored
            self.batches[tok] = {"kind": kind, "k": k, "state": "pending"}
            self.recent.append(tok)
            self.recent = self.recent[-60:]
            try:
                r = await self.client.post("/v1/ingest", headers=self.wh, json=body)
            except httpx.TransportError:
                self.batches[tok]["state"] = "unknown"
                continue
            b = self.batches[tok]
            if r.status_code == 200:
                res = r.json()["results"]
                bad = [x for x in res if not x.get("ok")]
                if len(bad) != (1 if poison else 0) or r.json()["ingested"] != k:
                    self.violations.append(f"batch {tok}: unexpected results {res}")
                b["state"] = "acked"
                self.ack_checks += 1
                hits = await self._search(self.wh, tok, time.monotonic() + 60)
                if hits is not None and self._count(hits, tok) != k:
                    self.violations.append(
                        f"acknowledged batch {tok}: {self._count(hits, tok)} of {k} Units found"
                    )
            elif r.status_code == 422 and kind == "reject":
                b["state"] = "rejected"
            elif r.status_code in (429, 503):
                b["state"] = "shed"
                await asyncio.sleep(min(float(r.headers.get("Retry-After", "1")), 1.0))
            else:
                b["state"] = f"http-{r.status_code}"
                self.violations.append(f"batch {tok} ({kind}): HTTP {r.status_code}")

    async def reader(self, until: float) -> None:
        while time.monotonic() < until:
            if not self.recent:
                await asyncio.sleep(0.05)
                continue
            tok = self.rng.choice(self.recent)
            hits = await self._search(self.rh, tok, until)
            if hits is None:
                continue
            self.reads += 1
            self._observe(tok, self._count(hits, tok), "reader")

    async def run(self, until: float) -> None:
        await asyncio.gather(self.writer(until), self.reader(until), self.reader(until))
        for tok in self.seen:  # seen while pending: the batch must have ended acknowledged
            b = self.batches[tok]
            if b["kind"] != "poison" and b["state"] not in ("acked", "unknown"):
                self.violations.append(f"batch {tok} was visible but ended {b['state']}")

    def report(self) -> dict[str, Any]:
        states = [b["state"] for b in self.batches.values() if b["kind"] != "poison"]
        return {
            "batches_acked": states.count("acked"),
            "units_acked": sum(b["k"] for b in self.batches.values() if b["state"] == "acked"),
            "batches_rejected": states.count("rejected"),
            "batches_shed": states.count("shed"),
            "batches_unknown": states.count("unknown"),
            "poison_units": sum(b["kind"] == "poison" for b in self.batches.values()),
            "reads": self.reads,
            "read_after_ack_checks": self.ack_checks,
            "seen_before_ack": len(self.seen_pending),
            "violations": self.violations[:50],
            "violation_count": len(self.violations),
        }
