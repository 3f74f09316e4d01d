"""Raw objects through the API: PDF jobs with bbox Locators, deep links, previews, object ACL
through derived Units, poison jobs, and a worker SIGKILLed mid-job."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import time

import pytest
from PIL import Image
from reportlab.lib.pagesizes import letter
from reportlab.pdfgen import canvas

from conftest import ALICE, BOB, CAROL, add_principal, auth, make_service


def make_pdf() -> bytes:
    buf = io.BytesIO()
    c = canvas.Canvas(buf, pagesize=letter)
    c.setFont("Helvetica", 12)
    c.drawString(72, 700, "The failover runbook says the cutover took 0.8 seconds.")
    c.drawString(72, 500, "Quarterly revenue grew by eight percent in the third quarter.")
    c.showPage()
    c.drawString(72, 650, "Page two explains the rollback procedure for ERR_5150.")
    c.showPage()
    c.save()
    return buf.getvalue()


def wait_job(client, headers, job_id, timeout=120):
    deadline = time.time() + timeout
    while time.time() < deadline:
        j = client.get(f"/v1/jobs/{job_id}", headers=headers).json()
        if j["state"] in ("done", "failed"):
            return j
        time.sleep(0.2)
    raise TimeoutError(job_id)


def put_pdf(client, key="acme/alpha/backend/runbook.pdf", headers=ALICE, **params):
    r = client.put(
        f"/v1/objects/{key}",
        headers={**headers, "Content-Type": "application/pdf"},
        content=make_pdf(),
        params=params or None,
    )
    assert r.status_code == 201, r.text
    return key


def test_pdf_job_units_links_preview(client):
    key = put_pdf(client, acl_groups="")  # the object itself is owner-only
    r = client.post(
        "/v1/ingest",
        headers=ALICE,
        json={
            "units": [{"source_uri": key, "mime": "application/pdf", "acl_groups": ["eng-backend"]}]
        },
    )
    res = r.json()["results"][0]
    assert res["ok"] and res["status"] == "queued" and res["job_id"]
    job = wait_job(client, ALICE, res["job_id"])
    assert job["state"] == "done" and len(job["unit_ids"]) == 3
    units = [client.get(f"/v1/units/{u}", headers=ALICE).json() for u in job["unit_ids"]]
    by_text = {u["text"]: u for u in units}
    u = by_text["Page two explains the rollback procedure for ERR_5150."]
    assert u["plane"] == "doc_visual" and u["locator"]["page"] == 2
    assert u["source_uri"] == key + "#page=2" and u["link"] == f"/v1/objects/{key}#page=2"
    x0, y0, x1, y1 = u["locator"]["box"]
    assert 60 < x0 < 80 and 125 < y0 < 142 < y1 < 152  # baseline 792-650, top-left origin
    hit = client.post("/v1/search", headers=ALICE, json={"q": "ERR_5150"}).json()["hits"][0]
    assert hit["unit_id"] == u["unit_id"] and hit["link"].endswith("#page=2")
    png = client.get(f"/v1/units/{u['unit_id']}/preview", headers=ALICE)
    assert png.status_code == 200 and png.headers["content-type"] == "image/png"
    img = Image.open(io.BytesIO(png.content)).convert("RGB")
    assert img.width > 500
    # The box is drawn where the Locator says (red outline near its top-left corner).
    scale = img.width / 612
    px = img.getpixel((int(x0 * scale), int((y0 + y1) / 2 * scale)))
    assert px[0] > 200 and px[1] < 120
    # bob cannot read the owner-only object directly, but he can read its derived Units.
    assert client.get(f"/v1/objects/{key}", headers=BOB).status_code == 200
    assert client.get(f"/v1/objects/{key}", headers=CAROL).status_code == 404
    # Re-ingesting the same object is idempotent.
    again = client.post(
        "/v1/ingest",
        headers=ALICE,
        json={
            "units": [{"source_uri": key, "mime": "application/pdf", "acl_groups": ["eng-backend"]}]
        },
    )
    assert again.json()["results"][0]["status"] == "unchanged"
    assert again.json()["results"][0]["unit_ids"] == job["unit_ids"]


def test_text_units_have_no_preview(client):
    r = client.post("/v1/ingest", headers=ALICE, json={"units": [{"text": "plain"}]})
    uid = r.json()["results"][0]["unit_id"]
    assert client.get(f"/v1/units/{uid}/preview", headers=ALICE).status_code == 404
    assert client.get(f"/v1/units/{uid}", headers=ALICE).json()["link"] is None


def test_jobs_are_private(client, svc):
    key = put_pdf(client)
    job_id = client.post(
        "/v1/ingest",
        headers=ALICE,
        json={"units": [{"source_uri": key, "mime": "application/pdf"}]},
    ).json()["results"][0]["job_id"]
    wait_job(client, ALICE, job_id)
    assert client.get(f"/v1/jobs/{job_id}", headers=CAROL).status_code == 404
    outsider = auth(
        add_principal(svc, "olga", perms=["read"], scopes=["acme/alpha"], groups=["sales"])
    )
    assert client.get(f"/v1/jobs/{job_id}", headers=outsider).status_code == 404


def test_poison_job_fails_after_retries_and_releases_quota(tmp_path, embedder):
    from fastapi.testclient import TestClient

    from superchargedb.api.app import create_app

    s = make_service(
        tmp_path / "p", embedder, media_timeout_s=0.01, job_max_attempts=3, job_lease_s=30
    )
    key = auth(add_principal(s, "q", perms=["read", "write"], scopes=["acme"], quota=1))
    try:
        with TestClient(create_app(s)) as c:
            c.put(
                "/v1/objects/acme/doc.pdf",
                headers={**key, "Content-Type": "application/pdf"},
                content=make_pdf(),
            )
            r = c.post(
                "/v1/ingest",
                headers=key,
                json={
                    "units": [
                        {"source_uri": "acme/doc.pdf", "mime": "application/pdf", "doc_id": "doc"}
                    ]
                },
            )
            job = wait_job(c, key, r.json()["results"][0]["job_id"])
            assert job["state"] == "failed" and job["attempts"] == 3
            assert "timed out" in job["error"] or "timeout" in job["error"].lower()
            # The reserved document was released: the quota of 1 is free again.
            r = c.post("/v1/ingest", headers=key, json={"units": [{"text": "x", "doc_id": "y"}]})
            assert r.status_code == 200, r.text
    finally:
        s.close()


@pytest.mark.slow
def test_worker_killed_mid_job_is_finished_exactly_once(tmp_path, embedder):
    """SIGKILL a worker process mid-job; after the lease expires another finishes it once."""
    from fastapi.testclient import TestClient

    from superchargedb.api.app import create_app

    data = tmp_path / "w"
    s = make_service(data, embedder, job_workers=0)
    add_principal(s, "w", perms=["read", "write"], scopes=["acme"])
    key = auth("aegis_sk_test_w")
    env = {**os.environ, "SCDB_JOB_LEASE_S": "3"}
    try:
        with TestClient(create_app(s)) as c:
            c.put(
                "/v1/objects/acme/doc.pdf",
                headers={**key, "Content-Type": "application/pdf"},
                content=make_pdf(),
            )
            r = c.post(
                "/v1/ingest",
                headers=key,
                json={"units": [{"source_uri": "acme/doc.pdf", "mime": "application/pdf"}]},
            )
            job_id = r.json()["results"][0]["job_id"]
            cmd = [
                sys.executable,
                "-m",
                "superchargedb.cli.main",
                "worker",
                "--data",
                str(data),
                "--once",
            ]
            first = subprocess.run(
                cmd,
                env={**env, "SCDB_CRASH_AT": "jobs.after_embed"},
                capture_output=True,
                timeout=120,
            )
            assert first.returncode == -signal.SIGKILL
            assert c.get(f"/v1/jobs/{job_id}", headers=key).json()["state"] == "running"
            time.sleep(3.5)  # the dead worker's lease expires
            second = subprocess.run(cmd, env=env, capture_output=True, timeout=120)
            assert second.returncode == 0, second.stderr.decode()[-2000:]
            job = wait_job(c, key, job_id)
            assert job["state"] == "done" and job["attempts"] == 2 and len(job["unit_ids"]) == 3
            n = s.catalog.reader().execute("SELECT COUNT(*) FROM units").fetchone()[0]
            assert n == 3  # no duplicate derived Units
            # The server tails the worker's outbox: the Units are searchable by both legs.
            deadline = time.time() + 10
            while time.time() < deadline:
                hits = c.post("/v1/search", headers=key, json={"q": "ERR_5150"}).json()["hits"]
                if hits and hits[0]["ranks"]["dense"] is not None:
                    break
                time.sleep(0.3)
            assert hits[0]["text"].endswith("ERR_5150.") and hits[0]["ranks"]["lexical"] == 1
            assert s.doctor()["ok"]
    finally:
        s.close()


@pytest.mark.slow
def test_audio_search_finds_the_moment(client, tmp_path):
    """A WAV of espeak sentences with known offsets: searching a sentence returns the utterance
    whose time range lies within 0.5 s of that sentence's true boundaries."""
    from test_derive_media import SENTENCES, espeak_track

    wav, truth = espeak_track(tmp_path)
    key = "acme/alpha/backend/standup.wav"
    r = client.put(
        f"/v1/objects/{key}",
        headers={**ALICE, "Content-Type": "audio/wav"},
        content=wav.read_bytes(),
    )
    assert r.status_code == 201
    r = client.post(
        "/v1/ingest", headers=ALICE, json={"units": [{"source_uri": key, "mime": "audio/wav"}]}
    )
    job = wait_job(client, ALICE, r.json()["results"][0]["job_id"], timeout=300)
    assert job["state"] == "done", job
    for sentence, (start, end) in zip(SENTENCES, truth, strict=True):
        out = client.post(
            "/v1/search", headers=ALICE, json={"q": sentence, "planes": ["audio"], "top_k": 3}
        ).json()
        hit = out["hits"][0]
        loc = hit["locator"]
        assert hit["plane"] == "audio" and loc["kind"] == "time_range"
        assert abs(loc["t_start_ms"] / 1000 - start) <= 0.5, (sentence, loc, start)
        assert abs(loc["t_end_ms"] / 1000 - end) <= 0.5, (sentence, loc, end)
        assert loc["t_end_ms"] - loc["t_start_ms"] <= 30_000
        assert hit["link"] == f"/v1/objects/{key}#t={loc['t_start_ms'] // 1000}"
