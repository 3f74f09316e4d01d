"""Words Tesseract doubted, read again cut out and enlarged on one sheet (D-289).

Small faded print is misread at the page's scale, and Tesseract glues close words together
(``OFACCOUNT``); each doubted word alone, ``REREAD_PX`` high with its neighbours out of the way,
is read better, and a glued word comes back as its pieces with their own boxes.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from . import layout
from .derive_base import DerivationError, DeriveOptions, MediaLimits
from .tesseract import ALNUM, OcrWord, read_sheet

DOUBT_CONF = 88.0
REREAD_PX = 40.0  # the height a doubted word is enlarged to (at most 4x)
MAX_DOUBTED = 64  # per page: one sheet
MIN_REREAD_CONF = 60.0  # every word of a new reading needs this confidence
SURER_BY = 1.0  # ... and to be surer than the old word by this (Tesseract's 0-100)


def reread_doubted(
    words: list[OcrWord],
    ocr_path: Path,
    h: float,
    *,
    out_dir: Path,
    limits: MediaLimits,
    options: DeriveOptions,
) -> list[OcrWord]:
    """Each word under ``DOUBT_CONF`` cut out with a margin, enlarged to ``REREAD_PX`` and read
    on one sheet; where every word of the new reading is ``SURER_BY`` surer (and at least
    ``MIN_REREAD_CONF``), they replace the old one (a
    glued word becomes its pieces, each with its box on the page), in the old word's line."""
    todo = [
        i
        for i, w in enumerate(words)
        if w.conf < DOUBT_CONF
        and not w.turned
        and ALNUM.search(w.text)
        and not layout.rotated(w, h)
    ]
    todo = sorted(todo, key=lambda i: words[i].conf)[:MAX_DOUBTED]
    if not todo:
        return words
    crops, origins = [], []
    for i in todo:
        x0, y0, x1, y1 = words[i].box
        bh = max(1.0, y1 - y0)
        k = min(4.0, max(1.0, REREAD_PX / bh))
        box = [x0 - 0.3 * bh, y0 - 0.25 * bh, x1 + 0.3 * bh, y1 + 0.25 * bh]
        crops.append({"box": box, "scale": k})
        origins.append((max(0, int(round(box[0]))), max(0, int(round(box[1]))), k))
    try:
        pieces, where = read_sheet(
            ocr_path,
            crops,
            int(REREAD_PX),
            "doubted",
            out_dir=out_dir,
            limits=limits,
            options=options,
        )
    except DerivationError:
        return words
    better: dict[int, list[OcrWord]] = {}
    for n, i in enumerate(todo):
        old = words[i]
        wx0, wy0 = where[n][0], where[n][1]
        ox, oy, k = origins[n]
        got = []
        for g in sorted(pieces[n], key=lambda g: g.box[0]):
            b = (
                ox + (g.box[0] - wx0) / k,
                oy + (g.box[1] - wy0) / k,
                ox + (g.box[2] - wx0) / k,
                oy + (g.box[3] - wy0) / k,
            )
            cx, cy = (b[0] + b[2]) / 2, (b[1] + b[3]) / 2
            inside = old.box[0] <= cx <= old.box[2] and old.box[1] <= cy <= old.box[3]
            if inside and ALNUM.search(g.text):  # not a neighbour's edge caught in the margin
                got.append(replace(old, text=g.text, conf=g.conf, box=b))
        if got and min(g.conf for g in got) >= max(old.conf + SURER_BY, MIN_REREAD_CONF):
            better[i] = got
    return [x for i, w in enumerate(words) for x in better.get(i, [w])]
