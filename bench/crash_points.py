"""Crash harness: SIGKILL a real server at every registered fault point, restart it, verify.

For each point of ``superchargedb.faults.KNOWN_POINTS`` it copies a seeded data dir, starts
``superchargedb serve`` on a free loopback port with ``SCDB_CRASH_AT=<point>:<n>``, drives
concurrent ingest, delete, doc PUT/PATCH, object PUT and (for the job points) real OCR jobs from
several client threads until the process dies by SIGKILL at that point (a point not reached in
time is a failure), restarts it without the crash and runs ``crash_checks``. Points of the
``startup`` phase crash the restart after an unnamed SIGKILL under load; ``shutdown`` points crash
a SIGTERM'd server on its way out; ``worker.after_job`` crashes an external ``superchargedb
worker``.

    .venv/bin/python -m bench.crash_points [--points 'jobs.*,audit.*'] [--parallel 2]

Writes bench/results/crash_points.json and .md.
"""

from __future__ import annotations

import argparse
import contextlib
import fnmatch
import json
import os
import platform
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import superchargedb  # noqa: F401  (onnxruntime before usearch)
from bench import crash_checks
from bench.crash_workload import Model, Work, drive
from superchargedb import faults

REPO = Path(__file__).resolve().parent.parent
CKPT = {"SCDB_CHECKPOINT_EVERY": "4"}  # checkpoints (and outbox GC, compaction) every 4 ops
CHECKED = (
    "died by SIGKILL at the named point (marker file); restart becomes ready",
    "every document shows an allowed state: acknowledged writes present, acknowledged deletes and "
    "replaces gone, the in-flight operation either applied whole or not at all",
    "an unacknowledged ingest batch is all or nothing",
    "every visible Unit: GET /v1/units/{id}, found by lexical AND dense search",
    "objects read back byte-exact (unacknowledged: absent or complete)",
    "jobs finish exactly once: done with its doc's Units == the job's output, no duplicates; "
    "failed jobs leave no Units and release the quota",
    "audit: every Unit, acknowledged delete, ACL change, object and job is in the chain; head "
    "== last record; `superchargedb audit verify` passes (with the signed anchor)",
    "doctor: SQLite integrity, FTS5 vs content, catalog ids == vector index ids (per plane) "
    "== lexical (sparse) index ids",
)


@dataclass
class Scenario:
    nth: int = 3
    work: Work = field(default_factory=Work)
    env: dict[str, str] = field(default_factory=dict)
    topology: str = "server"  # "worker": the point fires in an external worker process
    prep: str = ""  # "drop_index" / "drop_lexical": index files lost before the crashing start
    reach_s: float = 45.0


def _jobs(media: str = "ocr", **kw: Any) -> Work:
    return Work(clients=2, max_iters=4, media=media, media_per_client=2, **kw)


# Points that need their own hit count, load or settings; the rest follow scenario()'s rules.
SPECIAL: dict[str, Scenario] = {
    "sync.before_apply": Scenario(nth=4),
    "sync.after_apply": Scenario(nth=4),
    "sync.after_checkpoint": Scenario(nth=2, env=CKPT),
    "sync.after_gc": Scenario(nth=2, env=CKPT),
    "vectors.rebuild.mid": Scenario(nth=1, prep="drop_index"),
    "vectors.apply.before_add": Scenario(nth=4),
    "vectors.apply.after_add": Scenario(nth=4),
    "vectors.compact.before_swap": Scenario(nth=1, env=CKPT, work=Work(delete_every=1)),
    "vectors.compact.after_swap": Scenario(nth=1, env=CKPT, work=Work(delete_every=1)),
    "sparse.apply.before": Scenario(nth=4),
    "sparse.apply.after": Scenario(nth=4),
    "sparse.rebuild.batch": Scenario(nth=1, prep="drop_lexical"),
    "jobs.enqueue.after_insert": Scenario(nth=2, work=_jobs(), reach_s=90),
    "jobs.heartbeat.after_update": Scenario(nth=1, work=_jobs("big"), reach_s=120),
    "jobs.fail.requeue": Scenario(
        nth=1, work=_jobs(), env={"SCDB_MEDIA_TIMEOUT_S": "0.01"}, reach_s=90
    ),
    "jobs.fail.final": Scenario(nth=1, work=_jobs("blank"), reach_s=90),
    "jobs.release_quota.after_delete": Scenario(nth=1, work=_jobs("blank"), reach_s=90),
    "jobs.fail.after_commit": Scenario(nth=1, work=_jobs("blank"), reach_s=90),
    "worker.after_job": Scenario(nth=1, work=_jobs(), topology="worker", reach_s=120),
    "catalog.before_commit": Scenario(nth=6),
    "catalog.after_commit": Scenario(nth=6),
    "ingest.write.after_unit": Scenario(nth=5),
    "ingest.replace.after_delete": Scenario(nth=2),
    "ingest.enqueue.after_reserve": Scenario(nth=2, work=_jobs(), reach_s=90),
    "ingest.after_commit": Scenario(nth=4),
    "ingest.after_apply": Scenario(nth=4),
    "audit.before_append": Scenario(nth=6),
    "audit.after_record": Scenario(nth=6),
    "audit.after_head": Scenario(nth=6),
}


def scenario(name: str) -> Scenario:
    """How to reach a point: its hit count, the load, and extra settings for the crash run."""
    if name in SPECIAL:
        return SPECIAL[name]
    fp = faults.BY_NAME[name]
    if fp.phase == "shutdown":
        return Scenario(nth=1, work=Work(max_iters=3))
    if fp.phase == "startup":
        return Scenario(nth=1)
    if fp.area == "jobs":
        return Scenario(nth=1, work=_jobs(), reach_s=90)
    if name.startswith(("vectors.checkpoint.", "sparse.checkpoint.")):
        return Scenario(nth=2, env=CKPT)
    if fp.area in ("delete", "acl", "objects") or name.startswith("vectors.apply."):
        return Scenario(nth=2)
    return Scenario(nth=3)


# Negative controls: damage the data dir between the crash and the restart; the checks must
# then fail (proof that they can). Not used in a normal run.
SABOTAGE = {
    "outbox": "DELETE FROM outbox",  # committed ops never reach the indexes
    "audit": "DELETE FROM audit_log WHERE seq = (SELECT MAX(seq) FROM audit_log)",
    "unit": "DELETE FROM units WHERE id = (SELECT MAX(id) FROM units WHERE doc_id LIKE 'c_-b%')",
}

_ports_lock = threading.Lock()
_ports: set[int] = set()


def free_port() -> int:
    with _ports_lock:
        while True:
            with socket.socket() as sock:
                sock.bind(("127.0.0.1", 0))
                port = int(sock.getsockname()[1])
            if port not in _ports:
                _ports.add(port)
                return port


class Child:
    """A process forked by the fork server, with the part of Popen's API the harness uses."""

    def __init__(self, server: ForkServer, pid: int) -> None:
        self.server, self.pid = server, pid

    @property
    def returncode(self) -> int | None:
        return self.server.rc.get(self.pid)

    def poll(self) -> int | None:
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        with self.server.cond:
            if not self.server.cond.wait_for(lambda: self.pid in self.server.rc, timeout):
                raise subprocess.TimeoutExpired(f"pid {self.pid}", timeout or 0)
        return self.server.rc[self.pid]

    def send_signal(self, sig: int) -> None:
        if self.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, sig)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


class ForkServer:
    """Client of ``bench/forkserver.py``: each start skips the package imports (~2 s of CPU)."""

    def __init__(self) -> None:
        self.p = subprocess.Popen(
            [sys.executable, str(Path(__file__).with_name("forkserver.py"))],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            cwd=REPO,
        )
        self.cond = threading.Condition()
        self.pids: dict[int, int] = {}
        self.rc: dict[int, int] = {}
        self._next = 0
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.p.stdout is not None
        for line in self.p.stdout:
            msg = json.loads(line)
            with self.cond:
                if "id" in msg:
                    self.pids[msg["id"]] = msg["pid"]
                else:
                    self.rc[msg["pid"]] = msg["rc"]
                self.cond.notify_all()

    def spawn(self, argv: list[str], env: dict[str, str], log: Path) -> Child:
        assert self.p.stdin is not None
        with self.cond:
            self._next += 1
            rid = self._next
            req = {"id": rid, "argv": argv, "env": env, "log": str(log), "cwd": str(REPO)}
            self.p.stdin.write((json.dumps(req) + "\n").encode())
            self.p.stdin.flush()
            if not self.cond.wait_for(lambda: rid in self.pids, 60):
                raise RuntimeError("fork server did not answer")
            return Child(self, self.pids[rid])

    def close(self) -> None:
        if self.p.stdin is not None:
            self.p.stdin.close()
        self.p.wait(30)


_forks: ForkServer | None = None  # set by run_all; None: plain subprocesses


def spawn(argv: list[str], env: dict[str, str], log: Path) -> Any:
    """Start ``superchargedb <argv>`` with its output appended to ``log``."""
    if _forks is not None:
        return _forks.spawn(argv, env, log)
    with open(log, "ab") as fh:
        cmd = [sys.executable, "-m", "superchargedb.cli.main", *argv]
        return subprocess.Popen(cmd, env=env, stdout=fh, stderr=subprocess.STDOUT, cwd=REPO)


class Proc:
    """``superchargedb serve`` (or ``worker``) over a data dir, its output in a log file."""

    def __init__(
        self, data: Path, env: dict[str, str], log: Path, cmd: str = "serve", *extra: str
    ) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        argv = [cmd, "--data", str(data)]
        if cmd == "serve":
            argv += ["--port", str(self.port), *extra]
        self.log = log
        self.p = spawn(argv, env, log)

    def ready(self, timeout: float = 90) -> bool:
        """True once /readyz answers 200; False if the process exits first."""
        import httpx

        deadline = time.monotonic() + timeout
        with httpx.Client(timeout=2) as c:  # one client: each new one builds an SSL context
            while time.monotonic() < deadline:
                if self.p.poll() is not None:
                    return False
                try:
                    if c.get(self.url + "/readyz").status_code == 200:
                        return True
                except httpx.HTTPError:
                    pass
                time.sleep(0.1)
        return False

    def wait(self, timeout: float) -> int | None:
        try:
            return self.p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None

    def kill(self) -> None:
        if self.p.poll() is None:
            self.p.kill()
        self.p.wait()

    def terminate(self, timeout: float = 60) -> int:
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGTERM)
            if self.wait(timeout) is None:
                self.kill()
        return int(self.p.returncode)

    def tail(self, n: int = 15) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""


def base_env(cfg_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("SCDB_CRASH_AT", "SCDB_CRASH_MARK")}
    env.update(
        SCDB_AUDIT_KEY=os.environ.get("SCDB_AUDIT_KEY", "11" * 32),
        XDG_CONFIG_HOME=str(cfg_dir),  # the audit anchors live here, outside the data dirs
        SCDB_RATE_KEY_RPS="0",
        SCDB_RATE_IP_RPS="0",
        SCDB_JOB_LEASE_S="3",  # a job leased by the dead process is taken over 3 s later
        SCDB_EMBED_THREADS="1",
        SCDB_MEDIA_THREADS="1",
    )
    return env


def make_seed(root: Path, env: dict[str, str]) -> Path:
    """A data dir with the demo principals and corpus, closed cleanly."""
    data = root / "seed"
    srv = Proc(data, env, root / "seed.log", "serve", "--demo")
    if not srv.ready(180):
        raise RuntimeError(f"seed server did not start: {srv.tail()}")
    if srv.terminate() != 0:
        raise RuntimeError(f"seed server did not stop cleanly: {srv.tail()}")
    return data


def crash_phase(name: str, sc: Scenario, data: Path, d: Path, env: dict[str, str], model: Model):
    """Run until the process dies at ``name``; returns (reached, detail)."""
    fp = faults.BY_NAME[name]
    mark = d / "mark"
    crash_env = {**env, **sc.env, "SCDB_CRASH_AT": f"{name}:{sc.nth}", "SCDB_CRASH_MARK": str(mark)}
    stop = threading.Event()
    threads: list[threading.Thread] = []
    victim: Proc | None = None
    others: list[Proc] = []
    try:
        if fp.phase == "startup":
            pre = Proc(data, {**env, "SCDB_CHECKPOINT_EVERY": "100000"}, d / "server.log")
            others.append(pre)
            if not pre.ready():
                return False, f"pre-crash server did not start: {pre.tail()}"
            work = Work(max_iters=4)
            threads = drive(pre.url, work, model, stop)
            deadline = time.monotonic() + 30
            while model.ops["ingest_units"] < 9 and time.monotonic() < deadline:
                time.sleep(0.05)
            pre.kill()  # an unnamed crash under load leaves an outbox to replay
            for t in threads:
                t.join(30)
            if sc.prep == "drop_index":  # the vector index files are lost
                for f in (data / "index").glob("*.usearch"):
                    f.unlink()
            if sc.prep == "drop_lexical":  # the lexical index state is lost
                for f in (data / "lexical").glob("state.*.npz"):
                    f.unlink()
            victim = Proc(data, crash_env, d / "server.log")
            victim.ready(sc.reach_s)
        elif sc.topology == "worker":
            srv = Proc(data, {**env, "SCDB_JOB_WORKERS": "0"}, d / "server.log")
            others.append(srv)
            if not srv.ready():
                return False, f"server did not start: {srv.tail()}"
            victim = Proc(data, crash_env, d / "worker.log", cmd="worker")
            threads = drive(srv.url, sc.work, model, stop)
            victim.wait(sc.reach_s)
            stop.set()
            for t in threads:
                t.join(60)
            srv.terminate()
        else:
            victim = Proc(data, crash_env, d / "server.log")
            if victim.ready():
                threads = drive(victim.url, sc.work, model, stop)
                if fp.phase == "shutdown":
                    for t in threads:
                        t.join(sc.reach_s)
                    victim.p.send_signal(signal.SIGTERM)
                victim.wait(sc.reach_s)
        rc = victim.p.poll()
        where = mark.read_text() if mark.exists() else None
        if rc == -signal.SIGKILL and where == name:
            return True, "killed at the point"
        return False, f"not reached (rc={rc}, marker={where}): {victim.tail(6)}"
    finally:
        stop.set()
        for p in [*others, *([victim] if victim else [])]:
            p.kill()
        for t in threads:
            t.join(60)


def run_point(
    name: str, seed: Path, root: Path, env: dict[str, str], embedder: Any, sabotage: str = ""
) -> dict:
    fp = faults.BY_NAME[name]
    sc = scenario(name)
    d = root / name
    data = d / "data"
    shutil.copytree(seed, data)
    model = Model()
    problems: list[str] = []
    checked: Counter[str] = Counter()
    t0 = time.monotonic()
    reached, detail = crash_phase(name, sc, data, d, env, model)
    t1 = time.monotonic()
    restart_s = check_s = 0.0
    leftovers: dict[str, int] = {}
    if reached and sabotage:
        conn = sqlite3.connect(data / "catalog.db")
        with conn:
            conn.execute(SABOTAGE[sabotage])
        conn.close()
    if not reached:
        problems.append(detail)
    else:
        srv = Proc(data, env, d / "restart.log")
        ok = srv.ready(120)
        restart_s = time.monotonic() - t1
        if not ok:
            problems.append(f"restart failed: {srv.tail()}")
            srv.kill()
        else:
            left = crash_checks.settle_jobs(data / "catalog.db", 120)
            if left:
                problems.append(f"{left} jobs still queued/running 120 s after the restart")
            online = crash_checks.Online(srv.url, problems, checked)
            try:
                online.check_docs(model)
                online.check_objects(model)
                online.check_jobs(model, retry_ok="SCDB_MEDIA_TIMEOUT_S" in sc.env)
            finally:
                online.close()
            rc = srv.terminate()
            if rc != 0:
                problems.append(f"restarted server exited with {rc} on SIGTERM: {srv.tail()}")
            crash_checks.check_catalog(data / "catalog.db", model, problems, checked)
            crash_checks.audit_verify_cli(data, env, problems, spawn, d / "audit.log")
            checked.update(
                {f"doctor_{k}": 1 for k, v in crash_checks.doctor(data, embedder, problems).items()}
            )
            check_s = time.monotonic() - t1 - restart_s
            leftovers = crash_checks.leaks(data)
    problems += [f"unexpected response during the load: {e}" for e in model.errors]
    return {
        "name": name,
        "area": fp.area,
        "phase": fp.phase,
        "state": fp.state,
        "scenario": {
            "crash_at": f"{name}:{sc.nth}",
            "ops": sorted(sc.work.ops) + ([f"media:{sc.work.media}"] if sc.work.media else []),
            "clients": sc.work.clients,
            "env": sc.env,
            "topology": sc.topology,
            "prep": sc.prep,
        },
        "status": "pass" if not problems else "fail",
        "problems": problems[:20],
        "acked": dict(model.ops),
        "in_flight": model.in_flight,
        "checked": dict(checked),
        "leftovers": leftovers,
        "crash_s": round(t1 - t0, 2),
        "restart_s": round(restart_s, 2),
        "check_s": round(check_s, 2),
        "total_s": round(time.monotonic() - t0, 2),
    }


def select(patterns: str | None) -> list[str]:
    names = [p.name for p in faults.KNOWN_POINTS]
    if not patterns:
        return names
    pats = [p.strip() for p in patterns.split(",") if p.strip()]
    return [n for n in names if any(fnmatch.fnmatchcase(n, p) for p in pats)]


def run_all(
    names: list[str],
    parallel: int = 2,
    workdir: Path | None = None,
    forks: bool = True,
    sabotage: str = "",
) -> dict[str, Any]:
    """Run ``names`` (at most ``parallel`` at once); returns the report."""
    from tqdm import tqdm

    from superchargedb.models.embedder import make_embedder

    root = Path(workdir or tempfile.mkdtemp(prefix="scdb-crash-"))  # kept only with workdir
    cfg = root / "config"
    cfg.mkdir(parents=True, exist_ok=True)
    env = base_env(cfg)
    # The in-process doctor reads the audit key and the anchor dir from the environment.
    saved = {k: os.environ.get(k) for k in ("SCDB_AUDIT_KEY", "XDG_CONFIG_HOME")}
    os.environ.update(SCDB_AUDIT_KEY=env["SCDB_AUDIT_KEY"], XDG_CONFIG_HOME=str(cfg))
    t0 = time.monotonic()
    global _forks
    _forks = ForkServer() if forks else None
    results = []
    try:
        seed = make_seed(root, env)
        embedder = make_embedder("minilm-int8")
        with ThreadPoolExecutor(max_workers=parallel) as pool:
            futs = {
                pool.submit(run_point, n, seed, root, env, embedder, sabotage): n for n in names
            }
            for fut in tqdm(as_completed(futs), total=len(futs), desc="crash points", unit="pt"):
                try:
                    results.append(fut.result())
                except Exception as exc:  # a harness error fails that point, not the run
                    fp = faults.BY_NAME[futs[fut]]
                    results.append(
                        {"name": fp.name, "area": fp.area, "phase": fp.phase, "status": "fail",
                         "problems": [f"harness error: {type(exc).__name__}: {exc}"],
                         "total_s": 0}
                    )  # fmt: skip
    finally:
        if _forks is not None:
            _forks.close()
            _forks = None
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        if workdir is None:
            shutil.rmtree(root, ignore_errors=True)
    order = {n: i for i, n in enumerate(names)}
    results.sort(key=lambda r: order[r["name"]])
    by_area: dict[str, dict[str, int]] = {}
    for r in results:
        a = by_area.setdefault(r["area"], {"points": 0, "passed": 0})
        a["points"] += 1
        a["passed"] += r["status"] == "pass"
    return {
        "generated_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "load_avg_at_end": os.getloadavg(),
        },
        "parallel": parallel,
        "sabotage": sabotage or None,
        "registered_points": len(faults.KNOWN_POINTS),
        "run_points": len(results),
        "passed": sum(r["status"] == "pass" for r in results),
        "failed": sum(r["status"] != "pass" for r in results),
        "by_area": by_area,
        "total_s": round(time.monotonic() - t0, 1),
        "checked": list(CHECKED),
        "points": results,
    }


def write_report(report: dict[str, Any], out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "crash_points.json").write_text(json.dumps(report, indent=2) + "\n")
    lines = [
        "# Crash points: SIGKILL at every registered fault point, restart, verify",
        "",
        f"{report['generated_at']}; {report['machine']['cpus']} CPUs (shared, timings noisy); "
        f"{report['parallel']} points at a time; total {report['total_s']} s.",
        "",
        f"**{report['passed']} / {report['run_points']} passed** "
        f"({report['registered_points']} points registered in `superchargedb.faults`).",
        "",
        "| area | points | passed |",
        "|---|---:|---:|",
        *[f"| {a} | {v['points']} | {v['passed']} |" for a, v in report["by_area"].items()],
        "",
        '"left over": upload temp files, blobs without a catalog row and index temp files the '
        "crash left in the data dir (space, not data: reported, not failed).",
        "",
        "Checked after each restart:",
        "",
        *[f"- {c}" for c in report["checked"]],
        "",
        "| point | area | phase | crash at | result | acked | in flight | searches | left over "
        "| s |",
        "|---|---|---|---|---|---|---:|---:|---|---:|",
    ]
    for r in report["points"]:
        acked = ", ".join(f"{k} {v}" for k, v in sorted(r.get("acked", {}).items()))
        ch = r.get("checked", {})
        searches = ch.get("search_lexical", 0) + ch.get("search_dense", 0)
        left = ", ".join(f"{k} {v}" for k, v in r.get("leftovers", {}).items() if v)
        lines.append(
            f"| `{r['name']}` | {r['area']} | {r['phase']} | "
            f"`{r.get('scenario', {}).get('crash_at', '')}` | **{r['status']}** | {acked} | "
            f"{len(r.get('in_flight', []))} | {searches} | {left} | {r['total_s']} |"
        )
    fails = [r for r in report["points"] if r["status"] != "pass"]
    if fails:
        lines += ["", "## Failures", ""]
        for r in fails:
            lines += [f"- `{r['name']}`:", *[f"  - {p}" for p in r["problems"]]]
    (out / "crash_points.md").write_text("\n".join(lines) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--points", help="comma-separated names or globs (default: all)")
    ap.add_argument("--parallel", type=int, default=2)
    ap.add_argument("--out", type=Path, default=REPO / "bench" / "results")
    ap.add_argument("--workdir", type=Path, help="keep data dirs and logs here")
    ap.add_argument("--sabotage", choices=sorted(SABOTAGE), help="negative control: must fail")
    args = ap.parse_args()
    names = select(args.points)
    if not names:
        sys.exit(f"no point matches {args.points!r}")
    report = run_all(names, min(args.parallel, 2), args.workdir, sabotage=args.sabotage or "")
    if not args.sabotage:
        write_report(report, args.out)
    print(f"{report['passed']}/{report['run_points']} passed in {report['total_s']} s")
    for r in report["points"]:
        if r["status"] != "pass":
            print(f"FAIL {r['name']}: {r['problems'][:3]}")
    sys.exit(0 if report["failed"] == 0 else 1)


if __name__ == "__main__":
    main()
