"""The demo's media: a keynote video, a runbook PDF, made here once and ingested as jobs.

The spec's question ("Where does the Q3 keynote demo the failover, and how fast was the
cutover?") is answered from a moment of the keynote (espeak-ng speech over generated frames,
under 60 s; the object under ``acme/alpha/keynotes/``, its Units in ``acme/alpha/backend``) and
a page box of the runbook PDF, beside the Markdown runbook. The files are generated into the
data dir the first time (espeak-ng and ffmpeg, which scripts/setup.sh installs) and uploaded and
ingested through the same object and job path an API client uses, so ``serve --demo`` answers
at once while the derivation jobs run; the console's upload and operations views show them.
"""

from __future__ import annotations

import dataclasses
import logging
import shutil
import subprocess
import wave
from pathlib import Path
from typing import Any

from .. import acting
from ..service import Service
from ..types import Principal

log = logging.getLogger("superchargedb.demo")

KEYNOTE_KEY = "acme/alpha/keynotes/q3-keynote.mp4"
RUNBOOK_KEY = "acme/alpha/backend/runbook.pdf"  # doc_id "runbook": not the Markdown runbook
UNIT_SCOPE = "acme/alpha/backend"

# (slide title, spoken line); each slide lasts as long as its line plus a pause.
KEYNOTE = [
    ("Q3 keynote", "Welcome to the Q3 keynote of the platform team."),
    ("Live failover demo", "Now we demo the failover live, on stage, on the production backend."),
    ("Cutover: 0.8 s", "The cutover took zero point eight seconds, with no dropped requests."),
    ("Thank you", "Thank you, and see you at the next game day."),
]
RUNBOOK_LINES = [
    "Failover runbook (PDF edition)",
    "",
    "1. Freeze deploys in the release channel.",
    "2. Drain the primary region and wait for in-flight requests.",
    "3. Promote the standby database and confirm zero replication lag.",
    "4. Flip the global DNS record to the standby region.",
    "",
    "Q3 game day result: the cutover took 0.8 seconds end to end.",
]


def tools_missing() -> list[str]:
    return [t for t in ("espeak-ng", "ffmpeg") if shutil.which(t) is None]


def _speech(d: Path) -> tuple[Path, list[float]]:
    """One WAV of the keynote's lines with pauses; the duration of each slide in seconds."""
    import numpy as np

    rate, pause = 22050, 0.7
    pcm, durations = [], []
    for i, (_, line) in enumerate(KEYNOTE):
        clip = d / f"line{i}.wav"
        subprocess.run(["espeak-ng", "-v", "en-us", "-w", str(clip), line], check=True)
        with wave.open(str(clip)) as w:
            rate = w.getframerate()
            x = np.frombuffer(w.readframes(w.getnframes()), dtype=np.int16)
        gap = np.zeros(int(pause * rate), dtype=np.int16)
        pcm += [x, gap]
        durations.append(round((len(x) + len(gap)) / rate, 2))
    out = d / "keynote.wav"
    with wave.open(str(out), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(np.concatenate(pcm).tobytes())
    return out, durations


def _keynote(d: Path) -> Path:
    from PIL import Image, ImageDraw, ImageFont

    wav, durations = _speech(d)
    argv = ["ffmpeg", "-v", "error", "-y"]
    for i, ((title, _), dur) in enumerate(zip(KEYNOTE, durations, strict=True)):
        slide = d / f"slide{i}.png"
        im = Image.new("RGB", (640, 360), [(20, 40, 160), (150, 30, 30), (20, 110, 60)][i % 3])
        font = ImageFont.load_default(size=48)
        ImageDraw.Draw(im).text((40, 150), title, fill="white", font=font)
        im.save(slide)
        argv += ["-loop", "1", "-framerate", "10", "-t", str(dur), "-i", str(slide)]
    n = len(KEYNOTE)
    argv += ["-i", str(wav)]
    graph = "".join(f"[{i}:v]" for i in range(n)) + f"concat=n={n}:v=1:a=0,format=yuv420p[v]"
    argv += ["-filter_complex", graph, "-map", "[v]", "-map", f"{n}:a", "-shortest"]
    out = d / "q3-keynote.mp4"
    argv += ["-c:v", "libx264", "-preset", "veryfast", "-c:a", "aac", str(out)]
    subprocess.run(argv, check=True)
    return out


def _pdf(lines: list[str]) -> bytes:
    """A one-page PDF with real text (so the page's boxes come from its text layer, no OCR)."""

    def esc(s: str) -> str:
        return s.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")

    ops = ["BT", "/F1 14 Tf", "72 720 Td", "20 TL"]
    for line in lines:
        ops.append(f"({esc(line)}) Tj T*")
    ops.append("ET")
    stream = "\n".join(ops).encode("latin-1")
    objs = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R"
        b" /Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for i, body in enumerate(objs, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % i + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objs) + 1)
    out += b"".join(b"%010d 00000 n \n" % o for o in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objs) + 1,
        xref,
    )
    return bytes(out)


def seed_media(svc: Service, alice_key: str) -> dict[str, Any]:
    """Generate (once) and ingest the keynote and the runbook PDF; returns the queued jobs.

    Idempotent: an object alice already stored is not uploaded or ingested again."""
    missing = tools_missing()
    if missing:
        return {"skipped": f"needs {', '.join(missing)} (scripts/setup.sh installs them)"}
    alice = dataclasses.replace(svc.authenticate(f"Bearer {alice_key}"), is_operator=True)
    with acting.acting_for(alice.scopes):  # as the gate would act for her key
        return _seed_media(svc, alice)


def _seed_media(svc: Service, alice: Principal) -> dict[str, Any]:
    d = Path(svc.settings.data_dir) / "demo-media"
    d.mkdir(parents=True, exist_ok=True)
    jobs = {}
    for key, mime, make in [
        (RUNBOOK_KEY, "application/pdf", lambda: _pdf(RUNBOOK_LINES)),
        (KEYNOTE_KEY, "video/mp4", lambda: _keynote(d).read_bytes()),
    ]:
        # The object a read of the key resolves to is alice's own when she stored one.
        stored = svc.resolve_object(alice, key)
        if stored is not None and stored.acl_owner == alice.name:
            continue
        obj_scope = key.rsplit("/", 1)[0]
        svc.put_object(alice, key, iter([make()]), mime, obj_scope, ["eng-backend"])
        unit: dict[str, Any] = {
            "source_uri": key,
            "mime": mime,
            "doc_id": Path(key).stem,
            "scope": UNIT_SCOPE,
            "acl_groups": ["eng-backend"],
        }
        out = svc.ingest(alice, {"units": [unit]}, UNIT_SCOPE)
        res = out["results"][0]
        if not res.get("ok"):
            log.warning("demo media %s not ingested: %s", key, res.get("error"))
            continue
        jobs[key] = res.get("job_id")
    return {"jobs": jobs}
