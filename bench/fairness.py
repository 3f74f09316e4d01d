"""Fairness benchmark: one tenant floods every request class; another tenant's latency.

Starts ``superchargedb serve --demo`` (default settings) over a fresh data dir, with one more
principal made by the operator CLI beforehand: ``mallory``, read/write, in its own tenant
``evil``. The victim is ``alice`` (tenant ``acme``), one client from another loopback address
(127.0.0.2) that searches, answers (extractive), ingests a small Unit and lists documents, in
turn, at ``--victim-rps`` requests a second (default 20: well within its key's rate limit, so
its latency is measured, not its own 429s; a request that runs late starts the next at once).

1. Unloaded: the victim alone for ``--baseline-seconds``.
2. Flood: mallory holds 64 connections per class (search, answer, ingest, other): half stalled
   (a request head, one body byte, then silence; reconnecting after each 408), half sending
   back-to-back requests (bench/flood.py), for ``--seconds`` (default 120), while the victim
   keeps going. The flood runs in a child process: in the victim's interpreter its event loop
   would share the victim's GIL, and the victim would time its own client.

Reported per class: the victim's p50/p95 latency unloaded and under the flood, their ratio
(goal: within 2x), and its statuses (goal: no 503); the flood's own statuses. Writes
``<out>/fairness.json`` and ``<out>/fairness.md``.

    .venv/bin/python -m bench.fairness                       # ~3 min
    .venv/bin/python -m bench.fairness --seconds 5 --baseline-seconds 5   # smoke
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import platform
import secrets
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from bench import flood
from bench.common.env import git_commit
from bench.common.paths import RESULTS
from bench.common.report import command, write_report
from bench.common.server import Server, free_port

REPO = Path(__file__).resolve().parent.parent
VICTIM_KEY = "aegis_sk_alice"
VICTIM_ADDRESS = "127.0.0.2"
CLASSES = ("search", "answer", "ingest", "other")
QUERIES = [
    "how does failover work?",
    "what is the on-call rotation?",
    "how are backups verified?",
    "beta pricing tiers",
]


def server_env(extra: list[str]) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("OPENAI_API_KEY", "OPENAI_BASE_URL") and not k.startswith("SCDB_")
    }
    env["SCDB_AUDIT_KEY"] = os.environ.get("SCDB_AUDIT_KEY") or secrets.token_hex(32)
    env["SCDB_ANSWER_PROVIDERS"] = "openai"  # without a key it is skipped: extractive answers
    env["XDG_CONFIG_HOME"] = tempfile.mkdtemp(prefix="scdb-bench-config-")
    for kv in extra:
        k, _, v = kv.partition("=")
        env[k] = v
    return env


def make_attacker(data_dir: Path, env: dict[str, str]) -> str:
    """The flooding principal, made by the operator CLI before the server owns the data dir."""
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "superchargedb.cli.main",
            "keys",
            "create",
            "--data",
            str(data_dir),
            "--principal",
            "mallory",
            "--scopes",
            "evil",
            "--active-scope",
            "evil",
            "--perms",
            "read,write",
            "--tier",
            "pro",
        ],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    return str(json.loads(out.stdout)["key"])


class Victim:
    """One client cycling through the four classes at ``rps`` requests a second."""

    def __init__(self, url: str, rps: float) -> None:
        self.url = url
        self.interval = 1.0 / rps
        self.samples: dict[str, list[tuple[float, int]]] = defaultdict(list)  # class -> (ms, st)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _one(self, c: httpx.Client, cls: str, i: int) -> httpx.Response:
        q = QUERIES[i % len(QUERIES)]
        if cls == "search":
            return c.post("/v1/search", json={"q": q})
        if cls == "answer":
            return c.post("/v1/answer", json={"q": q})
        if cls == "ingest":
            unit = {"doc_id": f"victim-{i % 20}", "text": f"victim note {i}: {q}"}
            return c.post("/v1/ingest", json={"units": [unit]})
        return c.get("/v1/docs")

    def _run(self) -> None:
        headers = {"Authorization": f"Bearer {VICTIM_KEY}"}
        # Another client address than the flood's (all of 127/8 is loopback): per-address
        # limits are meant to tell clients apart, and here they can.
        transport = httpx.HTTPTransport(local_address=VICTIM_ADDRESS)
        with httpx.Client(base_url=self.url, headers=headers, timeout=60, transport=transport) as c:
            i = 0
            due = time.perf_counter()
            while not self._stop.is_set():
                i += 1
                for cls in CLASSES:
                    # Paced, not closed-loop: a victim faster than its own rate limit would
                    # measure its 429s. Late requests do not bunch up (no catching up).
                    wait = due - time.perf_counter()
                    if wait > 0 and self._stop.wait(wait):
                        return
                    due = max(due, time.perf_counter() - self.interval) + self.interval
                    t0 = time.perf_counter()
                    try:
                        status = self._one(c, cls, i).status_code
                    except httpx.TimeoutException:
                        status = 0
                    except httpx.TransportError:
                        status = -1
                    self.samples[cls].append(((time.perf_counter() - t0) * 1000, status))

    def run_for(self, seconds: float) -> dict[str, list[tuple[float, int]]]:
        self._thread.start()
        self._stop.wait(seconds)
        self._stop.set()
        self._thread.join()
        return dict(self.samples)


def _flood_child(port: int, key: str, stalled: int, back_to_back: int, conn: Any) -> None:
    """Runs the flood in its own interpreter until told to stop; sends back its counts."""
    with flood.Flood(
        port, key, flood.standard_targets("evil"), stalled=stalled, back_to_back=back_to_back
    ) as f:
        conn.send("started")
        conn.recv()
        counts, errors = f.snapshot(), dict(f.errors)
    conn.send((dict(counts), errors))


class FloodProcess:
    """The flood in a child process: a client sharing the victim's interpreter would put the
    flood's event loop on the victim's GIL, and the victim would time its own client."""

    def __init__(self, port: int, key: str, stalled: int, back_to_back: int) -> None:
        ctx = multiprocessing.get_context("spawn")
        self._conn, child = ctx.Pipe()
        self._proc = ctx.Process(
            target=_flood_child, args=(port, key, stalled, back_to_back, child), daemon=True
        )

    def __enter__(self) -> FloodProcess:
        self._proc.start()
        if self._conn.recv() != "started":
            raise RuntimeError("the flood process did not start")
        return self

    def stop(self) -> tuple[Counter[tuple[str, str, int]], dict[tuple[str, str], int]]:
        self._conn.send("stop")
        counts, errors = self._conn.recv()
        return Counter(counts), errors

    def __exit__(self, *exc: object) -> None:
        self._proc.join(timeout=30)
        if self._proc.is_alive():
            self._proc.kill()


def summary(samples: list[tuple[float, int]]) -> dict[str, Any]:
    ok = [ms for ms, st in samples if st == 200]
    statuses = Counter(str(st) for _, st in samples)
    out: dict[str, Any] = {"requests": len(samples), "statuses": dict(sorted(statuses.items()))}
    if ok:
        out["p50_ms"] = round(float(np.percentile(ok, 50)), 1)
        out["p95_ms"] = round(float(np.percentile(ok, 95)), 1)
    return out


def markdown(rep: dict[str, Any]) -> str:
    lines = [
        "# Fairness: one tenant floods every class, another tenant's latency",
        "",
        f"Generated {rep['generated_at']} at commit `{rep['environment']['git_commit']}` "
        f"(`{rep['command']}`), {rep['environment']['cpus']} CPUs, load average at the end "
        f"{rep['environment']['loadavg_at_end'][0]:.1f}. Server settings: defaults, plus "
        f"{rep['config']['server_env'] or 'nothing'}.",
        "",
        f"Flood (a child process): one key, {rep['config']['stalled']} stalled + "
        f"{rep['config']['back_to_back']} "
        f"back-to-back connections per class for {rep['config']['seconds']:g} s. Victim: one "
        f"client of another tenant at {rep['config'].get('victim_rps', 'max')} requests/s "
        "(search, extractive answer, small ingest, list documents in turn), unloaded for "
        f"{rep['config']['baseline_seconds']:g} s first.",
        "",
        "| class | unloaded p50 / p95 (ms) | flooded p50 / p95 (ms) | ratio p50 / p95 "
        "| victim statuses (flooded) |",
        "|---|---|---|---|---|",
    ]
    for cls in CLASSES:
        b, f, r = rep["unloaded"][cls], rep["flooded"][cls], rep["ratio"][cls]
        lines.append(
            f"| {cls} | {b.get('p50_ms')} / {b.get('p95_ms')} | {f.get('p50_ms')} / "
            f"{f.get('p95_ms')} | {r['p50']} / {r['p95']} | {f['statuses']} |"
        )
    lines += [
        "",
        "Flood statuses (class, kind: status counts):",
        "",
    ]
    for key, counts in sorted(rep["flood"]["statuses"].items()):
        lines.append(f"- {key}: {counts}")
    v = rep["verdict"]
    lines += [
        "",
        f"Verdict: victim never refused (503): **{v['victim_no_503']}**; every class within 2x "
        f"(p50 and p95): **{v['within_2x']}**.",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--seconds", type=float, default=120.0, help="flood duration")
    ap.add_argument("--baseline-seconds", type=float, default=40.0, help="victim alone")
    ap.add_argument("--stalled", type=int, default=32, help="stalled connections per class")
    ap.add_argument("--back-to-back", type=int, default=32, help="busy connections per class")
    ap.add_argument("--victim-rps", type=float, default=20.0, help="the victim's request rate")
    ap.add_argument("--out", type=Path, default=RESULTS)
    ap.add_argument(
        "--server-env", action="append", default=[], metavar="K=V", help="server setting"
    )
    args = ap.parse_args(argv)

    data_dir = Path(tempfile.mkdtemp(prefix="scdb-bench-fair-"))
    log_dir = Path(tempfile.mkdtemp(prefix="scdb-bench-fair-log-"))
    env = server_env(args.server_env)
    server = Server(data_dir, free_port(), log_dir / "server.log", env)
    try:
        key = make_attacker(data_dir, env)
        server.start()
        with httpx.Client(base_url=server.url, timeout=60) as c:
            r = c.post(
                "/v1/ingest",
                headers={"Authorization": f"Bearer {key}"},
                json={"units": [{"doc_id": "flood-0", "text": "flood note"}]},
            )
            r.raise_for_status()
        unloaded = Victim(server.url, args.victim_rps).run_for(args.baseline_seconds)
        with FloodProcess(server.port, key, args.stalled, args.back_to_back) as f:
            flooded = Victim(server.url, args.victim_rps).run_for(args.seconds)
            flood_counts, flood_errors = f.stop()
        alive = server.proc is not None and server.proc.poll() is None
    except BaseException:
        print(f"server log tail:\n{server.log_tail()}", file=sys.stderr)
        raise
    finally:
        server.stop()
        shutil.rmtree(data_dir, ignore_errors=True)
        shutil.rmtree(log_dir, ignore_errors=True)

    base = {cls: summary(unloaded.get(cls, [])) for cls in CLASSES}
    load = {cls: summary(flooded.get(cls, [])) for cls in CLASSES}

    def ratio(cls: str, k: str) -> float | None:
        a, b = base[cls].get(k), load[cls].get(k)
        return round(b / a, 2) if a and b else None

    ratios = {cls: {"p50": ratio(cls, "p50_ms"), "p95": ratio(cls, "p95_ms")} for cls in CLASSES}
    by_kind: dict[str, dict[str, int]] = defaultdict(dict)
    for (cls, kind, status), n in sorted(flood_counts.items()):
        by_kind[f"{cls}, {kind}"][str(status)] = n
    rep: dict[str, Any] = {
        "benchmark": "fairness",
        "generated_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": command("fairness", argv if argv is not None else sys.argv[1:]),
        "config": {
            "seconds": args.seconds,
            "baseline_seconds": args.baseline_seconds,
            "stalled": args.stalled,
            "back_to_back": args.back_to_back,
            "victim_rps": args.victim_rps,
            "server_env": dict(kv.partition("=")[::2] for kv in args.server_env),
        },
        "environment": {
            "git_commit": git_commit(),
            "python": platform.python_version(),
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "loadavg_at_end": list(os.getloadavg()),
        },
        "unloaded": base,
        "flooded": load,
        "ratio": ratios,
        "flood": {
            "statuses": by_kind,
            "connection_errors": {str(k): v for k, v in flood_errors.items()},
        },
        "verdict": {
            "server_alive": alive,
            "victim_no_503": all("503" not in load[c]["statuses"] for c in CLASSES),
            "victim_all_200": all(set(load[c]["statuses"]) == {"200"} for c in CLASSES),
            "within_2x": all(
                v is not None and v <= 2.0 for r in ratios.values() for v in r.values()
            ),
        },
    }
    args.out.mkdir(parents=True, exist_ok=True)
    write_report(args.out, "fairness", rep, markdown(rep), indent=1)
    for cls in CLASSES:
        print(
            f"{cls:7s} unloaded p50/p95 {base[cls].get('p50_ms')}/{base[cls].get('p95_ms')} ms"
            f"  flooded {load[cls].get('p50_ms')}/{load[cls].get('p95_ms')} ms"
            f"  ratio {ratios[cls]['p50']}/{ratios[cls]['p95']}  statuses {load[cls]['statuses']}"
        )
    print(json.dumps(rep["verdict"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
