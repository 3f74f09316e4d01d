"""A word's box on the ink it is printed with (D-256). Worker-side, like ``page_prep.py``:
``media_worker.py`` loads this file by path, so it needs only numpy.

Tesseract's word boxes are not the word's ink: its LSTM engine gives many words the height of
their whole text line (``of`` on a line with ``Fig`` spans the capitals' top to the descenders'
bottom) and cuts a box a column or two inside a letter's stroke at either end (the right edge of
an ``f``'s arm). On the FUNSD dev forms a third of the words whose text was read right missed
an IoU of 0.5 with the annotated box for that reason alone. ``ink_box`` fits a box to the ink
the recognizer's box rests on: the ink rows inside it, then the ink columns on those rows, grown
outward while the ink runs on without a blank column (or row), by at most ``pad`` pixels, so a
neighbouring word (a space away) or line (a blank row away) is never taken in.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

Box = tuple[int, int, int, int]  # x0, y0, x1, y1 in pixels, end exclusive


def grow(occupied: Any, lo: int, hi: int, floor: int, ceil: int) -> tuple[int, int]:
    """``[lo, hi)`` of a 1-D ink profile grown while the next index outward has ink, staying
    inside ``[floor, ceil)``."""
    while lo > floor and occupied[lo - 1]:
        lo -= 1
    while hi < ceil and occupied[hi]:
        hi += 1
    return lo, hi


def main_rows(counts: Any, gap: int) -> tuple[int, int]:
    """``[a, b)`` of the tallest run of ink rows (``counts``: ink pixels per row), rows a blank
    gap of at most ``gap`` rows apart counting as one run (an ``i``'s dot). A run further off is
    another line's ink the box reaches into at its top or bottom: the tallest, not the inkiest,
    since a bold line or a rule below can hold more ink in fewer rows."""
    import numpy as np

    rows = np.flatnonzero(counts)
    cuts = np.flatnonzero(np.diff(rows) > gap + 1)
    starts = np.concatenate(([0], cuts + 1))
    ends = np.concatenate((cuts + 1, [len(rows)]))
    best = max(range(len(starts)), key=lambda i: int(rows[ends[i] - 1] - rows[starts[i]]))
    return int(rows[starts[best]]), int(rows[ends[best] - 1]) + 1


def ink_box(ink: Any, box: Sequence[float], pad: int, gap: int) -> Box:
    """The box of the ink a recognizer's word ``box`` rests on (``ink``: a boolean page image,
    True where printed); the box itself (rounded) when it holds no ink."""
    import numpy as np

    h, w = ink.shape
    x0, y0 = max(0, int(box[0])), max(0, int(box[1]))
    x1, y1 = min(w, int(round(box[2]))), min(h, int(round(box[3])))
    if x1 <= x0 or y1 <= y0 or not ink[y0:y1, x0:x1].any():
        return (int(box[0]), int(box[1]), int(round(box[2])), int(round(box[3])))
    a, b = main_rows(ink[y0:y1, x0:x1].sum(axis=1), gap)
    ty0, ty1 = y0 + a, y0 + b
    wx0, wx1 = max(0, x0 - pad), min(w, x1 + pad)
    cols = ink[ty0:ty1, wx0:wx1].any(axis=0)
    inside = np.flatnonzero(cols[x0 - wx0 : x1 - wx0])
    cx0, cx1 = grow(cols, x0 - wx0 + int(inside[0]), x0 - wx0 + int(inside[-1]) + 1, 0, wx1 - wx0)
    cx0, cx1 = cx0 + wx0, cx1 + wx0
    wy0, wy1 = max(0, ty0 - pad), min(h, ty1 + pad)
    across = ink[wy0:wy1, cx0:cx1].any(axis=1)
    ry0, ry1 = grow(across, ty0 - wy0, ty1 - wy0, 0, wy1 - wy0)
    return (cx0, ry0 + wy0, cx1, ry1 + wy0)


def ink_boxes(
    gray: Any, boxes: Sequence[Sequence[float]], threshold: int, pad: int, gap: int
) -> list[Box]:
    """``ink_box`` for each box on a grayscale page (ink: darker than ``threshold``)."""
    ink = gray < threshold
    return [ink_box(ink, b, pad, gap) for b in boxes]
