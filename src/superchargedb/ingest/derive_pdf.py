"""PDF -> doc_visual Units: one per text block, with a tight bbox in points and a 1-based page.

The worker (pdfium, in a subprocess) returns each page's words with tight and loose boxes in
top-left-origin points of the CropBox before /Rotate (where text runs left to right). Here they
are grouped: words -> lines (same band, no column-sized gap) -> blocks (a line joins the block
just above it when the vertical gap is a normal line gap, the x ranges overlap and the font size
matches; a block over ``MAX_REGION_CHARS`` is split at a line). A block's bbox is the union of its
words' tight boxes, turned into the displayed (rotated) page. Pages without a text layer are
rendered by the worker a batch at a time, OCR'd with Tesseract, and their pixel boxes scaled back
to points.
"""

from __future__ import annotations

import statistics
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..types import Locator
from .derive_base import DerivationError, Derived, DeriveOptions, MediaLimits, run_worker
from .derive_ocr import MAX_REGION_CHARS, ocr_regions, ocr_words, split_lines
from .media_worker import rotate_box
from .page_words import PageWord, page_text, union

RENDER_BATCH = 8  # pages without a text layer rendered per worker call


@dataclass
class Line:
    words: list[dict[str, Any]]
    lbox: list[float]  # loose box (font ascent/descent): the line's band
    size: float

    def add(self, w: dict[str, Any]) -> None:
        self.words.append(w)
        a, b = self.lbox, w["lbox"]
        self.lbox = [min(a[0], b[0]), min(a[1], b[1]), max(a[2], b[2]), max(a[3], b[3])]
        self.size = max(self.size, w["size"])

    def text(self) -> str:
        return " ".join(w["text"] for w in self.words)


@dataclass
class Block:
    lines: list[Line] = field(default_factory=list)
    x0: float = 0.0
    x1: float = 0.0
    chars: int = 0

    def add(self, line: Line) -> None:
        if not self.lines:
            self.x0, self.x1 = line.lbox[0], line.lbox[2]
        self.x0, self.x1 = min(self.x0, line.lbox[0]), max(self.x1, line.lbox[2])
        self.lines.append(line)
        self.chars += len(line.text()) + 1


def group_lines(words: list[dict[str, Any]]) -> list[Line]:
    """Words in content order -> lines: same vertical band and no column-sized horizontal gap."""
    lines: list[Line] = []
    for w in words:
        cur = lines[-1] if lines else None
        if cur is not None and not w.get("brk"):
            last = cur.words[-1]["lbox"]
            mid = (w["lbox"][1] + w["lbox"][3]) / 2
            gap = w["lbox"][0] - last[2]
            if cur.lbox[1] <= mid <= cur.lbox[3] and -0.5 * cur.size < gap < 2.5 * cur.size:
                cur.add(w)
                continue
        lines.append(Line([w], list(w["lbox"]), w["size"]))
    return lines


def typical_gap(lines: list[Line]) -> float:
    """The page's usual gap between a line and the next one in the same column (points)."""
    gaps = []
    for a, b in zip(lines, lines[1:], strict=False):
        gap = b.lbox[1] - a.lbox[3]
        overlap = min(a.lbox[2], b.lbox[2]) - max(a.lbox[0], b.lbox[0])
        if overlap > 0 and -0.5 * a.size < gap < 2.0 * a.size:
            gaps.append(gap)
    return statistics.median(gaps) if len(gaps) >= 3 else 0.0


def group_blocks(lines: list[Line], max_chars: int = MAX_REGION_CHARS) -> list[Block]:
    """Lines -> blocks by vertical gaps, x-overlap and font size (tries the last few blocks)."""
    usual = typical_gap(lines)
    blocks: list[Block] = []
    for line in lines:
        target = None
        for blk in reversed(blocks[-4:]):
            prev = blk.lines[-1]
            gap = line.lbox[1] - prev.lbox[3]
            limit = max(usual, 0.0) + 0.45 * min(prev.size, line.size)
            overlap = min(blk.x1, line.lbox[2]) - max(blk.x0, line.lbox[0])
            ratio = max(prev.size, line.size) / max(1e-6, min(prev.size, line.size))
            if -0.5 * prev.size < gap <= limit and overlap > 0 and ratio <= 1.2:
                target = blk
                break
        if target is None or target.chars + len(line.text()) > max_chars:
            target = Block()
            blocks.append(target)
        target.add(line)
    return blocks


def block_units(blocks: list[Block], page: dict[str, Any]) -> list[Derived]:
    """Blocks -> Units; boxes go from the upright frame to the displayed (rotated) page."""
    n, rot = int(page["page"]), int(page.get("rotation", 0))
    w0, h0 = page.get("upright_size") or (page["width"], page["height"])

    def shown(b: list[float]) -> tuple[float, float, float, float]:
        x0, y0, x1, y1 = (round(v, 2) for v in rotate_box(b, w0, h0, rot))
        return (x0, y0, x1, y1)

    units = []
    for blk in blocks:
        for run in split_lines(blk.lines, MAX_REGION_CHARS, Line.text):
            lines = [[PageWord(w["text"], shown(w["box"])) for w in ln.words] for ln in run]
            text, table = page_text(lines, n)
            boxed = [w for line in lines for w in line]
            meta = {
                "source": "text_layer",
                "font_size": round(max(line.size for line in run), 2),
                "words": [[w.text, *w.box] for w in boxed],
                "unit_words": table,
            }
            units.append(
                Derived(
                    text=text,
                    modality="pdf_page",
                    plane="doc_visual",
                    locator=Locator(kind="bbox", box=union([w.box for w in boxed]), page=n),
                    fragment=f"#page={n}",
                    meta=meta,
                )
            )
    return units


def derive_pdf(path: Path, *, limits: MediaLimits, options: DeriveOptions) -> list[Derived]:
    """Every page's text blocks (text layer, else OCR of a render) as doc_visual Units."""
    args: dict[str, Any] = {
        "path": str(path),
        "max_pages": limits.max_pages,
        "max_pixels": limits.max_pixels,
        "dpi": options.render_dpi,
    }
    pages = run_worker("pdf", args, limits=limits, options=options, what="pdfium")["pages"]
    found: dict[int, list[Derived]] = {}
    for page in pages:
        if page["words"]:
            found[page["page"]] = block_units(group_blocks(group_lines(page["words"])), page)
    blank = [p["page"] for p in pages if not p["words"]]
    for i in range(0, len(blank), RENDER_BATCH):  # bounded temp disk: a batch at a time
        with tempfile.TemporaryDirectory(prefix="scdb-pdf-") as tmp:
            batch = {**args, "render": blank[i : i + RENDER_BATCH], "render_dir": tmp}
            rendered = run_worker("pdf", batch, limits=limits, options=options, what="pdfium")
            for page in rendered["pages"]:
                n, scale = int(page["page"]), float(page["render"]["scale"])
                png = Path(page["render"]["png"])
                words = ocr_words(png, limits=limits, options=options, dpi=round(scale * 72))
                png.unlink()
                found[n] = ocr_regions(
                    words, page=n, scale=scale, modality="pdf_page", fragment=f"#page={n}"
                )
    units = []
    for page in pages:
        dims = {"page_width": page["width"], "page_height": page["height"]}
        units += [replace(u, meta={**u.meta, **dims}) for u in found.get(page["page"], [])]
    if not units:
        raise DerivationError(f"no text found in the PDF ({len(pages)} pages)")
    return units
