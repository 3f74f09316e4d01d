"""Driving API servers over HTTP for the side-by-side benchmarks: paired sequential searches (one
request to each server in turn, so the machine's noise falls on both alike), ingest batches, and a
closed loop at a fixed concurrency.

The closed loop opens a new connection for every request (``Connection: close``). With
``serve --workers N`` the kernel hands each new connection to one API process's ``accept``, so
per-request connections are what spreads the load over the processes: eight keep-alive
connections could all land on one of them and stay there.
"""

from __future__ import annotations

import http.client
import itertools
import json
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode, urlsplit

import httpx

from bench.common.stats import pct

KEY = "aegis_sk_alice"
HEADERS = {"Authorization": f"Bearer {KEY}"}


@dataclass(frozen=True)
class Query:
    text: str
    scope: str
    level: str  # the filter: "1%", "10%" or "none"


def search_body(q: Query, mode: str = "hybrid", top_k: int = 10) -> dict[str, Any]:
    return {"q": q.text, "top_k": top_k, "mode": mode}


def stage_ms(trace: dict[str, Any], name: str) -> float:
    for s in trace.get("stages", []):
        if s.get("stage") == name and not s.get("skipped"):
            return float(s["ms"])
    return 0.0


def search(client: httpx.Client, q: Query, mode: str = "hybrid") -> dict[str, Any]:
    """One search: client wall ms, the server's traced total and embedding ms, hit count."""
    t0 = time.perf_counter()
    r = client.post("/v1/search", params={"scope": q.scope}, json=search_body(q, mode))
    wall = (time.perf_counter() - t0) * 1000
    if r.status_code != 200:
        raise RuntimeError(f"search {q.level} {q.text[:40]!r}: HTTP {r.status_code}: {r.text}")
    out = r.json()
    trace = out["trace"]
    if trace.get("cache") != "miss":  # the result cache is off: every search must run
        raise RuntimeError(f"search answered from the result cache ({trace.get('cache')!r})")
    return {
        "wall_ms": wall,
        "server_ms": float(trace["total_ms"]),
        "embed_ms": stage_ms(trace, "embed"),
        "stages": {s["stage"]: float(s["ms"]) for s in trace["stages"] if not s.get("skipped")},
        # Doc ids, not Unit ids: each store made its own Unit ids for the same records.
        "hits": [h["doc_id"] for h in out["hits"]],
    }


def paired_latency(
    clients: dict[str, httpx.Client],
    queries: Sequence[Query],
    progress: Callable[[int], None] | None = None,
) -> dict[str, dict[str, Any]]:
    """Each query on every server in turn, the order rotating per query; per server and filter
    level: client wall, server total, server total less the query embedding (p50/p95/p99),
    stage medians, and how often the top 10 matched the first server's."""
    names = list(clients)
    raw: dict[str, dict[str, list[dict[str, Any]]]] = {n: {} for n in names}
    for i, q in enumerate(queries):
        order = names[i % len(names) :] + names[: i % len(names)]
        for n in order:
            raw[n].setdefault(q.level, []).append(search(clients[n], q))
        if progress is not None:
            progress(1)
    out: dict[str, dict[str, Any]] = {}
    for n in names:
        out[n] = {}
        for level, rows in raw[n].items():
            first = raw[names[0]][level]
            stages: dict[str, list[float]] = {}
            for r in rows:
                for k, v in r["stages"].items():
                    stages.setdefault(k, []).append(v)
            out[n][level] = {
                "wall_ms": pct([r["wall_ms"] for r in rows]),
                "server_ms": pct([r["server_ms"] for r in rows]),
                "server_less_embed_ms": pct([r["server_ms"] - r["embed_ms"] for r in rows]),
                "stages_p50": {k: round(sorted(v)[len(v) // 2], 3) for k, v in stages.items()},
                "mean_hits": round(sum(len(r["hits"]) for r in rows) / len(rows), 2),
                "same_top10_as_" + names[0]: sum(
                    a["hits"] == b["hits"] for a, b in zip(rows, first, strict=True)
                ),
            }
    return out


def ingest(client: httpx.Client, units: list[dict[str, Any]], scope: str) -> float:
    """One ``POST /v1/ingest`` of ``units``; its wall seconds (raises unless every Unit is ok)."""
    t0 = time.perf_counter()
    r = client.post("/v1/ingest", json={"units": units}, headers={"X-Aegis-Scope": scope})
    secs = time.perf_counter() - t0
    if r.status_code != 200:
        raise RuntimeError(f"ingest: HTTP {r.status_code}: {r.text[:500]}")
    bad = [x for x in r.json()["results"] if not x.get("ok")]
    if bad:
        raise RuntimeError(f"ingest: {len(bad)} Units refused, first: {bad[0]}")
    return secs


@dataclass
class LoopResult:
    latencies_ms: list[float] = field(default_factory=list)
    statuses: dict[str, int] = field(default_factory=dict)


def _post(host: str, port: int, path: str, body: bytes) -> int:
    conn = http.client.HTTPConnection(host, port, timeout=120)
    try:
        conn.request(
            "POST",
            path,
            body=body,
            headers={**HEADERS, "Content-Type": "application/json", "Connection": "close"},
        )
        resp = conn.getresponse()
        resp.read()
        return resp.status
    finally:
        conn.close()


def closed_loop(
    url: str,
    queries: Sequence[Query],
    concurrency: int,
    seconds: float,
    warmup_s: float,
    on_window: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """``concurrency`` clients, each sending the next query as soon as its last one answered,
    for ``warmup_s + seconds``; counts the requests that complete inside the measured window.
    ``on_window("start" | "end")`` is called at the window's edges (CPU counters are read there)."""
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    bodies = [
        (f"/v1/search?{urlencode({'scope': q.scope})}", json.dumps(search_body(q)).encode())
        for q in queries
    ]
    feed = itertools.cycle(bodies)
    lock = threading.Lock()
    t0 = time.monotonic()
    w0, w1 = t0 + warmup_s, t0 + warmup_s + seconds
    results = [LoopResult() for _ in range(concurrency)]

    def client(res: LoopResult) -> None:
        while True:
            start = time.monotonic()
            if start >= w1:
                return
            with lock:
                path, body = next(feed)
            try:
                status = str(_post(host, port, path, body))
            except OSError as exc:
                status = type(exc).__name__
            end = time.monotonic()
            if w0 <= end <= w1:  # completed inside the window: throughput's own definition
                res.latencies_ms.append((end - start) * 1000)
                res.statuses[status] = res.statuses.get(status, 0) + 1

    threads = [threading.Thread(target=client, args=(r,), daemon=True) for r in results]
    for t in threads:
        t.start()
    time.sleep(max(0.0, w0 - time.monotonic()))
    if on_window is not None:
        on_window("start")
    time.sleep(max(0.0, w1 - time.monotonic()))
    if on_window is not None:
        on_window("end")
    for t in threads:
        t.join()
    lat = [x for r in results for x in r.latencies_ms]
    statuses: dict[str, int] = {}
    for r in results:
        for k, v in r.statuses.items():
            statuses[k] = statuses.get(k, 0) + v
    ok = statuses.get("200", 0)
    return {
        "concurrency": concurrency,
        "seconds": seconds,
        "completed": len(lat),
        "ok": ok,
        "statuses": statuses,
        "rps": round(ok / seconds, 2),
        "latency_ms": pct(lat),
    }
