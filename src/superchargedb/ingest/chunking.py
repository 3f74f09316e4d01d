"""Structure-aware chunking of text into the embedder's token window.

A text that fits stays one chunk. A longer one is cut at the coarsest structure that works:
prose at Markdown headings, then blank-line paragraphs, sentences, lines, words and finally
tokens; code and logs (``kind="lines"``) at blank-line blocks, then lines, words, tokens.
Pieces that fit are packed greedily into chunks. A section (or a code block) that does not fit
is cut on its own, so its chunks never mix with a neighbouring section; inside a section, the
pieces of a cut paragraph pack together with the short paragraphs (or heading) around them.

Token counts come from ``token_spans`` of the whole text, taken once: re-tokenizing every
candidate would be quadratic. That count is exact for a span whose edges sit next to a BERT
pre-token separator (whitespace, punctuation, CJK), which is where nearly every cut falls; a
span cut inside a word or next to a character the normalizer deletes is counted by the
tokenizer itself. So the bound holds exactly, not approximately. Chunk offsets are code points
into the source, ``text[start:end] == chunk.text``, with surrounding whitespace trimmed.
Nothing is dropped: the chunks together cover every non-whitespace character.
"""

from __future__ import annotations

import re
import unicodedata
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

from superchargedb.errors import ValidationError

Kind = Literal["prose", "lines"]
Span = tuple[int, int]
Atom = tuple[int, int, int]  # start, end, level of the cut before it


@runtime_checkable
class TokenCounter(Protocol):
    """What chunking needs from an embedder (every ``Embedder`` satisfies it)."""

    def count_tokens(self, text: str) -> int: ...
    def token_spans(self, text: str) -> list[tuple[int, int]]: ...


@dataclass(frozen=True)
class Chunk:
    start: int  # code-point offset into the source, inclusive
    end: int  # exclusive
    text: str  # == source[start:end]
    line_start: int | None  # 1-based, inclusive
    line_end: int | None


_HEADING = re.compile(r"^ {0,3}#{1,6}(?:[ \t]|$)", re.M)
_FENCE = re.compile(r"^ {0,3}(?:```|~~~)", re.M)
_PARAGRAPH = re.compile(r"\n[ \t\r\f\v]*\n\s*")
# Sentence end: terminal punctuation, optional closing quotes/brackets, then whitespace; CJK
# terminators need no whitespace after them.
_SENTENCE = re.compile(r"[.!?\u2026]+[\"'\u201d\u2019)\]]*\s+|[\u3002\uff01\uff1f]+\s*")
_LINE = re.compile(r"\n")
_WORD = re.compile(r"\s+")
_PSEUDO_TOKEN = re.compile(r"\w+|[^\w\s]")  # fallback spans for a bare count function


def _separator(c: str) -> bool:
    """Whitespace, punctuation or a CJK ideograph: a pre-token boundary in BERT tokenizers.

    Control characters count as whitespace for ``str.isspace`` but the BERT normalizer deletes
    them, joining their neighbours into one word, so they are not separators here."""
    if c in " \t\n\r":
        return True
    cat = unicodedata.category(c)
    if cat[0] == "C":
        return False
    o = ord(c)
    return (
        c.isspace()
        or cat[0] == "P"
        or 33 <= o <= 47
        or 58 <= o <= 64
        or 91 <= o <= 96
        or 123 <= o <= 126
        or 0x4E00 <= o <= 0x9FFF  # CJK ranges exactly as BERT's _is_chinese_char
        or 0x3400 <= o <= 0x4DBF
        or 0x20000 <= o <= 0x2CEAF
        or 0xF900 <= o <= 0xFAFF
        or 0x2F800 <= o <= 0x2FA1F
    )


def _heading_cuts(text: str, a: int, b: int) -> Iterator[int]:
    """Start offsets of Markdown ATX headings in [a, b), skipping fenced code blocks."""
    fences = [m.start() for m in _FENCE.finditer(text, a, b)]
    for m in _HEADING.finditer(text, a, b):
        if bisect_left(fences, m.start()) % 2 == 0:  # an even number of fences before: outside
            yield m.start()


def _regex_cuts(pattern: re.Pattern[str]) -> Callable[[str, int, int], Iterator[int]]:
    def cuts(text: str, a: int, b: int) -> Iterator[int]:
        for m in pattern.finditer(text, a, b):
            yield m.end()

    return cuts


_PROSE_LEVELS = [
    _heading_cuts,
    _regex_cuts(_PARAGRAPH),
    _regex_cuts(_SENTENCE),
    _regex_cuts(_LINE),
    _regex_cuts(_WORD),
]
_LINES_LEVELS = [_regex_cuts(_PARAGRAPH), _regex_cuts(_LINE), _regex_cuts(_WORD)]


class _Chunker:
    def __init__(
        self,
        text: str,
        spans: list[tuple[int, int]],
        count: Callable[[str], int],
        max_tokens: int,
        overlap: int,
        kind: Kind,
        exact: bool,
    ) -> None:
        self.text = text
        self.exact = exact  # spans are the real tokenizer's (not pseudo-tokens)
        self.starts = [s for s, _ in spans]
        self.ends = [e for _, e in spans]
        self.count = count
        self.max = max_tokens
        self.overlap = overlap
        self.levels = _PROSE_LEVELS if kind == "prose" else _LINES_LEVELS
        # Cuts at or above soft_level are preferred chunk ends (paragraphs and sections in
        # prose, blank-line blocks in code); overlap only where prose is cut inside a paragraph.
        self.soft_level = 1 if kind == "prose" else 0
        self.overlap_level = 2 if kind == "prose" and overlap > 0 else 1 << 30

    def ntok(self, a: int, b: int) -> int:
        """Tokens touching [a, b): a token straddling an edge counts (errs on the safe side)."""
        return max(0, bisect_left(self.starts, b) - bisect_right(self.ends, a))

    def clean_at(self, p: int) -> bool:
        """Cutting at p leaves every pre-token whole (so span counts stay exact)."""
        t = self.text
        return p == 0 or p == len(t) or _separator(t[p - 1]) or _separator(t[p])

    def size(self, a: int, b: int) -> int:
        """Exact token count of text[a:b]: from the spans when both edges are clean."""
        if not self.exact or (self.clean_at(a) and self.clean_at(b)):
            return self.ntok(a, b)
        return self.count(self.text[a:b])

    def trim(self, a: int, b: int) -> Span | None:
        t = self.text
        while a < b and t[a].isspace():
            a += 1
        while b > a and t[b - 1].isspace():
            b -= 1
        return (a, b) if a < b else None

    def units(self, level: int, a: int, b: int, budget: int) -> list[Span]:
        """Partition [a, b) at the level's cut points; trimmed, empty pieces dropped."""
        if level < len(self.levels):
            cuts = list(self.levels[level](self.text, a, b))
        else:
            # Token level (a run with no whitespace: CJK, minified JSON). Cutting before every
            # token would make one atom per token, slow for megabyte runs; runs of
            # budget - overlap tokens pack the same way: one run plus the overlap per chunk.
            step = max(1, budget - (self.overlap if level >= self.overlap_level else 0))
            i0, i1 = bisect_left(self.starts, a), bisect_left(self.starts, b)
            cuts = self.starts[i0 + step : i1 : step]
        out: list[Span] = []
        prev = a
        for c in [*cuts, b]:
            if prev < c <= b and (u := self.trim(prev, c)):
                out.append(u)
            prev = max(prev, c)
        return out

    def split(self, a: int, b: int, budget: int) -> list[Span]:
        if self.size(a, b) <= budget:
            return [(a, b)]
        # Sections (prose) / blank-line blocks (lines) that fit are packed together; one that
        # doesn't is cut and packed on its own, so its chunks never mix with a neighbour's.
        out: list[Span] = []
        group: list[Atom] = []
        for u in self.units(0, a, b, budget):
            if self.size(*u) <= budget:
                group.append((u[0], u[1], 0))
                continue
            out += self.pack(group, budget) + self.pack(self.atoms(*u, 1, 0, budget), budget)
            group = []
        return out + self.pack(group, budget)

    def atoms(self, a: int, b: int, level: int, cut: int, budget: int) -> list[Atom]:
        """Cut [a, b) at the coarsest level that has cuts, recursing into what doesn't fit.

        Each atom fits the budget and carries ``cut``, the level of the boundary before it."""
        if self.size(a, b) <= budget or b - a <= 1:
            return [(a, b, cut)]
        while level <= len(self.levels):
            units = self.units(level, a, b, budget)
            if len(units) > 1:
                break
            level += 1
        else:  # a single token over budget (tiny budgets only): cut by characters
            units = self.halve(a, b)
        out: list[Atom] = []
        for i, (s, e) in enumerate(units):
            out += self.atoms(s, e, level + 1, cut if i == 0 else level, budget)
        return out

    def pack(self, atoms: list[Atom], budget: int) -> list[Span]:
        """Greedy packing that prefers to close a half-full chunk at a paragraph or section
        boundary; a chunk cut inside a prose paragraph re-reads the previous chunk's tail."""
        if not atoms:
            return []
        out: list[Span] = []
        start, end, _ = atoms[0]
        for s, e, cut in atoms[1:]:
            soft = cut <= self.soft_level and 2 * self.size(start, end) >= budget
            if not soft and self.size(start, e) <= budget:
                end = e
                continue
            out.append((start, end))
            ov = self.overlap_start(start, end) if cut >= self.overlap_level else None
            start = ov if ov is not None and ov < s and self.size(ov, e) <= budget else s
            end = e
        out.append((start, end))
        return out

    def overlap_start(self, a: int, b: int) -> int | None:
        """A clean start in the tail of [a, b) worth <= overlap tokens and <= half of it."""
        i0, i1 = bisect_right(self.ends, a), bisect_left(self.starts, b)
        for k in range(max(i1 - self.overlap, i0 + (i1 - i0 + 1) // 2), i1):
            s = self.starts[k]
            prev = self.text[s - 1]
            # a word start, or a cut between two separators (CJK ideographs, punctuation)
            if a < s < b and _separator(prev) and (prev.isspace() or _separator(self.text[s])):
                return s
        return None

    def halve(self, a: int, b: int) -> list[Span]:
        """Last resort when no cut exists: split near the middle, preferring whitespace."""
        mid = (a + b) // 2
        ws = self.text.rfind(" ", a + 1, mid + 1)
        cut = ws if ws > a else max(mid, a + 1)
        return [u for u in (self.trim(a, cut), self.trim(cut, b)) if u]

    def fit(self, a: int, b: int, budget: int) -> list[Span]:
        """Bare count function only: re-count each chunk, re-split what pseudo-spans misjudged."""
        n = self.count(self.text[a:b])
        if n <= self.max or b - a <= 1:  # one code point that is several tokens can't be cut
            return [(a, b)]
        smaller = max(1, min(budget - 1, budget * self.max // n))
        pieces = self.split(a, b, smaller)
        if len(pieces) <= 1:
            pieces = self.halve(a, b)
        return [p for piece in pieces for p in self.fit(piece[0], piece[1], smaller)]


def chunk_text(
    text: str,
    tokenizer: TokenCounter | Callable[[str], int],
    max_tokens: int = 240,
    overlap_tokens: int = 32,
    kind: Kind = "prose",
) -> list[Chunk]:
    """Split ``text`` into ordered chunks of at most ``max_tokens`` tokens each.

    ``tokenizer`` is an Embedder (anything with ``count_tokens`` and ``token_spans``) or a bare
    count function, in which case word/punctuation spans stand in for token spans (slower, no
    overlap). A whitespace-only text gives no chunks. Adjacent chunks overlap by at most
    ``overlap_tokens`` (capped at half a chunk), and only where prose is cut inside a paragraph.
    The one case over ``max_tokens``: a single code point that alone is more tokens than that
    (a Hangul syllable is 3 WordPiece tokens), which cannot be cut.
    """
    if max_tokens < 1:
        raise ValidationError("max_tokens must be >= 1")
    if kind not in ("prose", "lines"):
        raise ValidationError(f"unknown chunk kind {kind!r}")
    count: Callable[[str], int]
    exact = isinstance(tokenizer, TokenCounter)
    if isinstance(tokenizer, TokenCounter):
        count, spans = tokenizer.count_tokens, tokenizer.token_spans(text)
    else:
        # Pseudo-spans can be wrong anywhere, so every chunk is re-counted and re-split; overlap
        # is off because a re-split next to an overlap could put chunks out of order.
        count, spans = tokenizer, [m.span() for m in _PSEUDO_TOKEN.finditer(text)]
        overlap_tokens = 0
    overlap = max(0, min(overlap_tokens, max_tokens // 2))
    ch = _Chunker(text, spans, count, max_tokens, overlap, kind, exact)
    whole = ch.trim(0, len(text))
    if whole is None:
        return []
    pieces = ch.split(whole[0], whole[1], max_tokens)
    if not exact:
        pieces = [p for a, b in pieces for p in ch.fit(a, b, max_tokens)]

    newlines = [m.start() for m in _LINE.finditer(text)]
    return [
        Chunk(
            start=a,
            end=b,
            text=text[a:b],
            line_start=bisect_left(newlines, a) + 1,
            line_end=bisect_left(newlines, b - 1) + 1,
        )
        for a, b in pieces
    ]
