"""Load benchmark: mixed ingest/search/answer at rising concurrency, an overload phase, consistency.

Starts ``superchargedb serve --demo`` as a subprocess on a free loopback port over a fresh data
dir, ingests a slice of SciFact (scope ``acme/alpha/load``), mints load principals through the
admin API (each worker uses one of their keys), then drives the server with an asyncio client
(httpx.AsyncClient). Workers are closed-loop: each sends one request at a time, and after a
429/503 sleeps for the ``Retry-After`` it was given (capped), as clients are told to.

Per level (1, 4, 16, 64, 128 workers by default, each for ``--level-seconds``): throughput,
p50/p95/p99 latency (of successful responses and of all responses), statuses, with 429 and 503
counted apart from failures (any other 5xx, a timeout or a transport error is a failure), and the
share of 429/503 that carry ``Retry-After``. Then an overload phase at the highest level for
``--overload-seconds`` (default 600) while the server's RSS is sampled from /proc: memory after
the warm-up must stay within +-10 % of its level at the end of the warm-up. During the overload a
writer and a reader check consistency: a reader never sees part of a batch, nor a Unit of a batch
that was rejected, nor a Unit that failed alone; an acknowledged batch is found by the next
search (D-13, D-44: the acknowledgement follows the commit and the in-memory index apply).

Writes ``<out>/load.json``, ``<out>/load.md`` and ``<out>/load.png``.

    .venv/bin/python -m bench.load                                  # ~15 min
    .venv/bin/python -m bench.load --levels 1,8 --level-seconds 5 --overload-seconds 15
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import secrets
import shutil
import signal
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import numpy as np
from tqdm import tqdm

from bench.common import evaldir
from bench.common.env import git_commit
from bench.common.paths import RESULTS
from bench.common.report import command, write_report
from bench.common.server import Server, free_port
from bench.loadcheck import ConsistencyChecker
from bench.loadmem import (
    memlog_rows,
    memlog_window,
    memory_verdict,
    plot_memlog,
    read_memlog,
    sample_rss,
    smaps_summary,
)

REPO = Path(__file__).resolve().parent.parent
SCOPE = "acme/alpha/load"
GROUP = "eng-backend"
ADMIN_KEY = "aegis_sk_alice"
OPS = ("search", "answer", "ingest")


# -- setup -----------------------------------------------------------------------------------


def server_env(extra: list[str]) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        # Extractive answers only: no external or local LLM (a local one takes seconds each).
        if k not in ("OPENAI_API_KEY", "OPENAI_BASE_URL")
        and not k.startswith("SCDB_OPENAI")
        and k != "SCDB_ANSWER_PROVIDERS"
    }
    env["SCDB_AUDIT_KEY"] = os.environ.get("SCDB_AUDIT_KEY") or secrets.token_hex(32)
    env["SCDB_ANSWER_PROVIDERS"] = "openai"  # without a key it is skipped: extractive
    for kv in extra:
        k, _, v = kv.partition("=")
        env[k] = v
    return env


def load_scifact(path: Path, n_docs: int) -> tuple[list[dict[str, str]], list[str]]:
    docs: list[dict[str, str]] = []
    with open(path / "corpus.jsonl") as f:
        for line in f:
            if len(docs) >= n_docs:
                break
            d = json.loads(line)
            docs.append({"id": d["_id"], "text": (d.get("title", "") + "\n" + d["text"]).strip()})
    queries: list[str] = []
    with open(path / "queries.jsonl") as f:
        for line in f:
            queries.append(json.loads(line)["text"])
    return docs, queries


def post_patiently(client: httpx.Client, path: str, **kw: Any) -> httpx.Response:
    """POST that honours 429/503 + Retry-After: the server's own limits apply to the setup too."""
    for _ in range(60):
        r = client.post(path, **kw)
        if r.status_code not in (429, 503):
            return r
        time.sleep(float(r.headers.get("Retry-After", "1")))
    return r


def setup(client: httpx.Client, docs: list[dict[str, str]], n_principals: int) -> dict[str, Any]:
    """Mint the load principals (as alice, an admin) and ingest the SciFact slice."""
    admin = {"Authorization": f"Bearer {ADMIN_KEY}"}
    keys: dict[str, str] = {}
    for name in [f"load-{i}" for i in range(n_principals)] + ["lc-writer", "lc-reader"]:
        r = post_patiently(
            client,
            "/v1/admin/principals",
            headers=admin,
            json={
                "name": name,
                "perms": ["read", "write"],
                "tier": "pro",
                "scopes": [SCOPE],
                "active_scope": SCOPE,
                "groups": [GROUP],
            },
        )
        if r.status_code != 201:
            raise RuntimeError(f"creating principal {name}: HTTP {r.status_code}: {r.text}")
        keys[name] = r.json()["key"]
    t0 = time.perf_counter()
    stored = 0
    with tqdm(total=len(docs), desc="ingest scifact", unit="doc", file=sys.stderr) as bar:
        for i in range(0, len(docs), 32):
            part = docs[i : i + 32]
            units = [{"text": d["text"], "doc_id": f"scifact-{d['id']}"} for d in part]
            r = post_patiently(
                client,
                "/v1/ingest",
                headers={**admin, "X-Aegis-Scope": SCOPE},
                json={"units": [{**u, "acl_groups": [GROUP]} for u in units]},
            )
            if r.status_code != 200:
                raise RuntimeError(f"ingest: HTTP {r.status_code}: {r.text}")
            stored += sum(len(x.get("unit_ids") or [1]) for x in r.json()["results"])
            bar.update(len(part))
    return {
        "keys": keys,
        "scifact_docs": len(docs),
        "units_stored": stored,
        "ingest_s": round(time.perf_counter() - t0, 2),
    }


# -- workload --------------------------------------------------------------------------------


@dataclass
class Sample:
    op: str
    status: int  # 0: timeout, -1: transport error
    ms: float
    retry_after: bool
    t: float
    error: str = ""  # the exception's class for timeouts and transport errors


@dataclass
class Phase:
    name: str
    workers: int
    seconds: float
    samples: list[Sample] = field(default_factory=list)
    probe_ms: list[float] = field(default_factory=list)  # GET /healthz latencies
    started: float = 0.0
    ended: float = 0.0


def retry_after_of(r: httpx.Response) -> float | None:
    raw = r.headers.get("Retry-After")
    try:
        v = float(raw) if raw is not None else None
    except ValueError:
        return None
    return v if v is not None and v >= 1 else None


class Workload:
    def __init__(
        self,
        client: httpx.AsyncClient,
        keys: list[str],
        queries: list[str],
        texts: list[str],
        mix: dict[str, float],
        ingest_pool: int,
        retry_cap: float,
        seed: int,
    ) -> None:
        self.client, self.keys, self.queries, self.texts = client, keys, queries, texts
        self.mix, self.ingest_pool, self.retry_cap, self.seed = mix, ingest_pool, retry_cap, seed

    def request(self, op: str, rng: random.Random, wid: int) -> tuple[str, dict[str, Any]]:
        if op == "search":
            return "/v1/search", {"q": rng.choice(self.queries), "top_k": 10}
        if op == "answer":
            return "/v1/answer", {"q": rng.choice(self.queries), "top_k": 5}
        # A small batch replacing a document from a bounded pool (16 x --ingest-pool docs, 2-4
        # Units each). The pool bounds the data set, but at this machine's ingest rate the
        # overload fills only part of it: the data grows during the window, and the report shows
        # by how much (Units indexed, catalog size) next to the server's memory.
        doc = f"load-w{wid % 16}-{rng.randrange(self.ingest_pool)}"
        units = [
            {
                "text": f"{rng.choice(self.texts)[:400]} (revision {rng.randrange(10**9)})",
                "doc_id": doc,
                "acl_groups": [GROUP],
            }
            for _ in range(rng.randint(2, 4))
        ]
        return "/v1/ingest", {"units": units, "mode": "replace"}

    async def worker(self, wid: int, phase: Phase, deadline: float) -> None:
        rng = random.Random(self.seed * 100_003 + wid * 7919 + len(phase.name))
        headers = {"Authorization": f"Bearer {self.keys[wid % len(self.keys)]}"}
        ops, weights = list(self.mix), list(self.mix.values())
        while time.monotonic() < deadline:
            op = rng.choices(ops, weights)[0]
            path, body = self.request(op, rng, wid)
            t0 = time.perf_counter()
            wait, err = 0.0, ""
            try:
                r = await self.client.post(path, json=body, headers=headers)
                ra = retry_after_of(r)
                status = r.status_code
                if status in (429, 503):
                    wait = min(ra or 1.0, self.retry_cap)
            except httpx.TimeoutException as exc:
                status, ra, err = 0, None, type(exc).__name__
            except httpx.TransportError as exc:
                status, ra, err = -1, None, type(exc).__name__
                wait = 0.2
            ms = (time.perf_counter() - t0) * 1000
            phase.samples.append(Sample(op, status, ms, ra is not None, time.monotonic(), err))
            if wait:
                await asyncio.sleep(wait * rng.uniform(0.5, 1.0))  # jittered back-off

    async def run(self, phase: Phase) -> None:
        phase.started = time.monotonic()
        deadline = phase.started + phase.seconds
        await asyncio.gather(*(self.worker(i, phase, deadline) for i in range(phase.workers)))
        phase.ended = time.monotonic()


# -- statistics ------------------------------------------------------------------------------


def pcts(ms: list[float]) -> dict[str, float | None]:
    if not ms:
        return {"p50": None, "p95": None, "p99": None, "max": None}
    a = np.asarray(ms)
    return {
        "p50": round(float(np.percentile(a, 50)), 1),
        "p95": round(float(np.percentile(a, 95)), 1),
        "p99": round(float(np.percentile(a, 99)), 1),
        "max": round(float(a.max()), 1),
    }


def is_failure(status: int) -> bool:
    return status <= 0 or (status >= 500 and status != 503)


def summarize(phase: Phase) -> dict[str, Any]:
    s = phase.samples
    secs = max(phase.ended - phase.started, 1e-9)
    statuses: dict[str, int] = {}
    errors: dict[str, int] = {}
    for x in s:
        key = {0: "timeout", -1: "transport_error"}.get(x.status, str(x.status))
        statuses[key] = statuses.get(key, 0) + 1
        if x.error:
            errors[x.error] = errors.get(x.error, 0) + 1
    shed = [x for x in s if x.status in (429, 503)]
    ok = [x for x in s if 200 <= x.status < 300]
    fails = [x for x in s if is_failure(x.status)]
    other_4xx = [x for x in s if 400 <= x.status < 500 and x.status != 429]
    by_op = {}
    for op in OPS:
        o = [x for x in s if x.op == op]
        ok_o = [x.ms for x in o if 200 <= x.status < 300]
        by_op[op] = {
            "requests": len(o),
            "ok": len(ok_o),
            "ok_per_s": round(len(ok_o) / secs, 2),
            "latency_ok_ms": pcts(ok_o),
            "429": sum(x.status == 429 for x in o),
            "503": sum(x.status == 503 for x in o),
            "failures": sum(is_failure(x.status) for x in o),
        }
    n = max(len(s), 1)
    return {
        "name": phase.name,
        "workers": phase.workers,
        "seconds": round(secs, 2),
        "requests": len(s),
        "throughput_per_s": round(len(s) / secs, 2),
        "ok_per_s": round(len(ok) / secs, 2),
        "latency_ok_ms": pcts([x.ms for x in ok]),
        "latency_all_ms": pcts([x.ms for x in s]),
        "latency_shed_ms": pcts([x.ms for x in shed]),  # how fast a refusal comes back
        "probe_ms": pcts(phase.probe_ms),
        "error_types": dict(sorted(errors.items())),
        "statuses": dict(sorted(statuses.items())),
        "rate_429": round(sum(x.status == 429 for x in s) / n, 4),
        "rate_503": round(sum(x.status == 503 for x in s) / n, 4),
        "rate_other_4xx": round(len(other_4xx) / n, 4),
        "failures": len(fails),
        "failure_rate": round(len(fails) / n, 4),
        "timeouts": statuses.get("timeout", 0),
        "server_errors_non_503": sum(x.status >= 500 and x.status != 503 for x in s),
        "shed": len(shed),
        "retry_after_share": round(sum(x.retry_after for x in shed) / len(shed), 4)
        if shed
        else None,
        "by_op": by_op,
    }


def probe(url: str, current: list[Phase | None], stop: threading.Event) -> None:
    """GET /healthz every second from its own thread and connection: how long the server
    takes to answer anything at all (admission never refuses it)."""
    with httpx.Client(base_url=url, timeout=120.0) as c:
        while not stop.wait(1.0):
            ph = current[0]
            t0 = time.perf_counter()
            try:
                c.get("/healthz")
            except httpx.HTTPError:
                continue
            if ph is not None:
                ph.probe_ms.append((time.perf_counter() - t0) * 1000)


# -- report ----------------------------------------------------------------------------------


def fmt(v: Any) -> str:
    if v is None:
        return "-"
    return f"{v:g}" if isinstance(v, float) else str(v)


def level_rows(rows: list[dict[str, Any]]) -> str:
    head = (
        "| phase | workers | req/s | ok/s | p50 ms | p95 ms | p99 ms | 429 | 503 | failures |"
        " Retry-After on 429/503 |\n|---|---|---|---|---|---|---|---|---|---|---|\n"
    )
    out = []
    for r in rows:
        lat = r["latency_ok_ms"]
        ra = r["retry_after_share"]
        out.append(
            f"| {r['name']} | {r['workers']} | {r['throughput_per_s']} | {r['ok_per_s']} |"
            f" {fmt(lat['p50'])} | {fmt(lat['p95'])} | {fmt(lat['p99'])} |"
            f" {r['rate_429'] * 100:.1f} % | {r['rate_503'] * 100:.1f} % |"
            f" {r['failures']} ({r['failure_rate'] * 100:.2f} %) |"
            f" {'-' if ra is None else f'{ra * 100:.0f} %'} |"
        )
    return head + "\n".join(out) + "\n"


def shed_rows(rows: list[dict[str, Any]]) -> str:
    out = [
        "| phase | 429/503 p50 ms | p95 ms | p99 ms | /healthz p50 ms | p95 ms | max ms |"
        " timeouts and transport errors |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        sh, pr = r["latency_shed_ms"], r["probe_ms"]
        out.append(
            f"| {r['name']} | {fmt(sh['p50'])} | {fmt(sh['p95'])} | {fmt(sh['p99'])} |"
            f" {fmt(pr['p50'])} | {fmt(pr['p95'])} | {fmt(pr['max'])} |"
            f" {r['error_types'] or '-'} |"
        )
    return "\n".join(out) + "\n"


def op_rows(rows: list[dict[str, Any]]) -> str:
    out = [
        "| phase | op | ok/s | p50 ms | p95 ms | p99 ms | 429 | 503 | failures |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        for op, o in r["by_op"].items():
            lat = o["latency_ok_ms"]
            out.append(
                f"| {r['name']} | {op} | {o['ok_per_s']} | {fmt(lat['p50'])} | {fmt(lat['p95'])}"
                f" | {fmt(lat['p99'])} | {o['429']} | {o['503']} | {o['failures']} |"
            )
    return "\n".join(out) + "\n"


def markdown(rep: dict[str, Any]) -> str:
    ov, mem, cons, v = (
        rep["overload"],
        rep["overload"]["memory"],
        rep["consistency"],
        rep["verdict"],
    )
    cfg = rep["config"]
    lines = [
        "# Load benchmark",
        "",
        f"Generated {rep['generated_at']} by `{rep['command']}` at commit "
        f"{rep['environment']['git_commit']} on {rep['environment']['cpus']} CPUs "
        f"({rep['environment']['platform']}). The load generator runs on the same machine as "
        "the server and competes with it for the CPUs; timings are noisy.",
        "",
        f"Workload: {cfg['mix']} (search / answer / ingest of 2-4 Units replacing one of "
        f"{cfg['ingest_pool']} docs per worker group), {cfg['principals']} principals, "
        f"{rep['setup']['scifact_docs']} SciFact docs ({rep['setup']['units_stored']} Units) "
        "plus the demo corpus. Workers back off for `Retry-After` (capped at "
        f"{cfg['retry_cap_s']} s) after a 429/503. Latencies are of successful responses.",
        "",
        "## Levels",
        "",
        level_rows(rep["levels"] + [ov]),
        "## Refusals and responsiveness",
        "",
        "How long a 429/503 took to come back, and a `GET /healthz` probe sent every second "
        "from its own thread and connection (never refused by admission control).",
        "",
        shed_rows(rep["levels"] + [ov]),
        "## Per operation",
        "",
        op_rows(rep["levels"] + [ov]),
        "## Memory over the overload",
        "",
        f"{ov['workers']} workers for {ov['seconds']:.0f} s; RSS of the server process sampled "
        f"every {cfg['rss_interval_s']} s. At the start of the overload "
        f"{fmt(mem.get('overload_start_mb'))} MB; the verdict's baseline is the level after a "
        f"{mem.get('warmup_s')} s warm-up (the plot shows the whole curve, warm-up included: "
        f"the dotted line ends it): {fmt(mem.get('baseline_mb'))} MB; over the "
        f"{mem.get('samples')} samples after it: min {fmt(mem.get('min_mb'))} MB, max (peak) "
        f"{fmt(mem.get('max_mb'))} MB, end {fmt(mem.get('end_mb'))} MB, last quarter "
        f"{fmt(mem.get('last_quarter_mean_mb'))} MB, max deviation "
        f"{fmt(mem.get('max_deviation_pct'))} % -> "
        f"**{'flat' if mem.get('flat_within_10pct') else 'NOT flat'} within +-10 %** "
        f"({fmt(mem.get('max_deviation_from_overload_start_pct'))} % from the overload's "
        "first sample, warm-up included).",
        "",
        f"Resident MB by mapping kind (from /proc/<pid>/smaps) at the start of the overload: "
        f"{mem.get('smaps_mb_before')}; at its end: {mem.get('smaps_mb_after')}.",
        "",
        "Where the memory sits, from the server's own memory log (`SCDB_MEMORY_LOG`, "
        "src/superchargedb/memstats.py) over the same window: malloc in use/free across all "
        "arenas (glibc `mallinfo2`; mmap = large blocks such as onnxruntime's arena), SQLite's "
        "allocations (page caches of every connection), the bounded caches, threads, and the "
        "data itself (Units indexed, catalog file size: ingest during the overload adds data).",
        "",
        memlog_rows(mem.get("log_window") or {}),
        "## Consistency under concurrent writes and reads",
        "",
        f"{cons['batches_acked']} acknowledged batches ({cons['units_acked']} Units), "
        f"{cons['batches_rejected']} rejected whole (422), {cons['batches_shed']} shed (429/503), "
        f"{cons['batches_unknown']} unknown (timeout), {cons['poison_units']} Units failed alone; "
        f"{cons['reads']} reader searches, {cons['read_after_ack_checks']} read-after-ack checks "
        f"({cons['seen_before_ack']} batches seen by the reader before the writer had the "
        f"acknowledgement, which is allowed: commit and apply precede the response). "
        f"Violations: **{len(cons['violations'])}**.",
        "",
        "## Verdict",
        "",
    ]
    for k, val in v.items():
        lines.append(f"- {k}: **{val}**")
    lines += ["", "![load](load.png)", ""]
    return "\n".join(lines)


def plot(rep: dict[str, Any], path: Path) -> str | None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib is not installed (scripts/install_bench.sh); no plot"
    rows = rep["levels"] + [rep["overload"]]
    labels = [f"{r['workers']}" + (" (ovl)" if r["name"] == "overload" else "") for r in rows]
    fig, ax = plt.subplots(1, 4, figsize=(22, 4.8))
    for q, style in (("p50", "o-"), ("p95", "s--"), ("p99", "^:")):
        ax[0].plot(labels, [r["latency_ok_ms"][q] or np.nan for r in rows], style, label=q)
    ax[0].set_yscale("log")
    ax[0].set_xlabel("workers")
    ax[0].set_ylabel("latency of 2xx (ms)")
    ax[0].legend()
    ax[0].set_title("latency per level")
    ok = [r["ok_per_s"] for r in rows]
    shed = [r["throughput_per_s"] * (r["rate_429"] + r["rate_503"]) for r in rows]
    ax[1].bar(labels, ok, label="2xx/s")
    ax[1].bar(labels, shed, bottom=ok, label="429+503/s")
    ax[1].set_xlabel("workers")
    ax[1].set_ylabel("responses/s")
    ax[1].legend()
    ax[1].set_title("throughput per level")
    series = rep["rss_series"]
    ax[2].plot([p[0] for p in series], [p[1] for p in series], lw=1)
    mem = rep["overload"]["memory"]
    if mem.get("baseline_mb"):
        b = mem["baseline_mb"]
        ax[2].axhspan(b * 0.9, b * 1.1, color="green", alpha=0.12, label="baseline +-10 %")
        ax[2].axvspan(rep["overload"]["t_start"], rep["overload"]["t_end"], alpha=0.06)
        ax[2].legend()
    ax[2].set_xlabel("seconds since start of the load")
    ax[2].set_ylabel("server RSS (MB)")
    ax[2].set_title("RSS over time (shaded: overload)")
    if mem.get("warmup_s") is not None:
        ax[2].axvline(rep["overload"]["t_start"] + mem["warmup_s"], color="grey", ls=":", lw=1)
    plot_memlog(ax[3], rep.get("memory_log") or [], rep["wall0"])
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return None


# -- main ------------------------------------------------------------------------------------


async def drive(
    args: argparse.Namespace,
    url: str,
    pid: int,
    st: dict[str, Any],
    queries: list[str],
    texts: list[str],
) -> dict[str, Any]:
    levels = [int(x) for x in args.levels.split(",")]
    w = [float(x) for x in args.mix.split(",")]
    mix = dict(zip(OPS, w, strict=True))
    keys = [v for k, v in st["keys"].items() if k.startswith("load-")]
    limits = httpx.Limits(
        max_connections=max(levels) + 16, max_keepalive_connections=max(levels) + 16
    )
    timeout = httpx.Timeout(args.timeout)
    series: list[tuple[float, float, str]] = []
    current = ["idle"]
    total = len(levels) * args.level_seconds + args.overload_seconds
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=timeout) as client:
        wl = Workload(
            client, keys, queries, texts, mix, args.ingest_pool, args.retry_cap, args.seed
        )
        t0 = time.monotonic()
        wall0 = time.time()  # the server's memory log stamps wall-clock time
        sampler = asyncio.create_task(sample_rss(pid, args.rss_interval, series, current, t0))
        bar = tqdm(total=int(total), desc="load", unit="s", file=sys.stderr)

        async def tick(phase: Phase) -> None:
            last = 0
            while True:
                await asyncio.sleep(1.0)
                el = int(time.monotonic() - phase.started)
                bar.update(max(0, min(el, int(phase.seconds)) - last))
                last = max(last, min(el, int(phase.seconds)))
                recent = [x for x in phase.samples[-2000:] if x.t >= time.monotonic() - 5]
                shed = sum(x.status in (429, 503) for x in recent)
                bar.set_postfix_str(
                    f"{phase.name} rps={len(recent) / 5:.0f} shed={shed / max(len(recent), 1):.0%}"
                    + (f" rss={series[-1][1]:.0f}MB" if series else "")
                )

        probing: list[Phase | None] = [None]
        stop_probe = threading.Event()
        prober = threading.Thread(target=probe, args=(url, probing, stop_probe), daemon=True)
        prober.start()
        results = []
        for n in levels:
            ph = Phase(f"level-{n}", n, args.level_seconds)
            current[0] = ph.name
            probing[0] = ph
            ticker = asyncio.create_task(tick(ph))
            await wl.run(ph)
            ticker.cancel()
            results.append(summarize(ph))
        smaps_before = smaps_summary(pid)
        ph = Phase("overload", max(levels), args.overload_seconds)
        current[0] = "overload"
        probing[0] = ph
        checker = ConsistencyChecker(
            client, st["keys"]["lc-writer"], st["keys"]["lc-reader"], args.seed
        )
        ticker = asyncio.create_task(tick(ph))
        check_task = asyncio.create_task(checker.run(time.monotonic() + args.overload_seconds))
        await wl.run(ph)
        await check_task
        ticker.cancel()
        probing[0] = None
        stop_probe.set()
        bar.close()
        await asyncio.sleep(args.rss_interval)  # one sample after the overload
        sampler.cancel()
        over = summarize(ph)
        over["t_start"] = round(ph.started - t0, 2)
        over["t_end"] = round(ph.ended - t0, 2)
        warmup = min(60.0, 0.2 * args.overload_seconds)
        over["memory"] = memory_verdict(series, over["t_start"], over["t_end"], warmup)
        over["memory"]["smaps_mb_before"] = smaps_before
        over["memory"]["smaps_mb_after"] = smaps_summary(pid)
        return {
            "wall0": wall0,
            "levels": results,
            "overload": over,
            "rss_series": series,
            "consistency": checker.report(),
        }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--levels", default="1,4,16,64,128", help="concurrency levels (workers)")
    ap.add_argument("--level-seconds", type=float, default=30.0)
    ap.add_argument("--overload-seconds", type=float, default=600.0)
    ap.add_argument("--mix", default="70,20,10", help="search,answer,ingest weights")
    ap.add_argument("--scifact-docs", type=int, default=300)
    ap.add_argument("--principals", type=int, default=8, help="load principals (keys)")
    ap.add_argument("--ingest-pool", type=int, default=50, help="doc ids per worker group")
    ap.add_argument("--retry-cap", type=float, default=1.0, help="max back-off after 429/503 (s)")
    ap.add_argument("--timeout", type=float, default=30.0, help="client timeout (s): a failure")
    ap.add_argument("--rss-interval", type=float, default=2.0)
    ap.add_argument(
        "--memory-log",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="have the server log where its memory sits (SCDB_MEMORY_LOG) for the report",
    )
    ap.add_argument("--memory-log-interval", type=float, default=10.0)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument(
        "--server-env", action="append", default=[], help="KEY=VALUE for the server (repeatable)"
    )
    ap.add_argument("--out", type=Path, default=RESULTS)
    ap.add_argument("--dataset", type=Path, help=argparse.SUPPRESS)
    evaldir.add_argument(ap)
    args = ap.parse_args(argv)
    args.dataset = evaldir.dataset_arg(args, "scifact")

    def stop(signum: int, _frame: Any) -> None:  # run the finally below: stop the server
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, stop)
    docs, queries = load_scifact(args.dataset, args.scifact_docs)
    texts = [d["text"] for d in docs]
    data_dir = Path(tempfile.mkdtemp(prefix="scdb-bench-load-"))
    log_dir = Path(tempfile.mkdtemp(prefix="scdb-bench-log-"))
    extra = list(args.server_env)
    if args.memory_log:
        extra += [
            f"SCDB_MEMORY_LOG={log_dir / 'memory.jsonl'}",
            f"SCDB_MEMORY_LOG_INTERVAL_S={args.memory_log_interval}",
        ]
    server = Server(data_dir, free_port(), log_dir / "server.log", server_env(extra))
    try:
        server.start()
        assert server.proc is not None
        with httpx.Client(base_url=server.url, timeout=120.0) as c:
            st = setup(c, docs, args.principals)
        out = asyncio.run(drive(args, server.url, server.proc.pid, st, queries[:300], texts))
        alive = server.proc.poll() is None
        memlog = read_memlog(log_dir / "memory.jsonl")
    except BaseException:
        print(f"server log tail:\n{server.log_tail()}", file=sys.stderr)
        raise
    finally:
        server.stop()
        shutil.rmtree(log_dir, ignore_errors=True)
        shutil.rmtree(data_dir, ignore_errors=True)

    rows = out["levels"] + [out["overload"]]
    shed = [r["retry_after_share"] for r in rows if r["retry_after_share"] is not None]
    rep: dict[str, Any] = {
        "benchmark": "load",
        "generated_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": command("load", argv if argv is not None else sys.argv[1:]),
        "config": {
            "levels": [int(x) for x in args.levels.split(",")],
            "level_seconds": args.level_seconds,
            "overload_seconds": args.overload_seconds,
            "mix": dict(zip(OPS, [float(x) for x in args.mix.split(",")], strict=True)),
            "principals": args.principals,
            "ingest_pool": args.ingest_pool,
            "retry_cap_s": args.retry_cap,
            "timeout_s": args.timeout,
            "rss_interval_s": args.rss_interval,
            "server_env": {
                k: v
                for k, v in server.env.items()
                if k.startswith("SCDB_") and k != "SCDB_AUDIT_KEY"
            },
        },
        "environment": {
            "git_commit": git_commit(),
            "python": platform.python_version(),
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
        },
        "setup": {k: v for k, v in st.items() if k != "keys"},
        **out,
        "memory_log": memlog,
    }
    ov = rep["overload"]
    ov["memory"]["log_window"] = memlog_window(
        memlog,
        out["wall0"] + ov["t_start"] + ov["memory"].get("warmup_s", 0.0),
        out["wall0"] + ov["t_end"] + args.memory_log_interval,
    )
    rep["verdict"] = {
        "server_alive": alive,
        "no_failures": all(r["failures"] == 0 for r in rows),
        "no_timeouts": all(r["timeouts"] == 0 for r in rows),
        "no_5xx_but_503": all(r["server_errors_non_503"] == 0 for r in rows),
        "retry_after_on_all_429_503": all(s == 1.0 for s in shed),
        "memory_flat_10pct": rep["overload"]["memory"].get("flat_within_10pct"),
        "consistent": not rep["consistency"]["violations"],
    }
    args.out.mkdir(parents=True, exist_ok=True)
    note = plot(rep, args.out / "load.png")
    if note:
        rep["plot"] = note
    write_report(args.out, "load", rep, markdown(rep), indent=1)
    print(level_rows(rows))
    print(json.dumps(rep["overload"]["memory"]))
    print(json.dumps({k: v for k, v in rep["consistency"].items() if k != "violations"}))
    print(json.dumps(rep["verdict"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
