"""The CLI against a real server: folder ingest (progress, summary, skip unchanged) and ask."""

from __future__ import annotations

import os
import subprocess
import sys

from superchargedb.cli.remote import object_key


def run_cli(live, *args):
    env = {**os.environ, "SCDB_API_KEY": "aegis_sk_alice", "SCDB_URL": live.url}
    return subprocess.run(
        [sys.executable, "-m", "superchargedb.cli.main", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )


def test_object_keys_are_safe(tmp_path):
    p = tmp_path / "My Docs" / ".hidden" / "a b#c.md"
    assert object_key("acme/alpha", tmp_path, p) == "acme/alpha/My_Docs/_.hidden/a_b_c.md"


def test_folder_ingest_then_ask(live, tmp_path):
    d = tmp_path / "notes"
    (d / "sub").mkdir(parents=True)
    (d / "incident.md").write_text(
        "# Incident 42\n\nThe payment queue stalled for 17 minutes because a consumer leaked "
        "file descriptors.\n"
    )
    (d / "sub" / "deploy.log").write_text(
        "2026-01-01 deploy started\n2026-01-01 deploy finished in 94 seconds\n"
    )
    (d / "binary.bin").write_bytes(b"\x00\x01\x02\x03" * 10)
    r = run_cli(live, "ingest", str(d), "--scope", "acme/alpha/backend")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "files: 3  ingested: 2" in r.stdout and "unsupported: 1" in r.stdout
    again = run_cli(live, "ingest", str(d), "--scope", "acme/alpha/backend")
    assert "unchanged: 2" in again.stdout and "ingested: 0" in again.stdout
    r = run_cli(
        live, "ask", "How long did the payment queue stall?", "--scope", "acme/alpha/backend"
    )
    assert r.returncode == 0, r.stderr
    assert "17 minutes" in r.stdout
    assert "[1] acme/alpha/backend/incident.md" in r.stdout and "chars" in r.stdout


def test_ingest_reports_failures(live, tmp_path):
    bad = tmp_path / "broken.pdf"
    bad.write_bytes(b"%PDF-1.4\n not really")
    r = run_cli(live, "ingest", str(bad), "--scope", "acme/alpha/backend")
    assert r.returncode == 1
    assert "FAILED" in r.stdout and "PDF" in r.stdout
