"""A citation narrowed to the words it rests on (D-173, D-211): pure functions over a Unit's
word table.

The answer localizer picks a char span of a hit's text (the cited sentence). For a Unit with
timed words (an utterance) the span maps to the time range of the words it overlaps, inside the
Unit's own range (``narrow_time``). For a page Unit with word boxes (a scan or PDF region) it maps
to the boxes of those words: ``box`` becomes their union and ``boxes`` lists one tight box per
line they sit on (``narrow_boxes``). A Unit without a word table keeps its own Locator.
``attach`` gives the localized hits (Units the caller was already shown) their tables, read
through ``lookup`` (the storage's, given by the wiring).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

WordLookup = Callable[[Sequence[str]], Mapping[str, list[dict[str, Any]]]]
Box = list[float]
NARROWED_KINDS = ("time_range", "bbox")


def narrow_time(
    locator: dict[str, Any], words: Sequence[dict[str, Any]], start: int, end: int
) -> dict[str, Any]:
    """The ``time_range`` of the words overlapping ``[start, end)`` of the Unit's text."""
    if locator.get("kind") != "time_range":
        return dict(locator)
    inside = [w for w in words if w["end"] > start and w["start"] < end and "t_start_ms" in w]
    if not inside:
        return dict(locator)
    lo, hi = int(locator["t_start_ms"]), int(locator["t_end_ms"])
    t0 = min(max(lo, min(int(w["t_start_ms"]) for w in inside)), hi - 1)
    t1 = max(min(hi, max(int(w["t_end_ms"]) for w in inside)), t0 + 1)
    return {**locator, "t_start_ms": t0, "t_end_ms": t1}


def same_line(a: Box, b: Box) -> bool:
    """``b`` continues the line whose band is ``a``: it starts right of ``a``'s start and shares
    at least half of the lower one's height (a word's own ascenders/descenders vary)."""
    shared = min(a[3], b[3]) - max(a[1], b[1])
    return b[0] >= a[0] and shared >= 0.5 * min(a[3] - a[1], b[3] - b[1])


def line_boxes(boxes: Sequence[Box]) -> list[Box]:
    """Word boxes in reading order -> one union box per run of words on one line."""
    out: list[Box] = []
    for b in boxes:
        if out and same_line(out[-1], b):
            a = out[-1]
            out[-1] = [min(a[0], b[0]), min(a[1], b[1]), max(a[2], b[2]), max(a[3], b[3])]
        else:
            out.append([float(v) for v in b])
    return out


def clip(b: Box, outer: Sequence[float]) -> Box:
    x0, y0 = max(b[0], outer[0]), max(b[1], outer[1])
    return [round(x0, 2), round(y0, 2), round(max(x0, min(b[2], outer[2])), 2),
            round(max(y0, min(b[3], outer[3])), 2)]  # fmt: skip


def narrow_boxes(
    locator: dict[str, Any], words: Sequence[dict[str, Any]], start: int, end: int
) -> dict[str, Any]:
    """The ``bbox`` of the words overlapping ``[start, end)``: ``box`` their union, ``boxes``
    one box per line (inside the Unit's own box, on its page)."""
    if locator.get("kind") != "bbox" or not locator.get("box"):
        return dict(locator)
    page = locator.get("page")
    inside = [
        w["box"]
        for w in words
        if w["end"] > start and w["start"] < end and w.get("box") and w.get("page", page) == page
    ]
    if not inside:
        return dict(locator)
    outer = locator["box"]
    boxes = [clip(b, outer) for b in line_boxes(inside)]
    union = [
        min(b[0] for b in boxes),
        min(b[1] for b in boxes),
        max(b[2] for b in boxes),
        max(b[3] for b in boxes),
    ]
    return {**locator, "box": union, "boxes": boxes}


def narrow(
    locator: dict[str, Any], words: Sequence[dict[str, Any]], start: int, end: int
) -> dict[str, Any]:
    """The Locator of ``[start, end)`` of a Unit's text, from its word table."""
    if locator.get("kind") == "bbox":
        return narrow_boxes(locator, words, start, end)
    return narrow_time(locator, words, start, end)


def attach(lookup: WordLookup, evidence: Sequence[Any]) -> None:
    """Give each localized hit with a time range or a box its word table (``Evidence.words``)."""
    kinds = [(ev.hit.get("locator") or {}).get("kind") for ev in evidence]
    located = [ev for ev, k in zip(evidence, kinds, strict=True) if k in NARROWED_KINDS]
    if not located:
        return
    tables = lookup([ev.hit["unit_id"] for ev in located])
    for ev in located:
        ev.words = tables.get(ev.hit["unit_id"])
