"""Images -> Units: layout regions of Tesseract words for scans, one visual Unit for other images.

A scan is first prepared by the image worker: resampled so that its text lines are about
``OCR_TEXT_PX`` tall (small type is Tesseract's main source of errors), dot leaders and ruled
lines painted out (``page_prep.py``). Rotated text is read again turned
(``tesseract.read_rotated``), the words Tesseract doubted again cut out and enlarged
(``reread.py``), and the layout pass (``layout.py``) makes the regions: table
cells, key/value lines, paragraphs. A scan becomes one doc_visual Unit per region (bbox in the
image's pixels, page 1) with its word table. Any other image becomes one visual Unit whose text
is an optional caption, its OCR text and its metadata (size, format, EXIF capture time, camera),
with the bbox of the whole image.
"""

from __future__ import annotations

import base64
import logging
import math
import tempfile
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import httpx

from ..types import Locator
from . import layout
from .derive_base import (
    DerivationError,
    Derived,
    DeriveOptions,
    MediaLimits,
    run_worker,
)
from .page_words import Box, PageWord, page_text, union
from .reread import reread_doubted
from .tesseract import (  # re-exported: derive_av and derive_pdf read words through here
    MIN_PHOTO_CONF,
    MIN_WORD_CONF,
    OcrWord,
    fit_to_ink,
    ocr_lines,
    ocr_words,
    read_rotated,
)

__all__ = ["MIN_PHOTO_CONF", "MIN_WORD_CONF", "OcrWord", "ocr_lines", "ocr_words", "read_rotated"]

log = logging.getLogger(__name__)

MAX_REGION_CHARS = 1200  # a region longer than this is split at line boundaries (embedding window)
# Scans whose text lines (ink, ascender to descender) are shorter than this are upscaled: at a
# 150-dpi render of 10-pt type (~15 px) Tesseract drops and misreads words. On the rendered-PDF
# eval pages 20-24 px was the flat optimum (30 and 38 px read slightly worse and cost more).
OCR_TEXT_PX = 24.0


def split_lines(lines: list[Any], max_chars: int, text_of: Any) -> list[list[Any]]:
    """Split a region's lines into consecutive runs of at most ``max_chars`` characters."""
    runs: list[list[Any]] = [[]]
    size = 0
    for line in lines:
        n = len(text_of(line)) + 1
        if runs[-1] and size + n > max_chars:
            runs.append([])
            size = 0
        runs[-1].append(line)
        size += n
    return [r for r in runs if r]


def ocr_regions(
    words: list[OcrWord], *, page: int, scale: float, modality: str, fragment: str
) -> list[Derived]:
    """OCR paragraphs (Tesseract's) -> doc_visual Units; boxes are divided by ``scale``."""
    return region_units(
        ocr_lines(words), page=page, scale=scale, modality=modality, fragment=fragment
    )


def region_units(
    paras: list[list[list[OcrWord]]],
    *,
    page: int,
    scale: float,
    modality: str,
    fragment: str,
    snap: bool = False,
) -> list[Derived]:
    """Regions (lists of lines of words) -> doc_visual Units; boxes are divided by ``scale``
    (pixels per unit; ``snap``: out to whole units, the pixels of a scan), each keeps its word
    table."""

    def line_text(line: list[OcrWord]) -> str:
        return " ".join(w.text for w in line)

    units: list[Derived] = []
    for para in paras:
        for run in split_lines(para, MAX_REGION_CHARS, line_text):
            ws = [w for line in run for w in line]
            lines = [
                [PageWord(w.text, scaled(w.box, scale, snap), w.conf / 100) for w in line]
                for line in run
            ]
            text, table = page_text(lines, page)
            boxed = [w for line in lines for w in line]
            meta = {
                "source": "ocr",
                "confidence": round(sum(w.conf for w in ws) / len(ws) / 100, 3),
                "words": [[w.text, *w.box] for w in boxed],
                "unit_words": table,
            }
            units.append(
                Derived(
                    text=text,
                    modality=modality,
                    plane="doc_visual",
                    locator=Locator(kind="bbox", box=union([w.box for w in boxed]), page=page),
                    fragment=fragment,
                    meta=meta,
                )
            )
    return units


def scaled(box: tuple[float, float, float, float], scale: float, snap: bool = False) -> Box:
    """A box in OCR-image pixels -> the Unit's coordinates (``scale`` pixels per unit). With
    ``snap`` it covers the whole pixels of the image as given that its ink touches (D-256): an
    upscaled OCR image's box edge falls inside a source pixel, whose ink the word holds."""
    x0, y0, x1, y1 = (v / scale for v in box)
    if snap:  # 1e-6: a box edge exactly on a pixel edge stays there despite float division
        x0, y0 = math.floor(x0 + 1e-6), math.floor(y0 + 1e-6)
        x1, y1 = math.ceil(x1 - 1e-6), math.ceil(y1 - 1e-6)
    return (round(x0, 2), round(y0, 2), round(x1, 2), round(y1, 2))


def image_info(
    path: Path,
    out_dir: Path,
    *,
    limits: MediaLimits,
    options: DeriveOptions,
    ocr_text_px: float | None = None,
    rules: bool = False,
) -> Any:
    """Header facts (size, format, EXIF) and an upright image for OCR, from the worker; with
    ``ocr_text_px``, that image is resampled to that line height (``ocr_scale``)."""
    args: dict[str, Any] = {
        "path": str(path),
        "max_pixels": limits.max_pixels,
        "out_dir": str(out_dir),
    }
    if ocr_text_px:
        args["ocr_text_px"] = ocr_text_px
    if rules:
        args["rules"] = True
    return run_worker("image", args, limits=limits, options=options, what="image decoder")


def derive_scan(path: Path, *, limits: MediaLimits, options: DeriveOptions) -> list[Derived]:
    """A scanned page image -> one doc_visual Unit per layout region (pixel boxes, page 1)."""
    with tempfile.TemporaryDirectory(prefix="scdb-ocr-") as tmp:
        info = image_info(
            path, Path(tmp), limits=limits, options=options, ocr_text_px=OCR_TEXT_PX, rules=True
        )
        ocr_path = Path(info["ocr_path"])  # the source itself when it needed no preparing
        words = ocr_words(ocr_path, limits=limits, options=options)
        scale = float(info.get("ocr_scale") or 1.0)
        h = float(info.get("text_px") or 0) * scale
        if h:  # rotated text (a margin's document number) is read again, turned upright
            words = read_rotated(
                words, ocr_path, h, out_dir=Path(tmp), limits=limits, options=options
            )
            # Doubted words are read again, cut out and enlarged (D-289).
            words = reread_doubted(
                words, ocr_path, h, out_dir=Path(tmp), limits=limits, options=options
            )
            # Tesseract's boxes are line-high and cut strokes: fitted to the ink (D-256).
            words = fit_to_ink(words, ocr_path, h, limits=limits, options=options)
    # The layout pass needs the page's line height (layout.py); without one, Tesseract's own.
    paras = layout.regions(words, info.get("rules") or {}, h) if h else ocr_lines(words)
    units = region_units(paras, page=1, scale=scale, modality="scan", fragment="#page=1", snap=True)
    if not units:
        raise DerivationError("no text found in the scanned image")
    return units


@dataclass
class ImageDescription:
    text: str
    ocr_text: str
    width: int
    height: int
    meta: dict[str, Any] = field(default_factory=dict)


def exif_time(exif: dict[str, str]) -> datetime | None:
    """EXIF DateTimeOriginal (with OffsetTimeOriginal when present, else read as UTC)."""
    raw = exif.get("datetime_original") or exif.get("datetime")
    if not raw:
        return None
    try:
        dt = datetime.strptime(raw[:19], "%Y:%m:%d %H:%M:%S")
    except ValueError:
        return None
    tz: timezone = UTC
    off = exif.get("offset_time_original", "")
    if len(off) == 6 and off[0] in "+-" and off[3] == ":":
        sign = 1 if off[0] == "+" else -1
        tz = timezone(sign * timedelta(hours=int(off[1:3]), minutes=int(off[4:6])))
    return dt.replace(tzinfo=tz).astimezone(UTC)


class OcrMetadataCaptioner:
    """The offline default: an image is described by its OCR text and its metadata."""

    def __init__(self, limits: MediaLimits | None = None, options: DeriveOptions | None = None):
        self.limits = limits or MediaLimits()
        self.options = options or DeriveOptions()

    def describe(self, image_path: Path) -> ImageDescription:
        with tempfile.TemporaryDirectory(prefix="scdb-img-") as tmp:
            info = image_info(image_path, Path(tmp), limits=self.limits, options=self.options)
            ocr = ocr_words(
                Path(info["ocr_path"]),
                limits=self.limits,
                options=self.options,
                min_conf=MIN_PHOTO_CONF,
            )
        ocr_text = "\n".join(
            "\n".join(" ".join(w.text for w in line) for line in para) for para in ocr_lines(ocr)
        )
        exif: dict[str, str] = info["exif"]
        facts = [f"{info['format']} image, {info['width']}x{info['height']} pixels"]
        meta: dict[str, Any] = {"width": info["width"], "height": info["height"], "exif": exif}
        meta["format"] = info["format"]
        taken = exif_time(exif)
        if taken is not None:
            meta["captured_at"] = int(taken.timestamp() * 1000)  # epoch ms, UTC
            meta["captured_at_iso"] = taken.isoformat().replace("+00:00", "Z")
            facts.append(f"taken {taken:%Y-%m-%d %H:%M} UTC")
        camera = " ".join(v for v in (exif.get("make"), exif.get("model")) if v)
        if camera:
            facts.append(f"camera {camera}")
        if ocr:
            meta["confidence"] = round(sum(w.conf for w in ocr) / len(ocr) / 100, 3)
        text = "\n".join(t for t in (ocr_text, "[" + "; ".join(facts) + "]") if t)
        return ImageDescription(text, ocr_text, info["width"], info["height"], meta)

    def caption(self, image_path: Path) -> str | None:
        return self.describe(image_path).text or None


class HttpCaptioner:
    """An OpenAI-compatible vision chat endpoint (OpenAI, vLLM, llama.cpp server, Ollama)."""

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        *,
        timeout_s: float = 60.0,
        max_bytes: int = 8 * 1024 * 1024,
        prompt: str = "Describe this image in two or three factual sentences.",
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.model, self.api_key, self.timeout_s = model, api_key, timeout_s
        self.max_bytes, self.prompt = max_bytes, prompt

    def caption(self, image_path: Path) -> str | None:
        from .derive_base import sniff

        data = Path(image_path).read_bytes()
        if len(data) > self.max_bytes:
            return None
        url = f"data:{sniff(data[:64])};base64,{base64.b64encode(data).decode()}"
        body = {
            "model": self.model,
            "max_tokens": 200,
            "temperature": 0,
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": self.prompt},
                        {"type": "image_url", "image_url": {"url": url}},
                    ],
                }
            ],
        }
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        try:
            r = httpx.post(
                f"{self.base_url}/chat/completions",
                json=body,
                headers=headers,
                timeout=self.timeout_s,
            )
            r.raise_for_status()
            text = r.json()["choices"][0]["message"]["content"]
        except (httpx.HTTPError, ValueError, KeyError, IndexError, TypeError) as exc:
            log.warning("captioner %s failed: %s", self.base_url, exc)
            return None
        return text.strip() if isinstance(text, str) and text.strip() else None


def derive_image(
    path: Path, mime: str, *, limits: MediaLimits, options: DeriveOptions
) -> list[Derived]:
    """One visual Unit: [caption] + OCR text + metadata, boxed as the whole image."""
    desc = OcrMetadataCaptioner(limits, options).describe(path)
    meta = dict(desc.meta, mime=mime)
    text = desc.text
    if options.captioner is not None:
        caption = options.captioner.caption(path)
        if caption:
            meta["caption"] = caption
            text = f"{caption}\n{text}"
    box = (0.0, 0.0, float(desc.width), float(desc.height))
    return [
        Derived(
            text=text,
            modality="image",
            plane="visual",
            locator=Locator(kind="bbox", box=box, page=1),
            fragment="",
            meta=meta,
        )
    ]
