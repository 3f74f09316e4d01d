"""Ruled lines on a scanned page: found, painted over before OCR, and kept for the layout pass
(D-212). Worker-side: ``media_worker.py`` loads this file by path (it never imports the
superchargedb package), so it needs only numpy and Pillow.

A rule is thin ink (at most ``RULE_THICK`` line heights across, judged on the ink's dark core)
in a straight run down a column at least ``RULE_LINES`` line heights long (along a row,
``RULE_LINES_ACROSS``: the bottoms of a word's letters may touch over four line heights): an
opening by a 1 x L line, computed with running sums. Letters are never that long in one row;
table borders, underlines and fill-in lines are. The thinness test keeps a line of small bold
letters whose bottoms touch (their stems cut the run) and the letters that cross a rule; a rule
crossing another runs on through it, a faded spot is bridged, and nothing inside a dark area (a
logo's black box) counts. Tesseract reads a rule through text as letters ("Lane" underlined
becomes "Lane_", a cell border "|"), glues the cells of a row into one line and drops whole rows
of a ruled table, so the rules are painted with the paper's colour (with a one-pixel margin of
their grey edge) and returned as boxes: the layout pass cuts lines and regions at them
(``ingest/layout.py``).
"""

from __future__ import annotations

from typing import Any

RULE_LINES = 4.0  # a vertical rule is at least this many line heights long
RULE_LINES_ACROSS = 5.0  # a horizontal one longer: the bottoms of a word's letters can touch
RULE_THICK = 0.3  # ... and its ink at most this many line heights thick across it
RULE_GAP = 0.15  # a faded spot of a rule this long (in line heights) does not cut it
RULE_INK = 200  # a pixel darker than this may be part of a rule (rules are often light grey)
EDGE_INK = 230  # ... and one next to a rule this dark is its edge


def otsu(gray: Any) -> int:
    """Otsu's global threshold of a grayscale array (as media_worker.otsu)."""
    import numpy as np

    p = np.bincount(gray.astype(np.uint8).ravel(), minlength=256).astype(np.float64)
    p /= max(1.0, p.sum())
    w = np.cumsum(p)
    mu = np.cumsum(p * np.arange(256))
    with np.errstate(divide="ignore", invalid="ignore"):
        between = (mu[-1] * w - mu) ** 2 / (w * (1.0 - w))
    return int(np.nan_to_num(between, nan=-1.0, posinf=-1.0).argmax())


def runs_mask(ink: Any, length: int, axis: int) -> Any:
    """The pixels of ``ink`` in a straight run of at least ``length`` along ``axis`` (1: rows,
    0: columns): an opening by a 1 x length line."""
    import numpy as np

    a = ink if axis == 1 else ink.T
    h, w = a.shape
    if w <= length or length < 2:
        return np.zeros_like(ink)
    s = np.zeros((h, w + 1), np.int32)
    np.cumsum(a, axis=1, out=s[:, 1:])
    full = (s[:, length:] - s[:, :-length]) == length  # the window [x, x + length) is all ink
    e = np.zeros((h, w + 1), np.int32)
    np.cumsum(np.pad(full, ((0, 0), (0, length - 1))), axis=1, out=e[:, 1:])
    covered = e[:, 1:] - np.pad(e[:, 1:], ((0, 0), (length, 0)))[:, :w]  # a window covers x
    m = covered > 0
    return m if axis == 1 else m.T


def run_lengths(ink: Any, axis: int) -> Any:
    """For every pixel, the length of the run of ink along ``axis`` it is part of (0 off ink)."""
    import numpy as np

    c = np.cumsum(ink, axis=axis, dtype=np.int32)
    up = c - np.maximum.accumulate(np.where(ink, 0, c), axis=axis)  # run so far, this one in
    f = np.flip(ink, axis=axis)
    cf = np.cumsum(f, axis=axis, dtype=np.int32)
    down = np.flip(cf - np.maximum.accumulate(np.where(f, 0, cf), axis=axis), axis=axis)
    return np.where(ink, up + down - 1, 0)


def dark_area(ink: Any, r: int) -> Any:
    """Pixels whose (2r+1)-square neighbourhood is mostly ink: a dark panel or logo (light
    letters on it), where the strips of ink between letters are no rules."""
    import numpy as np

    h, w = ink.shape
    k = 2 * r + 1
    ii = np.zeros((h + k, w + k), np.int32)  # the page padded with r of paper on every side
    np.cumsum(np.pad(ink, r), axis=0, dtype=np.int32, out=ii[1:, 1:])
    np.cumsum(ii[1:, 1:], axis=1, out=ii[1:, 1:])
    total = ii[k:, k:] - ii[:-k, k:] - ii[k:, :-k] + ii[:-k, :-k]
    return total * 2 > k * k


def bridge(mask: Any, gap: int, axis: int) -> Any:
    """``mask`` with gaps of at most ``gap`` pixels along ``axis`` filled (a closing): a faded
    spot of a scanned rule does not cut it in two."""
    import numpy as np

    if gap < 1:
        return mask
    a = (mask if axis == 0 else mask.T).astype(np.int32)
    c = np.zeros((a.shape[0] + 1, a.shape[1]), np.int32)
    np.cumsum(a, axis=0, out=c[1:])
    n = a.shape[0]
    idx = np.arange(n)
    before = c[idx] - c[np.maximum(0, idx - gap)]  # ink in [y - gap, y)
    after = c[np.minimum(n, idx + gap + 1)] - c[idx + 1]  # ink in (y, y + gap]
    out = (a > 0) | ((before > 0) & (after > 0))
    return out if axis == 0 else out.T


def segments(mask: Any, axis: int, min_len: int) -> list[list[int]]:
    """Boxes [x0, y0, x1, y1] (exclusive ends) of the rules in ``mask`` running along ``axis``:
    runs per row (column), merged with the runs of the next rows that overlap them."""
    import numpy as np

    a = mask if axis == 1 else mask.T
    out: list[list[int]] = []
    open_: list[list[int]] = []  # [start, end, first row, last row]
    rows = [int(r) for r in np.flatnonzero(a.any(axis=1))]
    for r in [*rows, -2]:  # -2: past the last row, every open rule ends
        runs: list[tuple[int, int]] = []
        if r >= 0:
            edges = np.diff(np.concatenate(([0], a[r].astype(np.int8), [0])))
            runs = list(zip(np.flatnonzero(edges == 1), np.flatnonzero(edges == -1), strict=True))
        still = []
        for seg in open_:
            hit = [(s, e) for s, e in runs if r == seg[3] + 1 and s < seg[1] and e > seg[0]]
            if hit:
                s, e = hit[0]
                runs.remove(hit[0])
                still.append([min(seg[0], s), max(seg[1], e), seg[2], r])
            elif seg[1] - seg[0] >= min_len:
                out.append(seg)
        open_ = still + [[int(s), int(e), r, r] for s, e in runs]
    boxes = []
    for s, e, r0, r1 in ([int(v) for v in seg] for seg in out):
        boxes.append([s, r0, e, r1 + 1] if axis == 1 else [r0, s, r1 + 1, e])
    return boxes


def remove_rules(img: Any, line_px: float) -> tuple[Any, dict[str, list[list[int]]]]:
    """``img`` (a PIL image) with its rules painted over, and the rules' boxes (``h``, ``v``)."""
    mask, found = find_rules(img, line_px)
    return (img if mask is None else paint(img, mask)), found


def find_rules(img: Any, line_px: float) -> tuple[Any, dict[str, list[list[int]]]]:
    """The rules of ``img`` (text lines ``line_px`` tall): a mask of their pixels (None when
    there are none) and their boxes (``h``, ``v``)."""
    import numpy as np

    arr = np.asarray(img)
    gray = arr if arr.ndim == 2 else arr.mean(axis=2)
    length = int(RULE_LINES * line_px)
    across = int(RULE_LINES_ACROSS * line_px)
    ink = gray < RULE_INK
    if ink.mean() > 0.5:  # light text on a dark page: no rules taken out
        return None, {"h": [], "v": []}
    # Only thin ink can be a rule: a letter's stem crossing a rule (or the bottoms of a line of
    # small bold letters, which touch) is too thick across, so it breaks the run and stays.
    # Thickness is judged on the dark core of the ink (Otsu): a light rule's grey, blurred edge
    # would make it look thick.
    thick = max(3, int(round(RULE_THICK * line_px)))
    core = gray < otsu(gray)
    # A rule's pixel is thin across it, or part of a rule that crosses it (ink running on for
    # a rule's length the other way); a letter's stem is thick across a row and short, so it
    # cuts a run along the bottoms of touching letters. A filled area (thick both ways) is no
    # rule: what is found must itself be thin across.
    long_v, long_h = run_lengths(ink, 0) >= length, run_lengths(ink, 1) >= across
    gap = max(1, int(RULE_GAP * line_px))
    cand_h = bridge(ink & ((run_lengths(core, 0) <= thick) | long_v), gap, 1)
    cand_v = bridge(ink & ((run_lengths(core, 1) <= thick) | long_h), gap, 0)
    horiz = runs_mask(cand_h, across, 1) & ink
    vert = runs_mask(cand_v, length, 0) & ink
    light = ~dark_area(ink, int(line_px))
    horiz &= (run_lengths(horiz, 0) <= 2 * thick) & light
    vert &= (run_lengths(vert, 1) <= 2 * thick) & light
    rules = horiz | vert
    if not rules.any():
        return None, {"h": [], "v": []}
    return rules, {"h": segments(horiz, 1, across), "v": segments(vert, 0, length)}


def paint(img: Any, mask: Any) -> Any:
    """``img`` with the pixels of ``mask`` (found on it, or on the page before it was scaled
    up: then stretched to its size) that are darker than ``EDGE_INK`` in the paper's colour."""
    import numpy as np
    from PIL import Image

    arr = np.array(img)
    if mask.shape != arr.shape[:2]:
        m = Image.fromarray(mask.astype(np.uint8) * 255).resize(img.size, Image.Resampling.NEAREST)
        mask = np.asarray(m) > 0
    grown = mask.copy()  # and a one-pixel margin: the rule's grey edge
    grown[1:] |= mask[:-1]
    grown[:-1] |= mask[1:]
    grown[:, 1:] |= mask[:, :-1]
    grown[:, :-1] |= mask[:, 1:]
    mask = grown
    gray = arr if arr.ndim == 2 else arr.mean(axis=2)
    paper_px = arr[gray >= RULE_INK]
    paper = np.median(paper_px[::97], axis=0) if len(paper_px) else 255
    arr[mask & (gray < EDGE_INK)] = paper
    return Image.fromarray(arr)


def scaled(found: dict[str, list[list[int]]], scale: float) -> dict[str, list[list[int]]]:
    """Rule boxes found before the page was scaled up, in the scaled page's pixels."""
    return {k: [[int(round(v * scale)) for v in b] for b in bs] for k, bs in found.items()}


def stack(img: Any, crops: list[dict[str, Any]], gap: int) -> tuple[Any, list[list[int]]]:
    """Pieces of ``img`` stacked one under the other on white, for one Tesseract call: each
    crop is ``{"box": [x0, y0, x1, y1], "rotate": 0 | 90 | 270, "scale": k}`` (degrees
    counter-clockwise; ``scale`` optional, resampled after the turn).
    Returns the sheet and where each piece lies on it ([x0, y0, x1, y1])."""
    from PIL import Image

    img = img.convert("L")
    pieces = []
    for c in crops:
        x0, y0, x1, y1 = (int(round(v)) for v in c["box"])
        x0, y0 = max(0, x0), max(0, y0)
        x1, y1 = min(img.width, max(x0 + 1, x1)), min(img.height, max(y0 + 1, y1))
        piece = img.crop((x0, y0, x1, y1))
        if c.get("rotate"):
            piece = piece.rotate(int(c["rotate"]), expand=True)
        k = float(c.get("scale") or 1.0)
        if k != 1.0:
            size = (max(1, round(piece.width * k)), max(1, round(piece.height * k)))
            piece = piece.resize(size, Image.Resampling.LANCZOS)
        pieces.append(piece)
    width = max(p.width for p in pieces) + 2 * gap
    height = sum(p.height for p in pieces) + gap * (len(pieces) + 1)
    sheet = Image.new("L", (width, height), 255)
    where, y = [], gap
    for p in pieces:
        sheet.paste(p, (gap, y))
        where.append([gap, y, gap + p.width, y + p.height])
        y += p.height + gap
    return sheet, where
