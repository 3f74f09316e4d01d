"""Engine subprocess: ``python -I media_worker.py <task> <json args>`` -> one JSON line on stdout.

Run by ``derive.run_worker`` in a fresh interpreter, so a hostile PDF or image can only crash
this process. It sets its own ``RLIMIT_AS``/``RLIMIT_CPU`` before importing any engine, and it is
self-contained (it never imports the ``superchargedb`` package, which loads onnxruntime).

Tasks:
- ``pdf``: page sizes (rotated CropBox, points) and the text layer as words with tight and loose
  boxes in top-left-origin points; pages without a text layer are rendered to PNG for OCR.
- ``image``: header facts (size, format, EXIF) checked against the pixel cap before decoding;
  writes an upright PNG for OCR when the original is not one Tesseract reads as displayed and,
  for scans (``ocr_text_px``), one without dot leaders, resampled so that its text lines are
  about that tall, and (``rules``) without its ruled lines, whose boxes it returns
  (``page_prep.py``, loaded by path).
- ``stack``: pieces of an OCR image (turned when asked) on one sheet, to be read again.
- ``ink``: words' boxes on an OCR image fitted to their ink (``word_ink.py``, loaded by path).
- ``transcribe``: faster-whisper segments with word timestamps (seconds).
"""

from __future__ import annotations

import json
import resource
import sys
import time
from typing import Any

SPACES = frozenset(" \t\r\n\x0b\x0c\xa0\u2000\u2001\u2002\u2003\u2009\u200a\u200b\u3000")
LIGATURES = {"\ufb00": "ff", "\ufb01": "fi", "\ufb02": "fl", "\ufb03": "ffi", "\ufb04": "ffl"}


def set_limits(args: dict[str, Any]) -> None:
    mem = int(args.get("memory_mb", 2048)) * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
    cpu = int(args.get("cpu_s", 605))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu))


# --------------------------------------------------------------------------- pdf


def page_frame(page: Any) -> tuple[float, float, float, float, int]:
    """The CropBox of a page and its /Rotate: (left, bottom, right, top, rotation)."""
    left, bottom, right, top = page.get_cropbox()
    return left, bottom, right, top, page.get_rotation() % 360


def to_upright(
    box: tuple[float, float, float, float], fr: tuple[float, float, float, float, int]
) -> list[float]:
    """PDF user-space box (left, bottom, right, top) -> [x0, y0, x1, y1] from the CropBox's
    top-left corner, before the page's /Rotate (the frame in which its text runs left to right)."""
    cl, _, _, ct, _ = fr
    x0, y0, x1, y1 = box
    return [round(x0 - cl, 3), round(ct - y1, 3), round(x1 - cl, 3), round(ct - y0, 3)]


def rotate_box(box: list[float], w0: float, h0: float, rot: int) -> list[float]:
    """An upright-frame box -> the displayed page (rotated clockwise by ``rot``), top-left origin;
    ``w0``/``h0`` are the CropBox's size before rotation."""
    x0, y0, x1, y1 = box
    if rot == 90:
        return [h0 - y1, x0, h0 - y0, x1]
    if rot == 180:
        return [w0 - x1, h0 - y1, w0 - x0, h0 - y0]
    if rot == 270:
        return [y0, w0 - x1, y1, w0 - x0]
    return [x0, y0, x1, y1]


def union(a: list[float], b: list[float]) -> list[float]:
    return [min(a[0], b[0]), min(a[1], b[1]), max(a[2], b[2]), max(a[3], b[3])]


def page_words(page: Any) -> list[dict[str, Any]]:
    """The text layer as words: text, tight box, loose box, font size, line-break flag (boxes in
    the upright frame, see ``to_upright``)."""
    import pypdfium2.raw as c

    tp = page.get_textpage()
    fr = page_frame(page)
    words: list[dict[str, Any]] = []
    cur: dict[str, Any] | None = None
    brk = False
    n = tp.count_chars()
    for i in range(n):
        code = c.FPDFText_GetUnicode(tp.raw, i)
        if 0xD800 <= code <= 0xDBFF and i + 1 < n:  # high surrogate: join with the next unit
            low = c.FPDFText_GetUnicode(tp.raw, i + 1)
            code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
        elif 0xDC00 <= code <= 0xDFFF or code in (0, 0xFFFE, 0xFFFF):
            continue
        ch = chr(code)
        if ch in "\r\n":
            brk = True
        if ch in SPACES or c.FPDFText_IsGenerated(tp.raw, i) == 1:
            cur = None
            continue
        ch = LIGATURES.get(ch, "-" if ch in "\x02\xad" else ch)
        tight = to_upright(tp.get_charbox(i), fr)
        loose = to_upright(tp.get_charbox(i, loose=True), fr)
        size = max(loose[3] - loose[1], loose[2] - loose[0], 1.0)  # the font's em, as drawn
        if cur is not None:
            # A jump back, a gap wider than a space, or a different line starts a new word.
            gap = loose[0] - cur["lbox"][2]
            mid = (loose[1] + loose[3]) / 2
            same_line = cur["lbox"][1] <= mid <= cur["lbox"][3]
            if gap > 0.25 * size or gap < -0.5 * size or not same_line:
                cur = None
        if cur is None:
            cur = {"text": ch, "box": tight, "lbox": loose, "size": size, "brk": brk}
            words.append(cur)
            brk = False
        else:
            cur["text"] += ch
            if tight[2] > tight[0] or tight[3] > tight[1]:
                cur["box"] = union(cur["box"], tight)
            cur["lbox"] = union(cur["lbox"], loose)
            cur["size"] = max(cur["size"], size)
    tp.close()
    return words


def task_pdf(args: dict[str, Any]) -> dict[str, Any]:
    """Without ``render``: every page's size and words. With ``render`` (1-based page numbers):
    those pages as grayscale PNGs in ``render_dir`` at ``dpi`` (lower if over the pixel cap)."""
    import pypdfium2 as pdfium

    try:
        pdf = pdfium.PdfDocument(args["path"])
    except pdfium.PdfiumError as exc:
        raise ValueError(f"malformed PDF ({exc})") from None
    n = len(pdf)
    if n == 0:
        raise ValueError("the PDF has no pages")
    if n > args["max_pages"]:
        raise ValueError(f"the PDF has {n} pages, over the limit of {args['max_pages']}")
    pages = []
    for number in args.get("render") or range(1, n + 1):
        page = pdf[int(number) - 1]
        width, height = page.get_size()
        entry: dict[str, Any] = {"page": number, "width": width, "height": height}
        if args.get("render"):
            dpi = float(args["dpi"])
            px = width * height * (dpi / 72) ** 2
            if px > args["max_pixels"]:  # a huge page is rendered at a lower resolution
                dpi *= (args["max_pixels"] / px) ** 0.5
            png = f"{args['render_dir']}/page-{number:05d}.png"
            page.render(scale=dpi / 72, grayscale=True).to_pil().save(png, compress_level=1)
            entry["render"] = {"png": png, "scale": dpi / 72}
        else:
            left, bottom, right, top, rot = page_frame(page)
            entry["rotation"] = rot  # width/height are as displayed (rotation applied)
            entry["upright_size"] = [right - left, top - bottom]
            entry["words"] = page_words(page)
        pages.append(entry)
        page.close()
    pdf.close()
    return {"pages": pages}


# --------------------------------------------------------------------------- image


def page_prep() -> Any:
    """``page_prep.py`` beside this file, loaded by path: the package is never imported here."""
    return beside("page_prep.py")


def beside(name: str) -> Any:
    """A worker-side module beside this file (numpy and Pillow only), loaded by path."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).with_name(name)
    spec = importlib.util.spec_from_file_location(f"scdb_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


MAX_OCR_UPSCALE = 3.0  # beyond this, resampling invents no more detail for Tesseract


def otsu(gray: Any) -> int:
    """Otsu's global threshold of an 8-bit grayscale array."""
    import numpy as np

    p = np.bincount(gray.ravel(), minlength=256).astype(np.float64)
    p /= max(1.0, p.sum())
    w = np.cumsum(p)
    mu = np.cumsum(p * np.arange(256))
    with np.errstate(divide="ignore", invalid="ignore"):
        between = (mu[-1] * w - mu) ** 2 / (w * (1.0 - w))
    between = np.nan_to_num(between, nan=-1.0, posinf=-1.0)
    return int(between.argmax())


def text_height(gray: Any, strips: int = 16) -> float | None:
    """The page's typical height of a text line's ink, in pixels (None: no text-like rows).

    The page is cut into vertical strips; in each, rows holding ink form runs separated by the
    blank leading between lines, and a run is one line's ink (ascenders to descenders of the
    words inside the strip). The median run between 1/8 of the page and three stroke widths
    (the median horizontal ink run) is the estimate: rules, rows of leader dots and specks are
    shorter, figures taller or outnumbered by text lines."""
    import numpy as np

    if gray.size == 0 or int(gray.max()) - int(gray.min()) < 32:
        return None
    ink = gray < otsu(gray)
    if ink.mean() > 0.5:  # light text on a dark page
        ink = ~ink
    edges = np.diff(ink.astype(np.int8), axis=1, prepend=0, append=0).ravel()
    strokes = np.flatnonzero(edges == -1) - np.flatnonzero(edges == 1)
    shortest = max(4.0, 3.0 * float(np.median(strokes))) if len(strokes) else 4.0
    h, w = ink.shape
    step = max(32, w // strips)
    runs: list[Any] = []
    for x in range(0, max(1, w - step // 2), step):
        rows = ink[:, x : x + step].any(axis=1).astype(np.int8)
        edges = np.diff(np.concatenate(([0], rows, [0])))
        runs.append(np.flatnonzero(edges == -1) - np.flatnonzero(edges == 1))
    r = np.concatenate(runs) if runs else np.empty(0)
    r = r[(r >= shortest) & (r <= h / 8)]
    return float(np.median(r)) if len(r) >= 8 else None


def integral(a: Any) -> Any:
    """Summed-area table of a 2-D array, one row and column of zeros in front."""
    import numpy as np

    ii = np.zeros((a.shape[0] + 1, a.shape[1] + 1), dtype=np.int32)
    np.cumsum(a, axis=0, dtype=np.int32, out=ii[1:, 1:])
    np.cumsum(ii[1:, 1:], axis=1, out=ii[1:, 1:])
    return ii


def window_sums(ii: Any, k: int) -> Any:
    """Sums over every k x k window of the array behind ``ii``, indexed by the top-left pixel."""
    return ii[k:, k:] - ii[:-k, k:] - ii[k:, :-k] + ii[:-k, :-k]


def leader_mask(ink: Any, line_px: float, min_dots: int = 5) -> Any:
    """The ink of dot leaders (table-of-contents dots, dotted fill lines): blobs that fit in a
    box of 0.3 line heights with no other ink within another such box around them, at least
    ``min_dots`` on a row with gaps under four boxes. Tesseract reads a row of dots as words
    ("eee cee", "0.000"), most of all once upscaled. An ``i``'s dot has its stem nearby, a
    sentence's full stop has no four neighbours in a row: neither is touched."""
    import numpy as np

    h, w = ink.shape
    k = max(2, int(round(0.3 * line_px)))
    n = 3 * k  # the box and its empty ring
    out = np.zeros_like(ink)
    if h <= n or w <= n:
        return out
    ii = integral(ink)
    inner = window_sums(ii, k)[k : h - 2 * k + 1, k : w - 2 * k + 1]
    alone = (inner > 0) & (inner == window_sums(ii, n))
    if not alone.any():
        return out
    # every pixel inside some lone-blob box (padded: each pixel has k windows above-left)
    boxes = np.zeros((h + k, w + k), dtype=bool)
    boxes[2 * k : 2 * k + alone.shape[0], 2 * k : 2 * k + alone.shape[1]] = alone
    dots = (window_sums(integral(boxes), k)[1 : h + 1, 1 : w + 1] > 0) & ink
    starts = dots.copy()
    starts[:, 1:] &= ~dots[:, :-1]
    for y in np.flatnonzero(starts.sum(axis=1) >= min_dots):
        xs = np.flatnonzero(dots[y])
        gaps = np.diff(xs)
        first = np.concatenate(([1], gaps > 1)).astype(np.int32)  # a dot's first pixel
        group = np.cumsum(np.concatenate(([True], gaps > 4 * k)))
        count = np.bincount(group, weights=first)
        out[y, xs[count[group] >= min_dots]] = True
    return out


def ocr_prepare(
    img: Any, target_px: float, max_pixels: int, resize: bool = True
) -> tuple[Any, float, float | None, int]:
    """A page made easier for Tesseract: grey stored as RGB becomes one channel, dot leaders
    are painted over with the paper's colour, and the page is scaled up so that its text lines
    are about ``target_px`` tall (a 150-dpi render of 10-pt text has ~15-px lines, which
    Tesseract misreads). Returns (image, scale, measured line height, leader pixels erased);
    with ``resize`` off the image is returned at its size and the caller scales it."""
    import numpy as np
    from PIL import Image

    if img.mode == "1":
        img = img.convert("L")
    elif img.mode == "RGB":
        arr = np.asarray(img)
        if np.array_equal(arr[..., 0], arr[..., 1]) and np.array_equal(arr[..., 1], arr[..., 2]):
            img = Image.fromarray(arr[..., 0])  # grey stored as RGB: one channel is the same
    gray = np.asarray(img.convert("L"))
    height = text_height(gray)
    if height is None:
        return img, 1.0, None, 0
    ink = gray < otsu(gray)
    erased = 0
    if ink.mean() < 0.5:  # dark text on light paper (leaders on dark paper are left alone)
        leaders = leader_mask(ink, height)
        erased = int(leaders.sum())
        if erased:
            arr = np.array(img)
            arr[leaders] = np.median(arr[~ink][::97], axis=0).astype(arr.dtype)
            img = Image.fromarray(arr)
    scale = min(MAX_OCR_UPSCALE, target_px / height, (max_pixels / (img.width * img.height)) ** 0.5)
    if scale < 1.2:  # close enough: resampling would cost time and gain nothing
        return img, 1.0, height, erased
    if not resize:  # the caller scales it (after finding the rules at this size)
        return img, scale, height, erased
    size = (round(img.width * scale), round(img.height * scale))
    return img.resize(size, Image.Resampling.LANCZOS), scale, height, erased


EXIF_TAGS = {0x010F: "make", 0x0110: "model", 0x0132: "datetime", 0x0131: "software"}
EXIF_IFD_TAGS = {0x9003: "datetime_original", 0x9011: "offset_time_original"}
UPRIGHT_FORMATS = frozenset({"PNG", "JPEG", "TIFF", "GIF", "BMP", "PPM"})


def task_image(args: dict[str, Any]) -> dict[str, Any]:
    from PIL import Image, ImageOps

    Image.MAX_IMAGE_PIXELS = int(args["max_pixels"])  # Pillow refuses bombs on its own, too
    try:
        im = Image.open(args["path"])  # reads the header only
    except Image.DecompressionBombError:
        raise ValueError(f"the image is over the limit of {args['max_pixels']} pixels") from None
    except Exception as exc:
        raise ValueError(f"malformed or unsupported image ({exc})") from None
    w, h = im.size
    if w * h > args["max_pixels"] or w <= 0 or h <= 0:
        raise ValueError(f"the image has {w}x{h} pixels, over the limit of {args['max_pixels']}")
    exif: dict[str, str] = {}
    orientation = 1
    try:
        raw = im.getexif()
        orientation = int(raw.get(0x0112, 1) or 1)
        items = [(EXIF_TAGS, raw), (EXIF_IFD_TAGS, raw.get_ifd(0x8769))]
        for names, ifd in items:
            for tag, name in names.items():
                v = ifd.get(tag)
                if isinstance(v, bytes):
                    v = v.decode("utf-8", "replace")
                if v is not None and str(v).strip("\x00 "):
                    exif[name] = str(v).strip("\x00 ")[:200]
    except Exception:  # broken EXIF is not a reason to refuse the image
        pass
    fmt = im.format or "unknown"
    frames = int(getattr(im, "n_frames", 1))
    dpi = im.info.get("dpi")
    ocr_path, ocr_scale, text_px, erased = args["path"], 1.0, None, 0
    rules: dict[str, list[list[int]]] = {"h": [], "v": []}
    upright = fmt in UPRIGHT_FORMATS and orientation == 1 and im.mode in ("1", "L", "RGB")
    target = float(args.get("ocr_text_px") or 0)
    if not upright or frames > 1 or target:
        im.seek(0)
        img = ImageOps.exif_transpose(im) or im
        if img.mode not in ("1", "L", "RGB"):
            img = img.convert("RGBA")
            bg = Image.new("RGBA", img.size, (255, 255, 255, 255))
            img = Image.alpha_composite(bg, img).convert("RGB")
        w, h = img.size
        if target:
            img, ocr_scale, text_px, erased = ocr_prepare(
                img, target, int(args["max_pixels"]), resize=False
            )
        mask, pp = None, page_prep() if args.get("rules") else None
        if pp is not None and text_px:  # found before scaling up: 1/scale^2 of the work
            mask, found = pp.find_rules(img, text_px)
            rules = pp.scaled(found, ocr_scale)
        if ocr_scale != 1.0:
            size = (round(img.width * ocr_scale), round(img.height * ocr_scale))
            img = img.resize(size, Image.Resampling.LANCZOS)
        if pp is not None and mask is not None:
            img = pp.paint(img, mask)
        if not upright or frames > 1 or ocr_scale != 1.0 or erased or rules["h"] or rules["v"]:
            ocr_path = f"{args['out_dir']}/ocr.png"
            keep: dict[str, Any] = {}
            if isinstance(dpi, tuple) and len(dpi) == 2 and min(dpi) > 0:
                keep["dpi"] = (dpi[0] * ocr_scale, dpi[1] * ocr_scale)
            img.save(ocr_path, compress_level=1, **keep)
    return {
        "width": w,
        "height": h,
        "format": fmt,
        "mode": im.mode,
        "frames": frames,
        "orientation": orientation,
        "exif": exif,
        "ocr_path": ocr_path,
        "ocr_scale": ocr_scale,  # ocr_path's pixels per pixel of the (upright) image
        "text_px": text_px,
        "leader_px": erased,
        "rules": rules,  # ruled lines taken out, boxes in ocr_path's pixels
    }


def task_stack(args: dict[str, Any]) -> dict[str, Any]:
    """Pieces of an OCR image (one this worker wrote) stacked on one sheet (``page_prep.stack``),
    so that a second look at a few of them costs one Tesseract call."""
    from PIL import Image

    Image.MAX_IMAGE_PIXELS = int(args["max_pixels"])
    crops = args["crops"][:64]
    with Image.open(args["path"]) as im:
        sheet, where = page_prep().stack(im, crops, int(args.get("gap", 32)))
    if sheet.width * sheet.height > int(args["max_pixels"]):
        raise ValueError("the pieces to read again are over the pixel limit")
    out = f"{args['out_dir']}/{args.get('name', 'stack')}.png"
    sheet.save(out, compress_level=1)
    return {"png": out, "where": where}


def task_ink(args: dict[str, Any]) -> dict[str, Any]:
    """Words' boxes on an OCR image (one this worker wrote) fitted to their ink."""
    import numpy as np
    from PIL import Image

    Image.MAX_IMAGE_PIXELS = int(args["max_pixels"])
    with Image.open(args["path"]) as im:
        gray = np.asarray(im.convert("L"))
    wi = beside("word_ink.py")
    fitted = wi.ink_boxes(gray, args["boxes"], int(args["ink"]), int(args["pad"]), int(args["gap"]))
    return {"boxes": [list(b) for b in fitted]}


# --------------------------------------------------------------------------- speech


def task_transcribe(args: dict[str, Any]) -> dict[str, Any]:
    """Transcribe [start_s, end_s) of a 16-bit mono WAV; times are absolute seconds."""
    import wave

    import numpy as np

    t0 = time.perf_counter()
    with wave.open(args["wav"], "rb") as w:
        rate = w.getframerate()
        start = int(float(args.get("start_s", 0.0)) * rate)
        w.setpos(min(start, w.getnframes()))
        n = int((float(args["end_s"]) - float(args.get("start_s", 0.0))) * rate)
        pcm = np.frombuffer(w.readframes(n), dtype=np.int16)
    if rate != 16000 or not len(pcm):
        raise ValueError(f"expected 16 kHz mono audio, got {rate} Hz and {len(pcm)} samples")
    audio = pcm.astype(np.float32) / 32768.0
    offset = start / rate

    import ctranslate2
    from faster_whisper import WhisperModel
    from faster_whisper.vad import VadOptions, get_speech_timestamps

    # Temperature fallback samples: a fixed seed keeps a re-run (a retried job) identical.
    ctranslate2.set_random_seed(0)

    model = WhisperModel(
        args["model_dir"],
        device="cpu",
        compute_type="int8",
        cpu_threads=int(args["threads"]),
        num_workers=1,
        local_files_only=True,
    )
    # Silences of 0.5 s or more split the speech; the regions are returned to snap word times,
    # which Whisper tends to stretch over the pause that follows a word.
    vad = VadOptions(min_silence_duration_ms=500, speech_pad_ms=150)
    speech = [
        [round(offset + r["start"] / rate, 3), round(offset + r["end"] / rate, 3)]
        for r in get_speech_timestamps(audio, vad)
    ]
    t1 = time.perf_counter()
    segments, info = model.transcribe(
        audio,
        language=args.get("language") or "en",
        beam_size=int(args.get("beam_size", 5)),
        word_timestamps=True,
        vad_filter=True,
        vad_parameters=vad,
        condition_on_previous_text=False,
    )
    out = []
    for s in segments:
        words = [
            [w.word, round(offset + w.start, 3), round(offset + w.end, 3), round(w.probability, 3)]
            for w in s.words or []
        ]
        out.append(
            {
                "start": round(offset + s.start, 3),
                "end": round(offset + s.end, 3),
                "text": s.text,
                "avg_logprob": round(s.avg_logprob, 4),
                "no_speech_prob": round(s.no_speech_prob, 4),
                "words": words,
            }
        )
    t2 = time.perf_counter()
    return {
        "segments": out,
        "speech": speech,
        "language": info.language,
        "load_s": round(t1 - t0, 3),
        "transcribe_s": round(t2 - t1, 3),
    }


def task_pdf_pages(args: dict[str, Any]) -> dict[str, Any]:
    """The page count alone (a media job's cost, measured before it is queued)."""
    import pypdfium2 as pdfium

    try:
        pdf = pdfium.PdfDocument(args["path"])
    except pdfium.PdfiumError as exc:
        raise ValueError(f"malformed PDF ({exc})") from None
    return {"pages": min(len(pdf), int(args["max_pages"]) + 1)}


TASKS = {
    "pdf": task_pdf,
    "pdf_pages": task_pdf_pages,
    "image": task_image,
    "stack": task_stack,
    "ink": task_ink,
    "transcribe": task_transcribe,
}


def main(argv: list[str]) -> int:
    if len(argv) != 3 or argv[1] not in TASKS:
        print(json.dumps({"ok": False, "error": f"usage: media_worker.py {'|'.join(TASKS)} JSON"}))
        return 2
    args = json.loads(argv[2])
    set_limits(args)
    try:
        result = TASKS[argv[1]](args)
    except MemoryError:
        print(
            json.dumps({"ok": False, "error": f"out of memory (limit {args.get('memory_mb')} MB)"})
        )
        return 0
    except Exception as exc:
        print(json.dumps({"ok": False, "error": str(exc) or type(exc).__name__}))
        return 0
    sys.stdout.write(json.dumps({"ok": True, "result": result}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
