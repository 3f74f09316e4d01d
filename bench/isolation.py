"""A big run of the isolation property test, recorded (issue #7: zero leaks over thousands).

Runs ``tests/test_isolation_property.py::test_isolation_property`` with
``SCDB_ISOLATION_EXAMPLES=<worlds>`` (CI runs 50) in a pytest subprocess, with hypothesis' own
random seed unless ``--seed`` is given, and writes what the property's counters say: worlds,
principals, Units, objects, jobs, generated requests, HTTP requests made, reads per path,
re-permissions, checks, and whether any leak was found (a failure prints the falsifying world).
Optionally the mutation checks too (``--mutations``: each injected bug must be caught).

    .venv/bin/python -m bench.isolation --worlds 1000
    .venv/bin/python -m bench.isolation --worlds 100 --mutations

Writes ``<out>/isolation.json`` and ``isolation.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.common.env import environment
from bench.common.paths import REPO as ROOT
from bench.common.report import command, write_report

TEST = "tests/test_isolation_property.py"


def run_pytest(args: list[str], env: dict[str, str], basetemp: Path) -> tuple[int, str, float]:
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x"]
    cmd += [f"--basetemp={basetemp}", *args]
    t0 = time.perf_counter()
    # pytest prints its own progress dots: the run shows that it is alive.
    proc = subprocess.run(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)
    sys.stdout.write(proc.stdout[-4000:])
    return proc.returncode, proc.stdout, time.perf_counter() - t0


def markdown(rep: dict[str, Any]) -> str:
    s = rep["stats"]
    lines = [
        "# Isolation property: a big run",
        "",
        f"Generated {rep['generated']} by `{rep['command']}` (commit `{rep['commit']}`, "
        f"{rep['cpus']} CPUs, Python {rep['python']}); {rep['seconds']:.0f} s wall.",
        "",
        f"**Result: {'no leak found' if rep['passed'] else 'FAILED (see the output below)'}** "
        f"over {s.get('worlds', 0)} generated worlds.",
        "",
        "| counter | value |",
        "|---|---|",
    ]
    for k, v in sorted(s.items()):
        lines.append(f"| {k} | {round(v, 1) if isinstance(v, float) else v} |")
    lines += [
        "",
        "What a world is: tenants with look-alike scopes (`acme/alpha` vs `acme/alphabet`, case, "
        "trailing slashes, unicode confusables, `..`, empty segments), principals with random "
        "perms, groups and tiers, plain and object-derived Units, objects and queued jobs with "
        "random ACLs, each carrying a secret marker; every reader checked on every read path "
        "(units/:id and preview, search, answer incl. the model's prompt, SSE, objects with "
        "Range/ETag/HEAD, jobs, listings, usage) against an independent set-based reference, the "
        "result cache in both orders, and again after a re-permission (probed by each reader of "
        "the re-permissioned document).",
    ]
    if rep.get("mutations"):
        m = rep["mutations"]
        lines += [
            "",
            f"Mutation checks (each injected bug must be caught): "
            f"{'all caught' if m['passed'] else 'NOT all caught'}, {m['seconds']:.0f} s.",
        ]
    if not rep["passed"]:
        lines += ["", "```", rep["tail"], "```"]
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--worlds", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=None, help="hypothesis seed (default random)")
    ap.add_argument("--mutations", action="store_true", help="also run the mutation checks")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    a = ap.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="scdb-iso-") as tmp:
        stats_path = Path(tmp) / "stats.json"
        env = {
            **os.environ,
            "SCDB_ISOLATION_EXAMPLES": str(a.worlds),
            "SCDB_ISOLATION_REPORT": str(stats_path),
        }
        args = [f"{TEST}::test_isolation_property"]
        if a.seed is not None:
            args.append(f"--hypothesis-seed={a.seed}")
        rc, out, secs = run_pytest(args, env, Path(tmp) / "bt")
        stats = json.loads(stats_path.read_text()) if stats_path.exists() else {}
        env = environment()
        rep: dict[str, Any] = {
            "generated": datetime.now(UTC).isoformat(timespec="seconds"),
            "command": command("isolation", sys.argv[1:]),
            "commit": env["git_commit"],
            "cpus": env["cpus"],
            "python": env["python"],
            "loadavg": env["loadavg"],
            "worlds_asked": a.worlds,
            "passed": rc == 0,
            "seconds": round(secs, 1),
            "stats": stats,
            "tail": out[-3000:],
        }
        if a.mutations:
            env2 = {k: v for k, v in env.items() if k != "SCDB_ISOLATION_REPORT"}
            mut = [f"{TEST}::test_mutations_are_caught"]
            mrc, _, msecs = run_pytest(mut, env2, Path(tmp) / "m")
            rep["mutations"] = {"passed": mrc == 0, "seconds": round(msecs, 1)}
    write_report(a.out, "isolation", rep, markdown(rep))
    print(f"\nworlds {stats.get('worlds', 0)}, passed {rep['passed']}: {a.out / 'isolation.md'}")
    sys.exit(0 if rep["passed"] else 1)


if __name__ == "__main__":
    main()
