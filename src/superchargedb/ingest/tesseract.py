"""Tesseract's words: the engine call and its TSV (``ocr_words``), Tesseract's own paragraphs
(``ocr_lines``), and a second look at rotated text (``read_rotated``, D-213) on a sheet of pieces
(``read_sheet``; doubted words use it too, ``reread.py``).

Tesseract runs as an rlimited subprocess (``tesseract img stdout --psm 3 tsv``); its TSV gives
each word's text, confidence and pixel box, and its block/paragraph/line numbers.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from . import layout
from .derive_base import DeriveOptions, MediaLimits, run_engine, run_worker

ALNUM = re.compile(r"[^\W_]")
MIN_WORD_CONF = 20.0  # scans: punctuation-only specks below this are dropped, words are kept
MIN_PHOTO_CONF = 50.0  # photos and frames: texture read as letters is mostly low-confidence
TURNS = (90, 270)  # rotated text is read turned both ways (counter-clockwise degrees)
MIN_TURNED_CONF = 60.0  # a turned reading below this is left out (the layout pass drops it)
MAX_TURNED = 8  # at most this many rotated words per page are read again
INK = 230  # a pixel darker than this is ink for a word's box (its grey edge included, D-256)
INK_GAP = 0.1  # ink rows this many line heights apart are one word's (an i's dot), else not


@dataclass(frozen=True)
class OcrWord:
    text: str
    box: tuple[float, float, float, float]  # x0, y0, x1, y1 in pixels, top-left origin
    conf: float
    group: tuple[int, int]  # (block_num, par_num)
    line: tuple[int, int, int]  # (block_num, par_num, line_num)
    turned: int = 0  # degrees the word was turned to be read (rotated text read again)


def ocr_words(
    image: Path,
    *,
    limits: MediaLimits,
    options: DeriveOptions,
    dpi: int | None = None,
    min_conf: float = MIN_WORD_CONF,
    psm: int = 3,
) -> list[OcrWord]:
    """Words with pixel boxes from ``tesseract <image> stdout --psm 3 tsv``.

    With the default ``min_conf`` (scans) every word holding a letter or digit is kept whatever
    its confidence: Tesseract gives 0 to correct pieces of a word it split (``SESSION`` +
    ``_USER``), and a doubtful word is still worth a search hit; only punctuation-only specks
    below ``MIN_WORD_CONF`` go. With a higher ``min_conf`` (photos, video frames) a word needs a
    letter or digit and that confidence."""
    argv = ["tesseract", str(image), "stdout", "-l", options.ocr_lang, "--psm", str(psm)]
    if dpi:
        argv += ["--dpi", str(int(dpi))]
    out = run_engine([*argv, "tsv"], limits=limits, options=options, what="tesseract")
    words: list[OcrWord] = []
    for row in out.decode("utf-8", "replace").splitlines()[1:]:
        cols = row.split("\t")
        if len(cols) < 12 or cols[0] != "5":
            continue
        text = cols[11].strip()
        conf = float(cols[10])
        wordy = ALNUM.search(text) is not None
        if min_conf > MIN_WORD_CONF:
            keep = wordy and conf >= min_conf
        else:
            keep = bool(text) and (wordy or conf >= min_conf)
        if not keep:
            continue
        x, y, w, h = (int(v) for v in cols[6:10])
        block, par, line = int(cols[2]), int(cols[3]), int(cols[4])
        words.append(OcrWord(text, (x, y, x + w, y + h), conf, (block, par), (block, par, line)))
    return words


def ocr_lines(words: list[OcrWord]) -> list[list[list[OcrWord]]]:
    """Words -> paragraphs (Tesseract's block/par) -> lines, in reading order."""
    paras: dict[tuple[int, int], dict[tuple[int, int, int], list[OcrWord]]] = {}
    for w in words:
        paras.setdefault(w.group, {}).setdefault(w.line, []).append(w)
    return [list(lines.values()) for lines in paras.values()]


def read_rotated(
    words: list[OcrWord],
    ocr_path: Path,
    h: float,
    *,
    out_dir: Path,
    limits: MediaLimits,
    options: DeriveOptions,
) -> list[OcrWord]:
    """Rotated text read again (D-213): each word ``layout.rotated`` flags (Tesseract reads a
    vertical line of text across, into garbage) is cut out, turned both ways and read on one
    sheet; the turn read with more confidence replaces it when it reaches ``MIN_TURNED_CONF``
    (else the layout pass drops it as junk). Its box stays the one on the page."""
    todo = [i for i, w in enumerate(words) if layout.rotated(w, h)][:MAX_TURNED]
    if not todo:
        return words
    pad = 0.4 * h
    crops = [
        {"box": [b[0] - pad, b[1] - pad, b[2] + pad, b[3] + pad], "rotate": turn}
        for b in (words[i].box for i in todo)
        for turn in TURNS
    ]
    pieces, _ = read_sheet(
        ocr_path, crops, int(2 * h), "turned", out_dir=out_dir, limits=limits, options=options
    )
    out = list(words)
    for n, i in enumerate(todo):
        tries = [(pieces[n * len(TURNS) + j], turn) for j, turn in enumerate(TURNS)]
        got, turn = max(tries, key=lambda t: mean_conf(t[0]))
        text = " ".join(w.text for w in got if ALNUM.search(w.text))
        if text and mean_conf(got) >= MIN_TURNED_CONF:
            out[i] = replace(words[i], text=text, conf=mean_conf(got), turned=turn)
    return out


def read_sheet(
    ocr_path: Path,
    crops: list[dict[str, Any]],
    gap: int,
    name: str,
    *,
    out_dir: Path,
    limits: MediaLimits,
    options: DeriveOptions,
) -> tuple[list[list[OcrWord]], list[list[int]]]:
    """Pieces of the OCR image (``page_prep.stack``'s crops) read on one sheet, in one
    Tesseract call (``--psm 6``: each piece a line): the words of each piece, in sheet pixels,
    and where each piece lies on the sheet."""
    args = {
        "path": str(ocr_path),
        "crops": crops,
        "gap": gap,
        "name": name,
        "out_dir": str(out_dir),  # never beside ocr_path: that may be the source itself
        "max_pixels": limits.max_pixels,
    }
    sheet = run_worker("stack", args, limits=limits, options=options, what="image decoder")
    pieces: list[list[OcrWord]] = [[] for _ in crops]
    for w in ocr_words(Path(sheet["png"]), limits=limits, options=options, psm=6):
        cy = (w.box[1] + w.box[3]) / 2
        for k, (_, y0, _, y1) in enumerate(sheet["where"]):
            if y0 <= cy < y1:
                pieces[k].append(w)
                break
    return pieces, sheet["where"]


def fit_to_ink(
    words: list[OcrWord], ocr_path: Path, h: float, *, limits: MediaLimits, options: DeriveOptions
) -> list[OcrWord]:
    """Each word's box fitted to its ink on the OCR image (``word_ink.py``, D-256), in one
    worker call. Rotated text keeps its box: its ink runs the other way, and the layout pass
    knows a failed reading of it by that box's shape (``layout.rotated``)."""
    todo = [i for i, w in enumerate(words) if not w.turned and not layout.rotated(w, h)]
    if not todo:
        return words
    args = {
        "path": str(ocr_path),
        "boxes": [list(words[i].box) for i in todo],
        "ink": INK,
        "pad": 1,  # Tesseract cuts into a stroke's edge by a pixel, never by a letter
        "gap": round(INK_GAP * h),
        "max_pixels": limits.max_pixels,
    }
    fitted = run_worker("ink", args, limits=limits, options=options, what="image decoder")
    out = list(words)
    for i, b in zip(todo, fitted["boxes"], strict=True):
        out[i] = replace(words[i], box=(float(b[0]), float(b[1]), float(b[2]), float(b[3])))
    return out


def mean_conf(words: list[OcrWord]) -> float:
    return sum(w.conf for w in words) / len(words) if words else -1.0
