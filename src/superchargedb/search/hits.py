"""Hydration: fused rowids -> hit objects (one catalog query, snippets from per-query patterns).

Everything a hit needs comes from one ``SELECT ... WHERE id IN (SELECT value FROM json_each(?))``:
one SQL text whatever the number of hits, so SQLite's statement cache keeps it prepared. The
snippet patterns are compiled once per query, not once per hit (that was 40 % of a search).
"""

from __future__ import annotations

import functools
import html
import re
import sqlite3
from collections.abc import Sequence
from typing import Any

import orjson

from ..storage import units as units_sql
from ..types import Locator

HIT_COLUMNS = (
    "id, unit_id, scope, doc_id, modality, plane, source_uri, mime, text, loc_kind, loc_start,"
    " loc_end, t_start_ms, t_end_ms, shot_idx, page, bbox_x0, bbox_y0, bbox_x1, bbox_y1,"
    " object_key"
)
_HYDRATE = f"SELECT {HIT_COLUMNS} FROM units WHERE id IN (SELECT value FROM json_each(?))"


class Snippeter:
    r"""An HTML-escaped window around the first query term, terms wrapped in ``<mark>``.

    Same output as the former per-hit ``re.sub(r"\b(term|...)\w*", ..., re.IGNORECASE)``, at a
    fraction of its cost (it was a third of a search's CPU): the pattern is compiled once per
    query, and it runs case-sensitively over the lower-cased window. Texts whose lower-casing
    changes their length take the IGNORECASE path.
    """

    def __init__(self, terms: Sequence[str], width: int = 240) -> None:
        self.width = width
        self.terms = list(terms)
        self._fast = _pattern(tuple(self.terms), False) if self.terms else None

    def __call__(self, text: str) -> str:
        low = text.lower()
        pos = -1
        for t in self.terms:  # each find stops where the best position so far begins
            i = low.find(t, 0, len(low) if pos < 0 else pos + len(t) - 1)
            if i >= 0:
                pos = i
        pos = max(pos, 0)
        start = max(0, pos - self.width // 3)
        end = min(len(text), start + self.width)
        window = html.escape(text[start:end])
        if self._fast is not None:
            window = self._mark(window)
        return ("…" if start > 0 else "") + window + ("…" if end < len(text) else "")

    def _mark(self, window: str) -> str:
        lw = window.lower()
        if len(lw) != len(window):
            slow = _pattern(tuple(self.terms), True)
            return slow.sub(lambda m: f"<mark>{m.group(0)}</mark>", window)
        assert self._fast is not None
        out: list[str] = []
        last = 0
        for m in self._fast.finditer(lw):
            a, b = m.span()
            out += (window[last:a], "<mark>", window[a:b], "</mark>")
            last = b
        if not out:
            return window
        out.append(window[last:])
        return "".join(out)


@functools.lru_cache(maxsize=512)
def _pattern(terms: tuple[str, ...], ignorecase: bool) -> re.Pattern[str]:
    """Compiled once per term list (queries repeat; compiling an IGNORECASE alternation costs
    more than marking a hundred windows)."""
    alts = "|".join(re.escape(html.escape(t)) for t in terms)
    if ignorecase:
        return re.compile(f"\\b({alts})\\w*", re.IGNORECASE)
    # Terms are ``\w+``: ``\b`` before one is "starts a word", so matches inside words are
    # never produced (a one-letter term matched inside most words: 4/5 of the marking time).
    return re.compile(f"\\b(?:{alts})\\w*")


def snippet(text: str, terms: Sequence[str], width: int = 240) -> str:
    return Snippeter(terms, width)(text)


_COLS = tuple(c.strip() for c in HIT_COLUMNS.split(","))
_UNIT_ID, _SCOPE, _DOC_ID, _MODALITY, _PLANE, _SOURCE_URI, _MIME, _TEXT, _LOC_KIND = range(1, 10)
_OBJECT_KEY = _COLS.index("object_key")


def fetch_hit_rows(conn: sqlite3.Connection, rowids: Sequence[int]) -> dict[int, tuple[Any, ...]]:
    """Hit rows by id, as plain tuples in ``HIT_COLUMNS`` order (a ``sqlite3.Row`` per hit and
    its by-name lookups were a third of hydration)."""
    if not rowids:
        return {}
    cur = conn.cursor()
    cur.row_factory = None
    return {r[0]: r for r in cur.execute(_HYDRATE, (orjson.dumps([int(k) for k in rowids]),))}


def build_hits(
    rows: dict[int, tuple[Any, ...]],
    top: Sequence[tuple[int, float]],
    dense: Sequence[int],
    lexical: Sequence[int],
    terms: Sequence[str],
    rr_rank: dict[int, int],
) -> list[dict[str, Any]]:
    """Hit objects in ``top`` order; rows deleted since ranking are skipped."""
    snip = Snippeter(terms)
    d_rank = {k: i for i, k in enumerate(dense, 1)}
    l_rank = {k: i for i, k in enumerate(lexical, 1)}
    hits = []
    for key, score in top:
        r = rows.get(key)
        if r is None:  # deleted between ranking and hydration
            continue
        # Locators and object links are rare: only their rows get a by-name view.
        has_loc, has_obj = r[_LOC_KIND] is not None, bool(r[_OBJECT_KEY])
        named = dict(zip(_COLS, r, strict=True)) if has_loc or has_obj else None
        loc = Locator.from_row(named) if has_loc else None
        ranks: dict[str, int | None] = {"dense": d_rank.get(key), "lexical": l_rank.get(key)}
        if rr_rank:
            ranks["rerank"] = rr_rank.get(key)
        text = r[_TEXT]
        hits.append(
            {
                "unit_id": r[_UNIT_ID],
                "score": round(score, 6),
                "plane": r[_PLANE],
                "modality": r[_MODALITY],
                "doc_id": r[_DOC_ID],
                "scope": r[_SCOPE],
                "source_uri": r[_SOURCE_URI],
                "mime": r[_MIME],
                "text": text,
                "snippet": snip(text),
                "locator": loc.to_dict() if loc else None,
                "link": units_sql.unit_link(named) if has_obj else None,
                "ranks": ranks,
            }
        )
    return hits


def hit_unit_id(row: tuple[Any, ...]) -> str:
    """The ``unit_id`` of a row from :func:`fetch_hit_rows` (RRF tie-break)."""
    return str(row[_UNIT_ID])
