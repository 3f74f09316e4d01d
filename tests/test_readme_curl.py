"""The README's curl examples, run as written with the real ``curl`` against ``make stack``'s
command (``superchargedb stack up``: PostgreSQL, SeaweedFS, Valkey, two API processes and a
worker) with the demo data (issue #18, D-262). One stack for the module.

Each command answers 2xx with JSON; what its ``# ->`` comment shows (less what it elides) is in
the answer; a queued job completes; the search has hits and the answer citations. Placeholders
are filled from earlier answers (``<unit_id>``, ``<job_id>``) or files made here
(``@my-runbook.pdf``: any ``@<name>.pdf`` is a small real PDF); one that cannot be filled fails,
naming it.
"""

from __future__ import annotations

import io
import json
import re
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from reportlab.lib.pagesizes import letter
from reportlab.pdfgen import canvas

import pg_stack
from readme_curl import CurlExample, extract, matches, parse_expectation
from test_stack_serve import CLI, _env, _free_port

README = Path(__file__).resolve().parent.parent / "README.md"
README_URL = "http://127.0.0.1:8080"
ALICE = "Authorization: Bearer aegis_sk_alice"
PDF_PHRASE = "The quokka drill moved the standby region in forty seconds."
JOB_TIMEOUT_S = 300.0
CURL_TIMEOUT_S = 300.0


def _runbook_pdf() -> bytes:
    buf = io.BytesIO()
    c = canvas.Canvas(buf, pagesize=letter)
    c.setFont("Helvetica", 12)
    c.drawString(72, 700, PDF_PHRASE)
    c.drawString(72, 500, "Rollback: drain the standby, then restore the primary's writes.")
    c.showPage()
    c.save()
    return buf.getvalue()


FILES = {".pdf": _runbook_pdf}  # what an ``@file`` argument may name, by its suffix


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    if (why := pg_stack.available()) is not None:
        pytest.skip(why)
    tmp = tmp_path_factory.mktemp("readme-curl")
    # Not under pytest's 0700 tmp dirs: PostgreSQL runs as its own user under root.
    data = Path(tempfile.mkdtemp(prefix="scdb-curl-"))
    data.chmod(0o755)
    env = _env(tmp)
    cmd = [*CLI, "stack"]
    try:
        up = subprocess.run(
            [*cmd, "up", "--data", str(data), "--port", str(_free_port()), "--workers", "2"],
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
        )
        assert up.returncode == 0, up.stdout + up.stderr
        yield json.loads((data / "stack" / "state.json").read_text())["url"]
    finally:
        down = [*cmd, "down", "--data", str(data)]
        subprocess.run(down, env=env, capture_output=True, timeout=300, check=False)
        subprocess.run(["rm", "-rf", str(data)], check=False)


def curl(argv: list[str], cwd: Path) -> tuple[int, str]:
    out = subprocess.run(
        [*argv, "-s", "-w", "\\n%{http_code}"],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=CURL_TIMEOUT_S,
    )
    assert out.returncode == 0, f"curl exited {out.returncode}: {out.stderr}"
    body, _, code = out.stdout.rpartition("\n")
    return int(code), body


def _fill(ex: CurlExample, url: str, known: dict[str, str], cwd: Path) -> list[str]:
    """The command with the stack's URL, the placeholders filled and its files made."""
    argv = []
    for arg in ex.argv:
        arg = arg.replace(README_URL, url)
        for name in re.findall(r"<([a-z_]+)>", arg):
            if name not in known:
                pytest.fail(f"README placeholder <{name}> has no value yet: {ex.source}")
            arg = arg.replace(f"<{name}>", known[name])
        if arg.startswith("@"):
            name = Path(arg[1:])
            if name.name != arg[1:] or name.suffix not in FILES:
                pytest.fail(f"README file {arg} is not one this test can make: {ex.source}")
            (cwd / name).write_bytes(FILES[name.suffix]())
        argv.append(arg)
    assert url in " ".join(argv), f"not a call to the API at {README_URL}: {ex.source}"
    return argv


def _wait_job(url: str, job_id: str, cwd: Path) -> dict[str, Any]:
    argv = ["curl", f"{url}/v1/jobs/{job_id}", "-H", ALICE]
    deadline = time.monotonic() + JOB_TIMEOUT_S
    while True:
        code, body = curl(argv, cwd)
        assert code == 200, (code, body)
        job: dict[str, Any] = json.loads(body)
        if job["state"] in ("done", "failed") or time.monotonic() > deadline:
            return job
        time.sleep(1)


@pytest.mark.slow
def test_the_readme_curl_commands_work_against_the_stack(stack: str, tmp_path: Path) -> None:
    examples = extract(README.read_text())
    known: dict[str, str] = {}
    texts: dict[str, str] = {}  # unit_id -> the text its ingest sent
    seen: set[str] = set()
    for ex in examples:
        argv = _fill(ex, stack, known, tmp_path)
        code, body = curl(argv, tmp_path)
        assert 200 <= code < 300, f"{code} {body[:500]}\nfrom: {ex.source}"
        try:
            got = json.loads(body)
        except ValueError:
            pytest.fail(f"not JSON ({body[:300]!r}) from: {ex.source}")
        if ex.expect is not None:
            missing = matches(ex.expect, got)
            assert not missing, f"{missing}\nin {got}\nfrom: {ex.source}"
        path = next(a for a in argv if a.startswith(stack)).removeprefix(stack).split("?")[0]
        method = argv[argv.index("-X") + 1] if "-X" in argv else "GET"
        seen.add(f"{method} {path.split('/')[2]}")
        if (method, path) == ("POST", "/v1/ingest"):
            sent = json.loads(argv[argv.index("-d") + 1])["units"]
            assert got["results"] and all(r["ok"] for r in got["results"]), got
            for unit, r in zip(sent, got["results"], strict=True):
                if "unit_id" in r:
                    known["unit_id"] = r["unit_id"]
                    texts[r["unit_id"]] = unit["text"]
                if "job_id" in r:
                    known["job_id"] = r["job_id"]
                    job = _wait_job(stack, r["job_id"], tmp_path)
                    assert job["state"] == "done", job
        elif path == "/v1/search":
            assert got["hits"], f"no hits: {got}"
        elif path == "/v1/answer":
            assert got["answer"]["citations"], f"no citations: {got['answer']}"
            assert got["answer"]["text"], got["answer"]
        elif method == "GET" and path.startswith("/v1/units/"):
            assert got["unit_id"] == known["unit_id"] and got["text"] == texts[got["unit_id"]]
    # The examples covered what the README promises, and what they did holds.
    want = {"POST ingest", "POST search", "POST answer", "PUT objects", "GET units", "DELETE docs"}
    assert want <= seen, seen
    assert "unit_id" in known and "job_id" in known, known
    gone = ["curl", f"{stack}/v1/units/{known['unit_id']}", "-H", ALICE]
    assert curl(gone, tmp_path)[0] == 404, "the deleted document's Unit is still readable"
    search = [
        "curl",
        "-X",
        "POST",
        f"{stack}/v1/search?scope=acme/alpha/backend",
        "-H",
        ALICE,
        "-H",
        "Content-Type: application/json",
        "-d",
        json.dumps({"q": "quokka drill standby region", "top_k": 5}),
    ]
    code, body = curl(search, tmp_path)
    assert code == 200 and any("quokka" in h["text"] for h in json.loads(body)["hits"]), body


def test_the_readme_still_has_its_curl_examples() -> None:
    """A README rewrite that breaks the format (or drops the examples) fails here, fast."""
    examples = extract(README.read_text())
    assert len(examples) >= 7, [e.source for e in examples]
    assert all(e.argv[0] == "curl" and any(README_URL in a for a in e.argv) for e in examples)
    expects = [e for e in examples if e.expect is not None]
    assert len(expects) >= 2
    assert any(r.get("status") == "created" for e in expects for r in e.expect.get("results", []))
    assert any(r.get("status") == "queued" for e in expects for r in e.expect.get("results", []))


def test_an_expectation_catches_what_differs() -> None:
    """The matcher the stack test relies on fails on a wrong value, a missing key, a non-string
    where a string was elided, and a short array; it passes extra keys and elided strings."""
    expect, note = parse_expectation(
        '{"ingested":1,"results":[{"ok":true,"unit_id":"01a2...","status":"created"}, ...]}'
        "; GET /v1/jobs/<job_id>"
    )
    assert note == "GET /v1/jobs/<job_id>"
    good = {
        "ingested": 1,
        "took_ms": 3,
        "results": [{"ok": True, "unit_id": "01J", "status": "created"}],
    }
    assert matches(expect, good) == []
    assert matches(expect, {**good, "ingested": 2}) == ["$.ingested: 2 != 1"]
    assert matches(expect, {"results": good["results"]}) == ["$.ingested: missing"]
    bad_id = {**good, "results": [{"ok": True, "unit_id": None, "status": "created"}]}
    assert matches(expect, bad_id) == ["$.results[0].unit_id: not a string: None"]
    assert matches(expect, {**good, "results": []})
