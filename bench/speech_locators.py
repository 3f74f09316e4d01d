"""Speech Locators through the public API: WER, voiced audio outside every Unit, and how tightly a
search hit for a cue's words opens the moment in a video (issue 22, the speech half).

A ``superchargedb serve --demo`` subprocess (bench/benchserver.py) on a fresh data dir; every
recording of ``$SCDB_EVAL_DIR/speech-pocketsphinx`` is PUT as an object and ingested as audio,
then a video is assembled with ffmpeg from the same recordings (a still frame; clips joined with
seeded 0-200 ms gaps; one cue is three readings back to back, over 15 s; the cue list is written
as an SRT) and ingested as video. Measured:

- **WER** over the 11 recordings (hypothesis: the Units' text in time order; the normalisation
  of bench/ingest_media.py).
- **Voiced audio outside every Unit**: 10 ms frames whose RMS, smoothed over 50 ms, is within
  30 dB of the file's peak; the share of them covered by no utterance Unit's time range. It is
  measured on the signal (the recordings and the video's audio track), never on the recognizer's
  timestamps.
- **Cue hits**: for each cue, ``POST /v1/search`` with the cue's reference words, filtered to the
  video's doc_id (audio plane, and any plane): the top hit's start error against the cue's start
  and its span / the cue's span. A cue spans its clips' voiced frames (the same measure), so a
  recording's leading room tone is not counted as speech. Without the filter: is a video Unit
  in the top 3, and in the top 2 (issue 22, item 4)?
- **Derivation time per audio second**: ingest request to job done, per job, over audio seconds.

    SCDB_EVAL_DIR=... .venv/bin/python -m bench.speech_locators [--out bench/results]
        [--label after]

Writes ``<out>/speech_locators.json`` (one section per ``--label``) and the SRT next to it.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import secrets
import subprocess
import sys
import tempfile
import time
import wave
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from bench.common import evaldir
from bench.common.server import Server, free_port
from bench.ocr_score import levenshtein

# The recordings' folder, set by main() from SCDB_EVAL_DIR / --eval-dir (no default).
EVAL = Path("speech-pocketsphinx")
SCOPE = "acme/alpha/backend"
KEY = "aegis_sk_alice"
RATE = 16000
# The video's cues, in order; a "+" joins readings into one cue with no gap (over 15 s).
CUES = [
    "cards_001",
    "sense_and_sensibility_01_austen_64kb-0870+sense_and_sensibility_01_austen_64kb-0890"
    "+sense_and_sensibility_01_austen_64kb-0920",
    "cards_002",
    "goforward",
    "sense_and_sensibility_01_austen_64kb-0880",
    "cards_003",
    "sense_and_sensibility_01_austen_64kb-0930",
    "cards_004",
    "cards_005",
]


# --------------------------------------------------------------------------- signal measures


def read_pcm(path: Path) -> np.ndarray:
    with wave.open(str(path), "rb") as w:
        assert w.getframerate() == RATE and w.getnchannels() == 1 and w.getsampwidth() == 2
        return np.frombuffer(w.readframes(w.getnframes()), dtype=np.int16).astype(np.float64)


def voiced_frames(x: np.ndarray) -> np.ndarray:
    """Per 10 ms frame: RMS smoothed over 50 ms within 30 dB of the file's peak."""
    n = len(x) // 160
    rms = np.sqrt((x[: n * 160].reshape(n, 160) ** 2).mean(axis=1))
    smooth = np.convolve(rms, np.ones(5) / 5, mode="same")
    return smooth >= smooth.max() * 10 ** (-30 / 20)


def voiced_outside(x: np.ndarray, ranges_ms: list[tuple[int, int]]) -> tuple[int, int]:
    """(voiced frames in no range, voiced frames); a frame is inside when its centre is."""
    v = voiced_frames(x)
    centre = np.arange(len(v)) * 10 + 5
    inside = np.zeros(len(v), dtype=bool)
    for a, b in ranges_ms:
        inside |= (centre >= a) & (centre < b)
    return int((v & ~inside).sum()), int(v.sum())


# --------------------------------------------------------------------------- API helpers


def ingest(c: httpx.Client, key: str, data: bytes, mime: str, doc_id: str) -> tuple[dict, float]:
    r = c.put(f"/v1/objects/{key}", content=data, headers={"Content-Type": mime})
    assert r.status_code in (200, 201), r.text
    t0 = time.perf_counter()
    r = c.post("/v1/ingest", json={"units": [{"source_uri": key, "mime": mime, "doc_id": doc_id}]})
    res = r.json()["results"][0]
    assert res.get("job_id"), res
    while True:
        job = c.get(f"/v1/jobs/{res['job_id']}").json()
        if job["state"] in ("done", "failed"):
            break
        time.sleep(0.05)
    assert job["state"] == "done", job
    return job, time.perf_counter() - t0


def units_of(c: httpx.Client, job: dict) -> list[dict]:
    out = []
    for u in job["unit_ids"]:
        for _ in range(100):  # a worker's commit reaches the server's index within ~0.25 s
            r = c.get(f"/v1/units/{u}")
            if r.status_code != 404:
                break
            time.sleep(0.05)
        assert r.status_code == 200, r.text
        out.append(r.json())
    return sorted(out, key=lambda u: (u["locator"]["t_start_ms"], u["modality"]))


def ranges(units: list[dict]) -> list[tuple[int, int]]:
    return [
        (u["locator"]["t_start_ms"], u["locator"]["t_end_ms"])
        for u in units
        if u["modality"] == "utterance"
    ]


# --------------------------------------------------------------------------- the video


def build_video(rows: dict[str, dict], d: Path, seed: int = 7) -> tuple[Path, Path, list[dict]]:
    """The track (clips with 0-200 ms gaps), an MP4 of it over a still frame, and its cues."""
    rng = np.random.default_rng(seed)
    pcm: list[np.ndarray] = []
    t = 0
    spans = []  # each cue's clips, as sample ranges of the track
    for i, cue in enumerate(CUES):
        gap = 0 if i == 0 else int(rng.uniform(0.0, 0.2) * RATE)
        pcm.append(np.zeros(gap, dtype=np.int16))
        t += gap
        first, texts = t, []
        for part in cue.split("+"):
            x = read_pcm(EVAL / rows[part]["audio"])
            texts.append(rows[part]["text"])
            pcm.append(x.astype(np.int16))
            t += len(x)
        spans.append((first, t, " ".join(texts)))
    # A cue spans the voiced frames of its clips, judged against the track's peak as the
    # voiced-outside measure is (a quiet reading's room tone is not speech).
    voiced = voiced_frames(np.concatenate(pcm).astype(np.float64))
    cues = []
    for a, b, text in spans:
        idx = np.flatnonzero(voiced[a // 160 : b // 160]) + a // 160
        cues.append(
            {"start": round(idx[0] * 0.01, 2), "end": round((idx[-1] + 1) * 0.01, 2), "text": text}
        )
    track = d / "track.wav"
    with wave.open(str(track), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(RATE)
        w.writeframes(np.concatenate(pcm).tobytes())
    mp4 = d / "speech.mp4"
    argv = ["ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i", "color=c=navy:s=320x240:r=10"]
    argv += ["-i", str(track), "-shortest", "-c:v", "libx264", "-c:a", "aac", "-b:a", "96k"]
    subprocess.run([*argv, str(mp4)], check=True)
    return track, mp4, cues


def srt(cues: list[dict]) -> str:
    def ts(s: float) -> str:
        ms = int(round(s * 1000))
        return f"{ms // 3600000:02d}:{ms // 60000 % 60:02d}:{ms // 1000 % 60:02d},{ms % 1000:03d}"

    return "".join(
        f"{i}\n{ts(c['start'])} --> {ts(c['end'])}\n{c['text']}\n\n"
        for i, c in enumerate(cues, start=1)
    )


def cue_hits(c: httpx.Client, cues: list[dict], doc: str, planes: list[str] | None) -> dict:
    rows = []
    for cue in cues:
        body: dict[str, Any] = {"q": cue["text"], "top_k": 3, "filters": {"doc_id": doc}}
        if planes:
            body["planes"] = planes
        hit = c.post("/v1/search", json=body).json()["hits"][0]
        loc = hit["locator"]
        a, b = loc["t_start_ms"] / 1000, loc["t_end_ms"] / 1000
        span = cue["end"] - cue["start"]
        rows.append(
            {
                "cue_s": [cue["start"], cue["end"]],
                "hit_s": [a, b],
                "modality": hit["modality"],
                "start_err_ms": round(abs(a - cue["start"]) * 1000),
                "span_ratio": round((b - a) / span, 2),
            }
        )
    errs = [r["start_err_ms"] for r in rows]
    ratios = [r["span_ratio"] for r in rows]
    return {
        "within_300ms": sum(e <= 300 for e in errs),
        "span_at_most_2x": sum(x <= 2.0 for x in ratios),
        "cues": len(rows),
        "median_start_err_ms": float(np.median(errs)),
        "max_start_err_ms": max(errs),
        "max_span_ratio": max(ratios),
        "per_cue": rows,
    }


def normalize(text: str) -> list[str]:
    from ingest_media import normalize_words

    return normalize_words(text)


def run(out: Path, label: str) -> dict[str, Any]:
    rows = {r["id"]: r for r in csv.DictReader((EVAL / "transcripts.tsv").open(), delimiter="\t")}
    env = dict(os.environ)
    env["SCDB_AUDIT_KEY"] = env.get("SCDB_AUDIT_KEY") or secrets.token_hex(32)
    env.setdefault("XDG_CONFIG_HOME", tempfile.mkdtemp(prefix="scdb-bench-config-"))
    tmp = Path(tempfile.mkdtemp(prefix="scdb-speech-"))
    server = Server(tmp / "data", free_port(), tmp / "server.log", env)
    server.start()
    try:
        headers = {"Authorization": f"Bearer {KEY}", "X-Aegis-Scope": SCOPE}
        with httpx.Client(base_url=server.url, headers=headers, timeout=600.0) as c:
            edits = words = out_v = all_v = 0
            audio_s = derive_s = 0.0
            files = []
            for rid, row in rows.items():
                data = (EVAL / row["audio"]).read_bytes()
                job, took = ingest(c, f"{SCOPE}/speech/{rid}.wav", data, "audio/wav", f"rec-{rid}")
                units = units_of(c, job)
                hyp = " ".join(u["text"] for u in units)
                ref_w, hyp_w = normalize(row["text"]), normalize(hyp)
                e = levenshtein(ref_w, hyp_w)
                o, v = voiced_outside(read_pcm(EVAL / row["audio"]), ranges(units))
                edits, words, out_v, all_v = edits + e, words + len(ref_w), out_v + o, all_v + v
                audio_s, derive_s = audio_s + float(row["duration_s"]), derive_s + took
                files.append({"id": rid, "errors": e, "voiced_out": o, "voiced": v, "hyp": hyp})
                print(f"  {rid[:40]:40s} WER {e}/{len(ref_w)} voiced out {o}/{v}", flush=True)
            track, mp4, cues = build_video(rows, tmp)
            (out / "speech_locators.srt").write_text(srt(cues))
            job, took = ingest(c, f"{SCOPE}/speech/video.mp4", mp4.read_bytes(), "video/mp4", "vid")
            vunits = units_of(c, job)
            vo, vv = voiced_outside(read_pcm(track), ranges(vunits))
            video_s = len(read_pcm(track)) / RATE
            audio_only = cue_hits(c, cues, "vid", ["audio"])
            any_plane = cue_hits(c, cues, "vid", None)
            top3 = top2 = 0
            for cue in cues:
                hits = c.post("/v1/search", json={"q": cue["text"], "top_k": 3}).json()["hits"]
                top3 += any(h["doc_id"] == "vid" for h in hits)
                top2 += any(h["doc_id"] == "vid" for h in hits[:2])
            utts = [u for u in vunits if u["modality"] == "utterance"]
            result = {
                "generated_at": datetime.now(UTC).isoformat(timespec="seconds"),
                "recordings": {
                    "files": len(files),
                    "audio_s": round(audio_s, 2),
                    "wer": round(edits / max(1, words), 4),
                    "ref_words": words,
                    "voiced_outside": round(out_v / max(1, all_v), 4),
                    "derive_s_per_audio_s": round(derive_s / audio_s, 3),
                    "per_file": files,
                },
                "video": {
                    "duration_s": round(video_s, 2),
                    "cues": len(cues),
                    "utterance_units": len(utts),
                    "utterance_spans_s": [
                        round((u["locator"]["t_end_ms"] - u["locator"]["t_start_ms"]) / 1000, 2)
                        for u in utts
                    ],
                    "source_uris": sorted({u["source_uri"].split("#")[0] for u in vunits}),
                    "fragments": [u["source_uri"].split("#", 1)[-1] for u in vunits][:6],
                    "voiced_outside": round(vo / max(1, vv), 4),
                    "derive_s_per_audio_s": round(took / video_s, 3),
                    "cue_hits_audio_plane": audio_only,
                    "cue_hits_any_plane": any_plane,
                    "video_in_top3_without_filter": top3,
                    "video_in_top2_without_filter": top2,
                },
            }
    finally:
        server.stop()
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=Path("bench/results"))
    ap.add_argument("--label", default="after")
    evaldir.add_argument(ap)
    args = ap.parse_args(argv)
    global EVAL
    EVAL = evaldir.dataset_arg(args, "speech-pocketsphinx")
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / "speech_locators.json"
    report = json.loads(path.read_text()) if path.exists() else {}
    report[args.label] = run(args.out, args.label)
    path.write_text(json.dumps(report, indent=1, default=lambda o: o.item()))
    r = report[args.label]
    v = r["video"]
    print(json.dumps({k: r["recordings"][k] for k in r["recordings"] if k != "per_file"}))
    print(json.dumps({k: x for k, x in v.items() if not k.startswith("cue_hits")}))
    for k in ("cue_hits_audio_plane", "cue_hits_any_plane"):
        print(k, json.dumps({x: y for x, y in v[k].items() if x != "per_cue"}, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
