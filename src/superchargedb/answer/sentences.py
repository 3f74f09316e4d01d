"""Sentence splitting into character spans, shared by the localizer and the support checker.

``split_sentences(text)`` returns ``(start, end)`` code-point spans (exclusive end), ordered,
non-overlapping, trimmed of surrounding whitespace, and together covering every non-whitespace
character of ``text``. It is a rule-based splitter tuned for English prose, runbooks and
answers with ``[n]`` markers:

* a sentence ends at ``.``, ``!``, ``?`` or ``…`` (plus closing quotes/brackets) followed by
  whitespace and then something that is not a lowercase letter;
* no split after abbreviations (``e.g.``, ``Dr.``, ``Inc.``), dotted acronyms (``U.S.``), or
  initials after a capitalised word (``Franklin D. Roosevelt``); decimals (``0.8``) never split
  because no whitespace follows their period;
* citation markers written after the full stop (``... requests. [1] Next``) stay with the
  sentence they close;
* blank lines, bullet or numbered list items and Markdown headings always start a new sentence.
"""

from __future__ import annotations

import re

__all__ = ["SentenceStream", "split_sentences", "sentence_texts"]

# Abbreviations after which a period never ends a sentence (lowercase, without the final dot).
_ABBREV = frozenset(
    """e.g i.e cf vs dr mr mrs prof st jr sr inc corp ltd co fig figs al approx dept est mt gen
    col sgt lt capt vol eq eqs ref refs jan feb mar apr jun jul aug sep sept oct nov dec ca resp
    ph.d m.sc b.sc u.s u.k e.u u.n a.m p.m v c""".split()  # noqa: SIM905 (a word list reads better)
)
# Abbreviations that end a sentence only when a digit does not follow ("No. 5", "Ms. Chen").
_BEFORE_DIGIT = frozenset({"no", "nos", "p", "pp", "sec", "ch", "art"})
_TITLE = frozenset({"ms"})
# Words that open a sentence after "vitamin D." (so the period ends one), unlike a surname.
_OPENERS = frozenset(
    """the a an this that these those it its he she his her they their we our i you in on at
    but and or so then next however there here when while after before if as for to from by
    with one some many most all each no not also""".split()  # noqa: SIM905 (a word list reads better)
)  # "Ms. Chen" vs "took 14 ms. Then"

_END = re.compile(r"(?:[.!?]+|…)[\"'”’)\]]*(?=\s|$)")
_MARKERS = re.compile(r"[ \t]*(?:\[\d+(?:\s*[,;]\s*\d+)*\][ \t]*)+")
_HARD_BREAK = re.compile(r"\n[ \t]*\n\s*|\n(?=[ \t]*(?:[-*•+]\s|\d{1,3}[.)]\s|#{1,6}\s))")
_HEADING_LINE = re.compile(r"^[ \t]*#{1,6}\s[^\n]*$", re.MULTILINE)
_DOTTED = re.compile(r"^(?:[a-z]{1,2}\.)+[a-z]{1,2}$")


def _word_before(text: str, end: int) -> str:
    """The whitespace-delimited token ending just before ``end`` (the terminal punctuation)."""
    start = end
    while start > 0 and not text[start - 1].isspace():
        start -= 1
    return text[start:end].lstrip("([\"'“‘")


def _is_abbreviation(text: str, dot: int, nxt: str) -> bool:
    """Whether the period at ``dot`` belongs to an abbreviation rather than ending a sentence."""
    word = _word_before(text, dot)
    low = word.lower()
    if low in _ABBREV or _DOTTED.match(low):
        return True
    if low in _BEFORE_DIGIT:
        return nxt[:1].isdigit()
    if low in _TITLE:
        prev = text[: dot - len(word)].rstrip()
        return not prev[-1:].isdigit()
    if len(word) == 1 and word.isupper():
        # An initial ("J. Smith", "Franklin D. Roosevelt"), unless a lowercase word precedes it
        # ("vitamin D. Next") and no name follows ("violinist L. Subramaniam" keeps it).
        before = text[: dot - 1].rstrip().split()
        if not before or before[-1][:1].isupper() or len(before[-1].rstrip(".")) == 1:
            return True
        after = nxt.split(maxsplit=1)[:1]
        name = after[0].strip("\"'“‘(") if after else ""
        return name[:1].isupper() and name.isalpha() and name.lower() not in _OPENERS
    return False


def _cut_points(text: str) -> list[int]:
    cuts: set[int] = set()
    for m in _HARD_BREAK.finditer(text):
        cuts.add(m.start())
    for m in _HEADING_LINE.finditer(text):
        cuts.add(m.end())
    for m in _END.finditer(text):
        punct_end = m.end()
        rest = text[punct_end:]
        nxt = rest.lstrip()
        if nxt and nxt[0].islower():
            continue
        first = m.group(0)[0]
        single_dot = first == "." and m.group(0).rstrip("\"'”’)]").count(".") == 1
        if single_dot and _is_abbreviation(text, m.start(), nxt):
            continue
        cut = punct_end
        mk = _MARKERS.match(text, cut)
        if mk and mk.end() > cut:
            cut = mk.end()
        cuts.add(cut)
    return sorted(c for c in cuts if 0 < c < len(text))


def split_sentences(text: str) -> list[tuple[int, int]]:
    """Sentence spans ``(start, end)`` over ``text``; see the module docstring for the rules."""
    spans: list[tuple[int, int]] = []
    bounds = [0, *_cut_points(text), len(text)]
    for lo, hi in zip(bounds, bounds[1:], strict=False):
        while lo < hi and text[lo].isspace():
            lo += 1
        while hi > lo and text[hi - 1].isspace():
            hi -= 1
        if hi > lo:
            spans.append((lo, hi))
    return spans


def sentence_texts(text: str) -> list[str]:
    """The sentences themselves, in order."""
    return [text[a:b] for a, b in split_sentences(text)]


# Characters a run of markers after a full stop can still grow by ("[1", "[1][2", "[1, 3]").
_MARKER_CHARS = frozenset("[]0123456789,;")


class SentenceStream:
    """Sentences of a text that arrives in pieces (a streamed model answer), each handed out
    as soon as no later piece can change it: together exactly ``sentence_texts(whole text)``.

    A sentence is final once a character follows it that no marker can contain: every rule
    above looks at most at the first character after the whitespace that follows a full stop,
    and markers written after the full stop stay with the sentence they close."""

    def __init__(self) -> None:
        self.buf = ""
        self.done = 0  # sentences handed out

    def feed(self, piece: str) -> list[str]:
        self.buf += piece
        spans = split_sentences(self.buf)
        out = []
        for i in range(self.done, len(spans) - 1):
            rest = self.buf[spans[i][1] :]
            if not any(not c.isspace() and c not in _MARKER_CHARS for c in rest):
                break
            out.append(self.buf[spans[i][0] : spans[i][1]])
        self.done += len(out)
        return out

    def close(self) -> list[str]:
        """The sentences left once the text is complete."""
        spans = split_sentences(self.buf)
        out = [self.buf[a:b] for a, b in spans[self.done :]]
        self.done = len(spans)
        return out
