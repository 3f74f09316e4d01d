"""SIGKILL at every registered fault point; restart; nothing acknowledged is lost.

The fast tests keep the registry honest: enough points in the right places, unique names, every
registered point called in the source and every call registered, the kill mechanism itself. The
slow test runs the whole harness (``bench/crash_points.py``): each point against a real server
process under concurrent load, then the restart checks (both search legs, all-or-nothing batches,
catalog ids == index ids, the audit chain, jobs finished exactly once).
"""

from __future__ import annotations

import ast
import os
import signal
import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from conftest import embedded
from superchargedb import faults

REPO = Path(__file__).resolve().parent.parent
SRC = REPO / "src" / "superchargedb"


def called_points() -> dict[str, list[str]]:
    """Every string passed to ``faults.point(...)`` in the package, with where it is."""
    found: dict[str, list[str]] = {}
    for path in SRC.rglob("*.py"):
        if path.name == "faults.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "point"
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id == "faults"
            ):
                names = [
                    n.value
                    for n in ast.walk(node.args[0])
                    if isinstance(n, ast.Constant) and isinstance(n.value, str)
                ]
                assert names, f"{path}:{node.lineno}: a fault point needs a literal name"
                for name in names:
                    found.setdefault(name, []).append(f"{path.relative_to(SRC)}:{node.lineno}")
    return found


def test_registry_size_areas_and_unique_names() -> None:
    names = [p.name for p in faults.KNOWN_POINTS]
    assert len(names) == len(set(names)), [n for n, c in Counter(names).items() if c > 1]
    assert len(names) >= 50
    areas = Counter(p.area for p in faults.KNOWN_POINTS)
    assert areas["index"] >= 10 and areas["jobs"] >= 10, areas
    assert {p.phase for p in faults.KNOWN_POINTS} <= {"run", "startup", "shutdown"}


def test_registry_matches_the_source() -> None:
    calls = called_points()
    registered = set(faults.BY_NAME)
    assert set(calls) - registered == set(), "unregistered fault points in the source"
    assert registered - set(calls) == set(), "registered points with no call site"
    index_files = {"storage/vectors.py", "storage/sqlite/index_sync.py"}
    job_files = {"storage/sqlite/jobs.py", "ingest/jobs_runner.py", "worker.py"}
    where = {n: {w.split(":")[0] for w in ws} for n, ws in calls.items()}
    assert sum(bool(w & index_files) for w in where.values()) >= 10
    assert sum(bool(w & job_files) for w in where.values()) >= 10


def test_every_point_has_a_scenario() -> None:
    from bench import crash_points

    assert crash_points.select(None) == [p.name for p in faults.KNOWN_POINTS]
    for p in faults.KNOWN_POINTS:
        sc = crash_points.scenario(p.name)
        assert sc.nth >= 1 and sc.reach_s > 0
    assert crash_points.select("jobs.fail.*") == [
        "jobs.fail.requeue",
        "jobs.fail.final",
        "jobs.fail.after_commit",
    ]


def test_point_kills_on_the_nth_hit_and_marks_where(tmp_path: Path) -> None:
    mark = tmp_path / "mark"
    code = (
        "from superchargedb import faults\n"
        "faults.point('audit.after_head')\n"
        "print('first hit survived', flush=True)\n"
        "faults.point('catalog.after_commit')\n"
        "faults.point('audit.after_head')\n"
        "print('not reached', flush=True)\n"
    )
    env = {**os.environ, "SCDB_CRASH_AT": "audit.after_head:2", "SCDB_CRASH_MARK": str(mark)}
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert p.returncode == -signal.SIGKILL, p.stderr
    assert p.stdout == "first hit survived\n"
    assert mark.read_text() == "audit.after_head"


def test_every_job_run_heartbeats_by_construction(
    tmp_path: Path, embedder: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The heartbeat point is a step of every job's run, not a race with its timer: with a lease
    so long that the timer never fires (first beat after 200 s), a job that takes well under a
    second still renews its lease once, after its derivation (the crash harness relies on it to
    reach ``jobs.heartbeat.after_update`` on an idle machine)."""
    from fastapi.testclient import TestClient

    from conftest import ALICE, make_service
    from superchargedb.api.app import create_app
    from superchargedb.demo import seed_principals
    from superchargedb.ingest.derive import MediaLimits
    from superchargedb.ingest.jobs_runner import JobRunner
    from test_media_ingest import make_pdf

    svc = make_service(tmp_path / "data", embedder, job_workers=0, job_lease_s=600)
    try:
        seed_principals(svc)
        with TestClient(create_app(svc)) as c:
            key = "acme/alpha/backend/hb.pdf"
            hdr = {**ALICE, "Content-Type": "application/pdf"}
            assert c.put(f"/v1/objects/{key}", headers=hdr, content=make_pdf()).status_code == 201
            unit = {"source_uri": key, "mime": "application/pdf"}
            res = c.post("/v1/ingest", headers=ALICE, json={"units": [unit]}).json()["results"][0]
            assert res["status"] == "queued", res
            seen: list[tuple[str, int]] = []
            beat = embedded(svc).queue.heartbeat

            def heartbeat(job: Any, progress: float) -> None:
                seen.append((threading.current_thread().name, job.attempts))
                beat(job, progress)

            monkeypatch.setattr(embedded(svc).queue, "heartbeat", heartbeat)
            monkeypatch.setattr(faults, "POINTS", set())
            runner = JobRunner(svc.ingestor, svc.writes.jobs, MediaLimits(timeout_s=60))
            assert runner.run_once()
            assert seen == [(threading.current_thread().name, 1)]  # inline, not the timer
            assert "jobs.heartbeat.after_update" in faults.POINTS
            job = c.get(f"/v1/jobs/{res['job_id']}", headers=ALICE).json()
            assert job["state"] == "done" and job["progress"] == 1.0, job
    finally:
        svc.close()


@pytest.mark.slow
def test_every_fault_point_survives_sigkill(tmp_path: Path) -> None:
    from bench import crash_points

    names = crash_points.select(os.environ.get("SCDB_CRASH_POINTS"))
    report = crash_points.run_all(names, parallel=2)
    crash_points.write_report(report, tmp_path)
    failed = {r["name"]: r["problems"][:3] for r in report["points"] if r["status"] != "pass"}
    assert not failed, failed
    assert report["passed"] == len(names)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("sabotage", "symptom"),
    [
        ("outbox", ("dense search", "doctor")),
        ("audit", ("audit verify failed", "no audit record")),
        ("unit", ("partially visible", "shows", "GET unit")),
    ],
)
def test_the_checks_catch_a_damaged_recovery(sabotage: str, symptom: tuple[str, ...]) -> None:
    """Negative control: damage the data dir between the crash and the restart; the point must
    fail, for the expected reason."""
    from bench import crash_points

    report = crash_points.run_all(["ingest.after_commit"], parallel=1, sabotage=sabotage)
    (point,) = report["points"]
    assert point["status"] == "fail"
    assert any(w in p for p in point["problems"] for w in symptom), point["problems"]
