"""A citation narrowed to the words it rests on (D-173): a pure function over a Unit's word table.

The answer localizer picks a char span of a hit's text (the cited sentence); for a Unit with
timed words (an utterance) the span maps to the time range of the words it overlaps, inside the
Unit's own range. A Unit without a word table keeps its own Locator. ``attach`` gives the
localized hits (Units the caller was already shown) their tables, read through ``lookup`` (the
storage's, given by the wiring).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

WordLookup = Callable[[Sequence[str]], Mapping[str, list[dict[str, Any]]]]


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


def attach(lookup: WordLookup, evidence: Sequence[Any]) -> None:
    """Give each localized hit with a time range its word table (``Evidence.words``)."""
    timed = [ev for ev in evidence if (ev.hit.get("locator") or {}).get("kind") == "time_range"]
    if not timed:
        return
    tables = lookup([ev.hit["unit_id"] for ev in timed])
    for ev in timed:
        ev.words = tables.get(ev.hit["unit_id"])
