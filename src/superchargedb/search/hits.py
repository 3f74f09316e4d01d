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

from ..storage.sqlite import units as units_sql
from ..types import Locator

HIT_COLUMNS = (
    "id, unit_id, scope, doc_id, modality, plane, source_uri, mime, text, loc_kind, loc_start,"
    " loc_end, t_start_ms, t_end_ms, shot_idx, page, bbox_x0, bbox_y0, bbox_x1, bbox_y1,"
    " object_key"
)
# What most hits need: the full columns less the ten Locator fields, which only a row with a
# ``loc_kind`` reads (each column read costs ~0.2 us a row in sqlite3; 21 columns were half of
# the hydration query). Same order as HIT_COLUMNS up to ``loc_kind``; ``object_key`` last in both.
BRIEF_COLUMNS = (
    "id, unit_id, scope, doc_id, modality, plane, source_uri, mime, text, loc_kind, object_key"
)
_HYDRATE = f"SELECT {HIT_COLUMNS} FROM units WHERE id IN (SELECT value FROM json_each(?))"
_HYDRATE_CHECKED = (
    f"SELECT {', '.join('u.' + c.strip() for c in BRIEF_COLUMNS.split(','))} FROM units u"
    " NOT INDEXED WHERE u.id IN (SELECT value FROM json_each(?))"
)


class Snippeter:
    r"""A window around the first query term, words that start with a term wrapped in ``<mark>``,
    the rest HTML-escaped.

    The marks are found in the raw text and the pieces between them escaped after: marking the
    escaped window put marks inside entities (term "gt" in "&gt;" gave "&<mark>gt</mark>;").
    The patterns are compiled once per term list and run case-sensitively over the lower-cased
    text; texts whose lower-casing changes their length take an IGNORECASE pattern.

    The fast pattern starts with a plain alternation of the terms, which ``re`` scans for with
    its first-character set; a leading ``\b`` disabled that scan and tried every position (the
    mark pass and the first-term search were 2/3 of hydration at top_k=100).
    """

    def __init__(self, terms: Sequence[str], width: int = 240) -> None:
        self.width = width
        self.terms = list(terms)
        self._first: re.Pattern[str] | None = None
        self._fast: re.Pattern[str] | None = None
        if self.terms:
            self._first, self._fast = _patterns(tuple(self.terms))

    def __call__(self, text: str) -> str:
        low = text.lower()
        pos = 0
        if self._first is not None:
            # The leftmost match of the alternation is the smallest ``low.find(term)``.
            m = self._first.search(low)
            if m is not None:
                pos = m.start()
        start = max(0, pos - self.width // 3)
        end = min(len(text), start + self.width)
        out = ["…"] if start > 0 else []
        # Most windows hold nothing to escape: then no piece is escaped (~1 us a hit).
        plain = _SPECIAL.search(text, start, end) is None
        last = start
        for a, b in self._marks(text, low, start, end) if self.terms else ():
            piece, mark = text[last:a], text[a:b]
            if not plain:
                piece, mark = html.escape(piece), html.escape(mark)
            out += (piece, "<mark>", mark, "</mark>")
            last = b
        out.append(text[last:end] if plain else html.escape(text[last:end]))
        if end < len(text):
            out.append("…")
        return "".join(out)

    def _marks(self, text: str, low: str, start: int, end: int) -> list[tuple[int, int]]:
        """Spans of ``text[start:end]`` to mark: each word of the window (a word cut at the
        window's start counts as one) that starts with a term, to its end inside the window."""
        if self._fast is None or len(low) != len(text):
            slow = _pattern(tuple(self.terms))
            return [(start + m.start(), start + m.end()) for m in slow.finditer(text[start:end])]
        out = []
        for m in self._fast.finditer(low, start, end):
            a = m.start()
            # ``\b`` before a word character: none before it. A match starting inside a word
            # is dropped; its ``\w*`` ends with that word, so it never hides a match at a word
            # start. (``str.isalnum() or "_"`` is exactly ``re``'s ``\w`` for str patterns.)
            if a > start and ((c := low[a - 1]).isalnum() or c == "_"):
                continue
            out.append((a, m.end()))
        return out


_WORD = re.compile(r"\w+")
_SPECIAL = re.compile("[&<>\"']")  # what html.escape rewrites


@functools.lru_cache(maxsize=512)
def _patterns(terms: tuple[str, ...]) -> tuple[re.Pattern[str], re.Pattern[str] | None]:
    """The first-occurrence pattern and the case-sensitive mark pattern of ``terms`` (None: a
    term that is not all word characters, where dropping ``\b`` would change the marks)."""
    first = re.compile("|".join(re.escape(t) for t in terms))
    if not all(_WORD.fullmatch(t) for t in terms):
        return first, None
    return first, re.compile(f"(?:{'|'.join(re.escape(t) for t in terms)})\\w*")


@functools.lru_cache(maxsize=512)
def _pattern(terms: tuple[str, ...]) -> re.Pattern[str]:
    """The IGNORECASE mark pattern (rare texts), compiled once per term list: compiling it cost
    more than marking a hundred windows."""
    alts = "|".join(re.escape(t) for t in terms)
    return re.compile(f"\\b({alts})\\w*", re.IGNORECASE)


def snippet(text: str, terms: Sequence[str], width: int = 240) -> str:
    return Snippeter(terms, width)(text)


_COLS = tuple(c.strip() for c in HIT_COLUMNS.split(","))
_UNIT_ID, _SCOPE, _DOC_ID, _MODALITY, _PLANE, _SOURCE_URI, _MIME, _TEXT, _LOC_KIND = range(1, 10)
_BRIEF = tuple(c.strip() for c in BRIEF_COLUMNS.split(","))


def fetch_hit_rows(
    conn: sqlite3.Connection,
    rowids: Sequence[int],
    where: str | None = None,
    params: Sequence[object] = (),
) -> dict[int, tuple[Any, ...]]:
    """Hit rows by id, as plain tuples in ``HIT_COLUMNS`` order (a ``sqlite3.Row`` per hit and
    its by-name lookups were a third of hydration). With ``where`` (a predicate on alias ``u``),
    only the rows that satisfy it: the exact visibility re-check and the hydration in one query;
    rows without a Locator then come in ``BRIEF_COLUMNS`` order (:func:`build_hits` reads both).
    """
    if not rowids:
        return {}
    cur = conn.cursor()
    cur.row_factory = None
    arg = orjson.dumps([int(k) for k in rowids])
    if where is None:
        return {r[0]: r for r in cur.execute(_HYDRATE, (arg,))}
    # NOT INDEXED: rowid lookups only (see lexical.recheck; a scope index range is a scan).
    sql = f"{_HYDRATE_CHECKED} AND {where}"
    rows = {r[0]: r for r in cur.execute(sql, (arg, *params))}
    located = [k for k, r in rows.items() if r[_LOC_KIND] is not None]
    if located:
        # The rare rows with a Locator: every column. One deleted in between is left out, as
        # if it had gone before the check (build_hits skips a missing row).
        full = fetch_hit_rows(conn, located)
        for k in located:
            if k in full:
                rows[k] = full[k]
            else:
                del rows[k]
    return rows


def build_hits(
    rows: dict[int, tuple[Any, ...]],
    top: Sequence[tuple[int, float]],
    dense: Sequence[int],
    lexical: Sequence[int],
    terms: Sequence[str],
    rr_rank: dict[int, int],
    snippets: bool = True,
) -> list[dict[str, Any]]:
    """Hit objects in ``top`` order; rows deleted since ranking are skipped. ``snippets``:
    False leaves every ``snippet`` None."""
    snip = Snippeter(terms) if snippets else None
    d_rank = {k: i for i, k in enumerate(dense, 1)}
    l_rank = {k: i for i, k in enumerate(lexical, 1)}
    hits = []
    for key, score in top:
        r = rows.get(key)
        if r is None:  # deleted between ranking and hydration
            continue
        # Locators and object links are rare: only their rows get a by-name view.
        has_loc, has_obj = r[_LOC_KIND] is not None, bool(r[-1])  # object_key: last in both
        named = None
        if has_loc or has_obj:
            names = _COLS if len(r) == len(_COLS) else _BRIEF
            named = dict(zip(names, r, strict=True))
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
                "snippet": snip(text) if snip is not None else None,
                "locator": loc.to_dict() if loc else None,
                "link": units_sql.unit_link(named) if has_obj else None,
                "ranks": ranks,
            }
        )
    return hits


def hit_unit_id(row: tuple[Any, ...]) -> str:
    """The ``unit_id`` of a row from :func:`fetch_hit_rows` (RRF tie-break)."""
    return str(row[_UNIT_ID])
