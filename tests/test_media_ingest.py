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

from conftest import (
    ALICE,
    BOB,
    CAROL,
    add_principal,
    auth,
    embedded,
    make_service,
    stored_value,
)
from superchargedb.ingest.utterances import t_fragment


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
    if s.settings.database_url:  # the worker processes share the service's database
        env["SCDB_DATABASE_URL"] = s.settings.database_url
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
            n = stored_value(s, "SELECT COUNT(*) FROM units")
            assert n == 3  # no duplicate derived Units
            # The server tails the worker's outbox: the Units are searchable by both legs.
            deadline = time.time() + 30  # the whole suite may be loading both cores
            while time.time() < deadline:
                hits = c.post("/v1/search", headers=key, json={"q": "ERR_5150"}).json()["hits"]
                if hits and hits[0]["ranks"]["dense"] is not None:
                    break
                time.sleep(0.3)
            # Once empty for 30 s under load: a search before the tail applied the worker's
            # commit was cached (fixed; test_a_search_before_a_workers_commit_is_applied_...).
            assert hits, {"doctor": s.doctor(), "job": job}
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
        assert loc["t_end_ms"] - loc["t_start_ms"] <= 15_000
        assert hit["link"] == f"/v1/objects/{key}{t_fragment(loc['t_start_ms'])}"


VIDEO_SHOTS_S = [3.0, 1.6, 3.4, 3.8]  # whole frames at 25 fps; cuts at 3.0, 4.6 and 8.0 s


def overlap_s(a: tuple[float, float], b: tuple[float, float]) -> float:
    return max(0.0, min(a[1], b[1]) - max(a[0], b[0]))


@pytest.mark.slow  # ASR, scene detection, keyframe OCR and embedding: ~30-90 s under load
def test_video_through_the_api(client, svc, tmp_path):
    """An ffmpeg MP4 of N colour shots over espeak sentences with known offsets, PUT and ingested
    through the API: N shots within one frame of the true cuts, each carrying the transcript
    that overlaps it; searching a sentence finds its utterance within 0.5 s; deep links and
    source_uri carry #t=; the object serves byte ranges for a player."""
    from test_derive_media import SENTENCES, espeak_track, make_video, words_of

    wav, truth = espeak_track(tmp_path)
    mp4 = make_video(tmp_path, wav, VIDEO_SHOTS_S).read_bytes()
    key = "acme/alpha/backend/allhands.mp4"
    r = client.put(
        f"/v1/objects/{key}", headers={**ALICE, "Content-Type": "video/mp4"}, content=mp4
    )
    assert r.status_code == 201, r.text
    r = client.post(
        "/v1/ingest", headers=ALICE, json={"units": [{"source_uri": key, "mime": "video/mp4"}]}
    )
    assert r.status_code == 200, r.text
    res = r.json()["results"][0]
    assert res["ok"] and res["status"] == "queued" and res["job_id"], res
    job = wait_job(client, ALICE, res["job_id"], timeout=600)
    assert job["state"] == "done", job
    units = [client.get(f"/v1/units/{u}", headers=ALICE).json() for u in job["unit_ids"]]

    def secs(u):
        loc = u["locator"]
        return loc["t_start_ms"] / 1000, loc["t_end_ms"] / 1000

    for u in units:  # every Unit deep-links to its moment
        assert u["locator"]["kind"] == "time_range"
        frag = t_fragment(u["locator"]["t_start_ms"])
        assert u["source_uri"] == key + frag and u["link"] == f"/v1/objects/{key}{frag}"
    shots = sorted(
        (u for u in units if u["modality"] == "video_shot"), key=lambda u: u["locator"]["shot_idx"]
    )
    utts = [u for u in units if u["modality"] == "utterance"]
    assert len(shots) == len(VIDEO_SHOTS_S) and utts
    assert all(u["plane"] == "audio" for u in utts)
    edges = [sum(VIDEO_SHOTS_S[:i]) for i in range(len(VIDEO_SHOTS_S) + 1)]
    for i, s in enumerate(shots):
        a, b = secs(s)
        assert s["plane"] == "visual" and s["locator"]["shot_idx"] == i
        assert abs(a - edges[i]) <= 0.04 and abs(b - edges[i + 1]) <= 0.04, (i, a, b)
    # The transcript overlapping each shot is in its text: an utterance said within a shot is
    # there whole, and each sentence's words are in the shots it overlaps.
    inside = 0
    for u in utts:
        ua, ub = secs(u)
        for s in shots:
            a, b = secs(s)
            if a - 0.1 <= ua and ub <= b + 0.1:
                inside += 1
                assert words_of(u["text"]) <= words_of(s["text"]), (u["text"], s["text"])
    assert inside >= 2, [(secs(u), u["text"]) for u in utts]  # sentences 1 and 3
    for sentence, span in zip(SENTENCES, truth, strict=True):
        over = [s for s in shots if overlap_s(span, secs(s)) > 0]
        said = set().union(*(words_of(s["text"]) for s in over))
        assert len(words_of(sentence) & said) >= 3, (sentence, [s["text"] for s in over])
    assert len([s for s in shots if overlap_s(truth[1], secs(s)) > 0]) == 2  # across a cut
    assert "quarterly" not in words_of(shots[0]["text"])  # no transcript of other shots
    # Searching a sentence finds the moment it was said.
    for sentence, (start, end) in zip(SENTENCES, truth, strict=True):
        hits = client.post(
            "/v1/search", headers=ALICE, json={"q": sentence, "planes": ["audio"], "top_k": 3}
        ).json()["hits"]
        loc = hits[0]["locator"]
        assert abs(loc["t_start_ms"] / 1000 - start) <= 0.5, (sentence, loc, start)
        assert abs(loc["t_end_ms"] / 1000 - end) <= 0.5, (sentence, loc, end)
        assert hits[0]["link"] == f"/v1/objects/{key}{t_fragment(loc['t_start_ms'])}"
    # The slide's words (keyframe OCR) are in the last shot only, and lexically find it first
    # (the other shots share "quarterly" through the transcript).
    assert {"quarterly", "review"} <= words_of(shots[-1]["text"])
    assert not any("review" in words_of(s["text"]) for s in shots[:-1])
    hits = client.post(
        "/v1/search", headers=ALICE, json={"q": "quarterly review", "planes": ["visual"]}
    ).json()["hits"]
    slide = next(h for h in hits if h["unit_id"] == shots[-1]["unit_id"])
    assert slide["ranks"]["lexical"] == 1, slide
    assert slide["link"].endswith(t_fragment(shots[-1]["locator"]["t_start_ms"]))
    # Each shot keeps its middle frame (D-236): a JPEG of the shot's own colour, through the
    # preview route under the Unit's ACL (another tenant: the 404 of a missing id).
    from PIL import Image

    colours = [(255, 0, 0), (0, 128, 0), (255, 255, 0), (20, 40, 160)]
    for s, want in zip(shots, colours, strict=True):
        assert s["preview"] == f"/v1/units/{s['unit_id']}/preview"
        r = client.get(s["preview"], headers=ALICE)
        assert r.status_code == 200 and r.headers["content-type"] == "image/jpeg"
        assert "private" in r.headers["cache-control"] and "Cookie" in r.headers["vary"]
        img = Image.open(io.BytesIO(r.content)).convert("RGB")
        assert img.size == (640, 360)
        got = img.getpixel((8, 8))
        assert all(abs(a - b) <= 24 for a, b in zip(got, want, strict=True)), (got, want)
        assert client.get(s["preview"], headers=CAROL).status_code == 404
    assert all(u["preview"] is None for u in utts)  # a moment of speech has no picture
    listed = client.get(
        "/v1/units", headers=ALICE, params={"doc_id": units[0]["doc_id"], "limit": 100}
    ).json()["units"]
    assert {u["unit_id"]: u["preview"] for u in listed if u["modality"] == "video_shot"} == {
        s["unit_id"]: s["preview"] for s in shots
    }
    # A player seeks: byte ranges of the video.
    r = client.get(f"/v1/objects/{key}", headers={**ALICE, "Range": "bytes=100-1099"})
    assert r.status_code == 206 and r.content == mp4[100:1100]
    assert r.headers["content-range"] == f"bytes 100-1099/{len(mp4)}"
    assert r.headers["content-type"].startswith("video/mp4")
    r = client.get(f"/v1/objects/{key}", headers={**ALICE, "Range": "bytes=-500"})
    assert r.status_code == 206 and r.content == mp4[-500:]
    # The keyframes go with their Units.
    kept = "SELECT count(*) FROM unit_keyframes"
    assert stored_value(svc, kept) == len(shots)
    r = client.delete(f"/v1/docs/{units[0]['doc_id']}", headers=ALICE)
    assert r.status_code == 200, r.text
    assert stored_value(svc, kept) == 0


def test_bad_media_fail_alone_in_a_mixed_batch(client):
    """Malformed PDF, truncated WAV, zero-byte file and wrong type beside a good PDF and a text
    Unit: each bad one gets its own clear error (at once, or as its job's reason), the good
    ones are all stored and searchable."""
    put_pdf(client, key="acme/alpha/backend/good.pdf")
    bad = {
        # passes the cheap checks (header and end marker), fails in the parser: a failed job
        "broken.pdf": (
            b"%PDF-1.7\n1 0 obj << /Type /Catalog >>\ngarbage\n%%EOF\n",
            "application/pdf",
        ),
        "cut.wav": (
            b"RIFF" + (100000).to_bytes(4, "little") + b"WAVEfmt " + b"\0" * 40,
            "audio/wav",
        ),
        "empty.mp3": (b"", "audio/mpeg"),
        "fake.mp4": (make_pdf(), "video/mp4"),
    }
    for name, (data, mime) in bad.items():
        r = client.put(
            f"/v1/objects/acme/alpha/backend/{name}",
            headers={**ALICE, "Content-Type": mime},
            content=data,
        )
        assert r.status_code == 201, (name, r.text)
    units = [{"source_uri": f"acme/alpha/backend/{n}", "mime": m} for n, (_, m) in bad.items()]
    units.insert(2, {"source_uri": "acme/alpha/backend/good.pdf", "mime": "application/pdf"})
    units.append({"text": "The pager rotation moves to Tuesdays.", "doc_id": "pager"})
    r = client.post("/v1/ingest", headers=ALICE, json={"units": units})
    assert r.status_code == 200, r.text
    res = r.json()["results"]
    assert [x["ok"] for x in res] == [True, False, True, False, False, True]
    assert res[0]["status"] == "queued" and res[2]["status"] == "queued"
    msgs = {units[i]["source_uri"].rsplit("/", 1)[1]: res[i]["error"] for i in (1, 3, 4)}
    assert "truncated WAV" in msgs["cut.wav"]["message"]
    assert "zero bytes" in msgs["empty.mp3"]["message"]
    assert "application/pdf" in msgs["fake.mp4"]["message"]
    assert all(e["code"] == "validation_error" for e in msgs.values()), msgs
    broken = wait_job(client, ALICE, res[0]["job_id"])
    assert broken["state"] == "failed" and "malformed PDF" in broken["error"], broken
    assert broken["attempts"] == 1 and not broken["unit_ids"]  # bad input is not retried
    good = wait_job(client, ALICE, res[2]["job_id"])
    assert good["state"] == "done" and len(good["unit_ids"]) == 3
    hit = client.post("/v1/search", headers=ALICE, json={"q": "ERR_5150 rollback"}).json()
    assert hit["hits"][0]["source_uri"] == "acme/alpha/backend/good.pdf#page=2", hit
    hit = client.post("/v1/search", headers=ALICE, json={"q": "pager Tuesdays"}).json()
    assert hit["hits"][0]["doc_id"] == "pager", hit


def test_a_search_before_a_workers_commit_is_applied_is_not_cached(tmp_path, embedder, monkeypatch):
    """A worker process commits Units (and their outbox ops); until the server applies them, a
    search hides them, though the scope's generations already count them. That answer must not
    be cached under those generations: once applied, the same search finds the Units (it found
    nothing for 30 s once, under load, because the stale answer was cached)."""
    from fastapi.testclient import TestClient

    from superchargedb.api.app import create_app

    data = tmp_path / "w"
    s = make_service(data, embedder, job_workers=0)
    try:
        embedded(s)  # PostgreSQL reads the catalog itself: no index to trail it
        add_principal(s, "w", perms=["read", "write"], scopes=["acme"])
        key = auth("aegis_sk_test_w")
        outbox = s.parts.outbox
        monkeypatch.setattr(outbox, "replay", lambda: 0)  # the server's tail applies nothing
        with TestClient(create_app(s)) as c:
            hdr = {**key, "Content-Type": "application/pdf"}
            c.put("/v1/objects/acme/doc.pdf", headers=hdr, content=make_pdf())
            unit = {"source_uri": "acme/doc.pdf", "mime": "application/pdf"}
            job_id = c.post("/v1/ingest", headers=key, json={"units": [unit]}).json()["results"][0][
                "job_id"
            ]
            cmd = [sys.executable, "-m", "superchargedb.cli.main", "worker", "--data", str(data)]
            done = subprocess.run([*cmd, "--once"], capture_output=True, timeout=120)
            assert done.returncode == 0, done.stderr.decode()[-2000:]
            assert wait_job(c, key, job_id)["state"] == "done"
            assert outbox.head() > outbox.applied()  # committed by the worker, not applied here
            before = c.post("/v1/search", headers=key, json={"q": "ERR_5150"}).json()
            assert before["hits"] == []
            monkeypatch.undo()
            outbox.replay()
            after = c.post("/v1/search", headers=key, json={"q": "ERR_5150"}).json()
            assert after["trace"].get("cache") != "hit", after["trace"]
            assert after["hits"] and after["hits"][0]["text"].endswith("ERR_5150.")
    finally:
        s.close()
