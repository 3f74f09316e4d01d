"""Hydration: fused keys -> hit objects (the store's hit rows, snippets from per-query patterns).

The snippet patterns are compiled once per query, not once per hit (that was 40 % of a search).
"""

from __future__ import annotations

import functools
import html
import re
from collections.abc import Mapping, Sequence
from typing import Any

from ..storage.protocols_search import HitRow, UnitKey


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


def build_hits(
    rows: Mapping[UnitKey, HitRow],
    top: Sequence[tuple[UnitKey, float]],
    dense: Sequence[UnitKey],
    lexical: Sequence[UnitKey],
    terms: Sequence[str],
    rr_rank: Mapping[UnitKey, int],
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
        ranks: dict[str, int | None] = {"dense": d_rank.get(key), "lexical": l_rank.get(key)}
        if rr_rank:
            ranks["rerank"] = rr_rank.get(key)
        hits.append(
            {
                "unit_id": r.unit_id,
                "score": round(score, 6),
                "plane": r.plane,
                "modality": r.modality,
                "doc_id": r.doc_id,
                "scope": r.scope,
                "source_uri": r.source_uri,
                "mime": r.mime,
                "text": r.text,
                "snippet": snip(r.text) if snip is not None else None,
                "locator": r.locator.to_dict() if r.locator else None,
                "link": r.link,
                "ranks": ranks,
            }
        )
    return hits
