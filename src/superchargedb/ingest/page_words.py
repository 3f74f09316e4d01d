"""A page Unit's text and word table from its lines of boxed words (D-172, D-211).

A page region (an OCR paragraph or layout block, a PDF text block) is lines of words, each with
a box in the Unit's own coordinates (pixels of the image as given, or PDF points). Its text is
the words joined by spaces, the lines by newlines; its word table gives each word's char span
in that text, its page and box, and the recognizer's confidence (0-1) when there is one. The
table travels as ``meta['unit_words']`` and is stored with the Unit (``unit_words``), so a
citation can box the words it rests on (``locate_words.narrow_boxes``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

Box = tuple[float, float, float, float]


@dataclass(frozen=True)
class PageWord:
    text: str
    box: Box  # x0, y0, x1, y1 in the Unit's coordinates, top-left origin
    conf: float | None = None  # 0-1; None for a text layer


def page_text(lines: Sequence[Sequence[PageWord]], page: int) -> tuple[str, list[dict[str, Any]]]:
    """The region's text and its word table (words with an empty text are left out)."""
    parts: list[str] = []
    table: list[dict[str, Any]] = []
    pos = 0
    for line in lines:
        words = [w for w in line if w.text.strip()]
        if not words:
            continue
        if parts:
            parts.append("\n")
            pos += 1
        for i, w in enumerate(words):
            t = w.text.strip()
            if i:
                parts.append(" ")
                pos += 1
            entry: dict[str, Any] = {
                "start": pos,
                "end": pos + len(t),
                "page": page,
                "box": [round(float(v), 2) for v in w.box],
            }
            if w.conf is not None:
                entry["conf"] = round(max(0.0, min(1.0, w.conf)), 3)
            table.append(entry)
            parts.append(t)
            pos += len(t)
    return "".join(parts), table


def union(boxes: Sequence[Sequence[float]]) -> Box:
    return (
        min(b[0] for b in boxes),
        min(b[1] for b in boxes),
        max(b[2] for b in boxes),
        max(b[3] for b in boxes),
    )


def chunk_tables(
    table: Sequence[dict[str, Any]], spans: Sequence[tuple[int, int]]
) -> list[list[dict[str, Any]]]:
    """A Unit's word table cut to each of its chunks (``spans``: each chunk's ``[start, end)``
    in the Unit's text): the words wholly inside a chunk, their char spans made relative to it
    (chunks may overlap, so a word may be in two)."""
    return [
        [{**w, "start": w["start"] - a, "end": w["end"] - a} for w in table
         if w["start"] >= a and w["end"] <= b]
        for a, b in spans
    ]  # fmt: skip
