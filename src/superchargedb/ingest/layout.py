"""The layout pass over a scanned page's OCR words: junk out, lines cut into cells, cells into
regions (D-212).

Tesseract's own blocks follow the page's white space, which on a form is everywhere: a whole
ruled table comes back as one paragraph whose lines run across every column, so a Unit box
covered half the page and a citation could not point at a cell. Here, with the rules the image
worker found (``page_prep.find_rules``) and the page's text-line height ``h``:

1. **Junk** is dropped: a lone low-confidence scrap of at most ``SCRAP_CHARS`` characters
   with no neighbour on its line (a speck, a rule's leftover), and rotated text Tesseract read
   across (a margin's vertical document number comes out as one garbled word far taller than
   a line; ``tesseract.read_rotated`` reads it again turned, and only a failed reading is
   dropped here). Punctuation stays (a code listing's lone brace is text).
2. **Lines** (Tesseract's) are cut where a vertical rule passes between two words and at a gap
   wider than ``COLUMN_GAP`` x h, unless the word before the gap ends in ``:`` (a key and its
   value stay one line: "FROM: R. E. Lane").
3. **Regions**: a cut line joins the region whose last line is just above it (a gap under
   ``LINE_GAP`` x h, overlapping it across, of a similar height) unless a horizontal rule lies
   between them; so a table cell, a key/value line or a paragraph is one region.

Regions come back in reading order (top to bottom, then left to right), as lists of lines.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

COLUMN_GAP = 2.0  # a gap between words wider than this many line heights cuts the line
LINE_GAP = 1.0  # a line this close under a region's last one continues it
SCRAP_CHARS = 2  # a lone word this short ...
SCRAP_CONF = 30.0  # ... and less confident than this is a speck read as letters

Box = tuple[float, float, float, float]


@dataclass
class Segment:
    words: list[Any]
    box: list[float] = field(default_factory=list)

    def __post_init__(self) -> None:
        bs = [w.box for w in self.words]
        self.box = [min(b[0] for b in bs), min(b[1] for b in bs),
                    max(b[2] for b in bs), max(b[3] for b in bs)]  # fmt: skip


@dataclass
class Region:
    lines: list[Segment]
    x0: float
    x1: float


def rotated(w: Any, h: float) -> bool:
    """Rotated text read across: Tesseract returns a margin's vertical document number as one
    word far taller than a line and taller than wide, its letters garbage ("S7o2S5628")."""
    x0, y0, x1, y1 = w.box
    return y1 - y0 > 2.5 * h and y1 - y0 > 1.5 * (x1 - x0)


def crosses(rule: Sequence[float], x_left: float, x_right: float, y: float) -> bool:
    """A vertical rule between two x positions, across height ``y``."""
    return x_left - 2 <= (rule[0] + rule[2]) / 2 <= x_right + 2 and rule[1] <= y <= rule[3]


def between(rule: Sequence[float], upper: Sequence[float], lower: Sequence[float]) -> bool:
    """A horizontal rule between two boxes, one above the other, overlapping them across."""
    y = (rule[1] + rule[3]) / 2
    left, right = max(upper[0], lower[0]), min(upper[2], lower[2])
    return upper[1] + 0.5 * (upper[3] - upper[1]) <= y <= lower[3] - 0.5 * (
        lower[3] - lower[1]
    ) and (rule[0] < right and rule[2] > left)


def cut_line(words: list[Any], vrules: Sequence[Sequence[float]], h: float) -> list[Segment]:
    words = sorted(words, key=lambda w: w.box[0])
    out: list[list[Any]] = [[words[0]]]
    for a, b in zip(words, words[1:], strict=False):
        y = (max(a.box[1], b.box[1]) + min(a.box[3], b.box[3])) / 2
        ruled = any(crosses(r, a.box[2], b.box[0], y) for r in vrules)
        wide = b.box[0] - a.box[2] > COLUMN_GAP * h and not a.text.endswith(":")
        if ruled or wide:
            out.append([b])
        else:
            out[-1].append(b)
    return [Segment(ws) for ws in out]


def regions(
    words: Sequence[Any], rules: dict[str, list[list[float]]], h: float
) -> list[list[list[Any]]]:
    """The page's words -> regions -> lines -> words (module docstring)."""
    kept = [w for w in words if w.turned or not rotated(w, h)]
    lines: dict[Any, list[Any]] = {}
    for w in kept:
        lines.setdefault(w.line, []).append(w)
    segs = [s for ws in lines.values() for s in cut_line(ws, rules.get("v", []), h)]
    segs = [s for s in segs if not scrap(s)]
    segs.sort(key=lambda s: (s.box[1], s.box[0]))
    hrules = rules.get("h", [])
    out: list[Region] = []
    for s in segs:
        target = None
        for r in reversed(out[-12:]):
            last = r.lines[-1].box
            gap = s.box[1] - last[3]
            tall = max(last[3] - last[1], s.box[3] - s.box[1])
            short = max(1.0, min(last[3] - last[1], s.box[3] - s.box[1]))
            if (
                -0.3 * h < gap < LINE_GAP * h
                and s.box[0] < r.x1
                and s.box[2] > r.x0
                and tall / short <= 1.8
                and not any(between(rule, last, s.box) for rule in hrules)
            ):
                target = r
                break
        if target is None:
            out.append(Region([s], s.box[0], s.box[2]))
        else:
            target.lines.append(s)
            target.x0, target.x1 = min(target.x0, s.box[0]), max(target.x1, s.box[2])
    out.sort(key=lambda r: (r.lines[0].box[1] // max(1.0, h), r.lines[0].box[0]))
    return [[seg.words for seg in r.lines] for r in out]


def scrap(s: Segment) -> bool:
    """A lone, short, unsure word: a speck or a stamp's edge read as letters."""
    if len(s.words) != 1:
        return False
    w = s.words[0]
    return len(w.text) <= SCRAP_CHARS and w.conf < SCRAP_CONF
