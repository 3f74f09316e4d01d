"""Media allowances are checked before a job is queued, on a real server: a job reserves the
pages (pdfium's count) or minutes (ffprobe's duration) it will derive, so queued jobs cannot
pass a tier's cap together, a refused request queues nothing, and a failed job gives its
reservation back. No job runs here (job_workers=0): before this rule every ingest while the
counter of derived Units was still empty was accepted."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from conftest import LiveServer, add_principal, auth, make_service
from test_media_ingest import make_pdf  # two pages

FREE_PAGES = 3
PRO_MINUTES = 1


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, embedder: Any) -> Iterator[Any]:
    svc = make_service(
        tmp_path_factory.mktemp("caps") / "data",
        embedder,
        job_workers=0,
        free_media_pages=FREE_PAGES,
        pro_media_minutes=PRO_MINUTES,
    )
    keys = {
        "fay": add_principal(svc, "fay", perms=["read", "write"], tier="free", scopes=["t/fay"]),
        "pia": add_principal(svc, "pia", perms=["read", "write"], tier="pro", scopes=["t/pia"]),
    }
    with LiveServer(svc) as live:
        yield svc, live, {k: auth(v) for k, v in keys.items()}
    svc.close()


@pytest.fixture
def http(server: Any) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server[1].url, timeout=60) as c:
        yield c


def tone(tmp: Path, seconds: float) -> bytes:
    out = tmp / f"tone-{seconds}.wav"
    subprocess.run(
        [
            "ffmpeg",
            "-v",
            "error",
            "-y",
            "-f",
            "lavfi",
            "-i",
            f"sine=frequency=440:duration={seconds}",
        ]
        + ["-ac", "1", "-ar", "8000", str(out)],
        check=True,
        timeout=60,
    )
    return out.read_bytes()


def upload(http: httpx.Client, who: dict[str, str], key: str, body: bytes, mime: str) -> None:
    r = http.put(f"/v1/objects/{key}", headers={**who, "Content-Type": mime}, content=body)
    assert r.status_code == 201, r.text


def ingest(http: httpx.Client, who: dict[str, str], *keys_mimes: tuple[str, str]) -> httpx.Response:
    units = [{"source_uri": k, "mime": m, "doc_id": k.rsplit("/", 1)[-1]} for k, m in keys_mimes]
    return http.post("/v1/ingest", headers=who, json={"units": units})


def job_ids(http: httpx.Client, who: dict[str, str]) -> list[str]:
    return [j["job_id"] for j in http.get("/v1/jobs", headers=who).json()["jobs"]]


def test_queued_pdfs_cannot_pass_the_pages_cap_together(server, http):
    svc, _, who = server
    fay = who["fay"]
    pdf = make_pdf()
    for name in ("a", "b", "c", "d"):
        upload(http, fay, f"t/fay/{name}.pdf", pdf + name.encode(), "application/pdf")
    first = ingest(http, fay, ("t/fay/a.pdf", "application/pdf"))
    assert first.status_code == 200 and first.json()["results"][0]["status"] == "queued"
    assert job_ids(http, fay) == [first.json()["results"][0]["job_id"]]
    # 2 reserved + 2 more > 3: refused as a whole while the first job has not even run.
    second = ingest(http, fay, ("t/fay/b.pdf", "application/pdf"))
    assert second.status_code == 402, second.text
    err = second.json()["error"]
    assert err["code"] == "quota_exceeded" and "reserved" in err["message"], err
    # One request with two documents over the cap queues neither.
    both = ingest(http, fay, ("t/fay/c.pdf", "application/pdf"), ("t/fay/d.pdf", "application/pdf"))
    assert both.status_code == 402
    assert job_ids(http, fay) == [first.json()["results"][0]["job_id"]]
    # The first job fails: its reservation is given back and the next document fits.
    lease = svc.writes.jobs.claim()
    assert lease is not None and lease.job_id == first.json()["results"][0]["job_id"]
    assert svc.writes.jobs.fail(lease, "the engine crashed", retry=False) == "failed"
    again = ingest(http, fay, ("t/fay/b.pdf", "application/pdf"))
    assert again.status_code == 200 and again.json()["results"][0]["status"] == "queued"


def test_queued_recordings_cannot_pass_the_minutes_cap_together(server, http, tmp_path):
    _, _, who = server
    pia = who["pia"]
    upload(http, pia, "t/pia/long.wav", tone(tmp_path, 40), "audio/wav")
    upload(http, pia, "t/pia/again.wav", tone(tmp_path, 40.5), "audio/wav")
    upload(http, pia, "t/pia/short.wav", tone(tmp_path, 15), "audio/wav")
    assert ingest(http, pia, ("t/pia/long.wav", "audio/wav")).status_code == 200
    over = ingest(http, pia, ("t/pia/again.wav", "audio/wav"))  # 40 + 40.5 s > 1 minute
    assert over.status_code == 402, over.text
    assert over.json()["error"]["code"] == "quota_exceeded"
    fits = ingest(http, pia, ("t/pia/short.wav", "audio/wav"))  # 40 + 15 s fits
    assert fits.status_code == 200 and fits.json()["results"][0]["status"] == "queued", fits.text
    assert len(job_ids(http, pia)) == 2
