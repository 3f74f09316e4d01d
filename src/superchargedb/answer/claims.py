"""Lexical features of a claim (an answer sentence) or of evidence (passage sentences).

``analyse(text) -> Features``: content stems, vocabulary, numbers with their units and the words
around them, dates, capitalised names, identifiers, rates ("per GB"), negation and contrast
scopes, clauses and direction words. ``merge`` unions several sentences' features (a window, a
passage). The guards that compare a claim's features with its evidence are in ``guards.py``;
the word lists in ``lexicon.py``.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from .lexicon import (
    APPROX,
    BOUNDARY,
    CANONICAL,
    CLAUSE_WORDS,
    CURRENCY,
    DATES,
    DIRECTIONS,
    INSTRUCTION,
    MARKER,
    MONTH_NAMES,
    MONTHS,
    MULT,
    MULT_ATTACHED,
    NEG_WORDS,
    NOT_UN,
    NUMERIC,
    ONES,
    RANGE,
    RATE_ADVERBS,
    STOP,
    SUFFIXES,
    TENS,
    TOKEN,
    UNITS,
)

__all__ = [
    "Clause",
    "Date",
    "Features",
    "Number",
    "analyse",
    "coverage",
    "merge",
    "norm_word",
    "stem",
    "strip_markers",
]

#: "not <word>" that limits rather than negates.
NOT_LIMITERS = frozenset(("only", "just", "merely", "simply", "solely"))
#: Content tokens after a negation cue that form its scope (fewer at a clause boundary).
NEG_SCOPE = 6
#: Content words either side of a number in the cited text that form its context: one of them
#: must occur in the sentence (the binding guard against numbers swapped within a passage).
NUM_CONTEXT = 3


def strip_markers(sentence: str) -> str:
    """The sentence without ``[n]`` markers, whitespace collapsed."""
    return " ".join(MARKER.sub("", sentence).split())


def stem(word: str) -> str:
    """Crude stemmer: possessive, one suffix and a final ``e`` off; at most 6 characters."""
    w = norm_word(word)
    for suf in SUFFIXES:
        if w.endswith(suf) and len(w) - len(suf) >= 3:
            if suf == "s" and w.endswith(("ss", "us", "is")):
                break
            w = w[: -len(suf)] + ("y" if suf in ("ies", "ied") else "")
            break
    if len(w) > 3 and w.endswith("e"):
        w = w[:-1]
    return w[:6]


def norm_word(tok: str) -> str:
    w = tok.lower().replace("’", "'")
    return w[:-2] if w.endswith("'s") else w.strip("'")


@dataclass(frozen=True)
class Number:
    surface: str
    value: float  # as written; raw = value * mult; base = raw * factor (SI-like unit of dim)
    mult: float = 1.0
    factor: float = 1.0
    dim: str | None = None
    unit: str = ""
    decimals: int = 0
    approx: bool = False
    context: frozenset[str] = frozenset()

    @property
    def raw(self) -> float:
        return self.value * self.mult

    @property
    def base(self) -> float:
        return self.value * self.mult * self.factor


Date = tuple[str, int | None, int, int | None]  # surface, year, month, day
Clause = tuple[str, frozenset[str]]  # text, content stems


@dataclass(frozen=True)
class Features:
    text: str
    n_tokens: int = 1
    stems: frozenset[str] = frozenset()
    vocab: frozenset[str] = frozenset()  # lowercase tokens, hyphen parts, month names of dates
    numbers: tuple[Number, ...] = ()
    dates: tuple[Date, ...] = ()
    names: tuple[str, ...] = ()
    idents: tuple[str, ...] = ()
    rates: frozenset[str] = frozenset()
    neg_scopes: tuple[frozenset[str], ...] = ()
    soft_negation: tuple[str, ...] = ()  # "instead" (of), "rather" (than), "uncatalysed"
    affirmed: frozenset[str] = frozenset()  # stems outside every negation scope
    contrast_scopes: tuple[frozenset[str], ...] = ()  # what "rather than"/"instead of" rejects
    clauses: tuple[Clause, ...] = ()
    directions: frozenset[tuple[str, int, str]] = frozenset()  # (pair, side, word)
    instruction: bool = False


def _find_dates(text: str) -> tuple[list[Date], list[tuple[int, int]]]:
    found: list[Date] = []
    spans: list[tuple[int, int]] = []
    for pattern, (gy, gm, gd) in DATES:
        for m in pattern.finditer(text):
            if any(a < m.end() and m.start() < b for a, b in spans):
                continue
            raw = m.group(gm)
            month = int(raw) if raw.isdigit() else MONTHS[raw.lower()]
            year = int(m.group(gy)) if gy and m.group(gy) else None
            day = int(m.group(gd)) if gd and m.group(gd) else None
            if 1 <= month <= 12 and (day is None or 1 <= day <= 31):
                found.append((m.group(0), year, month, day))
                spans.append((m.start(), m.end()))
    return found, spans


def _word_number(low: str) -> int | None:
    parts = low.split("-")
    if len(parts) == 1:
        return ONES.get(low, TENS.get(low))
    if len(parts) == 2 and parts[0] in TENS and 0 < ONES.get(parts[1], 0) < 10:
        return TENS[parts[0]] + ONES[parts[1]]
    return None


def _unit_after(lows: list[str], j: int) -> tuple[str | None, float, str, float, int]:
    """(dim, factor, label, multiplier, tokens used) for the words following a number."""
    mult, used = 1.0, 0
    if j < len(lows) and lows[j] in MULT:
        mult, used = MULT[lows[j]], 1
    w = lows[j + used] if j + used < len(lows) else ""
    nxt = lows[j + used + 1] if j + used + 1 < len(lows) else ""
    if w == "per" and nxt == "cent":
        return "pct", 1.0, "%", mult, used + 2
    if w == "percentage" and nxt in ("point", "points"):
        return "pp", 1.0, "percentage points", mult, used + 2
    if w in ("°", "degree", "degrees") and nxt in ("c", "celsius", "f", "fahrenheit"):
        return ("degC" if nxt[0] == "c" else "degF"), 1.0, "°" + nxt[0].upper(), mult, used + 2
    if w in UNITS:
        dim, factor = UNITS[w]
        return dim, factor, w, mult, used + 1
    return None, 1.0, "", mult, used


def _parse_number(tok: str, low: str, lows: list[str], i: int) -> tuple[Number, int] | None:
    """The number starting at token ``i`` and how many following tokens its unit used."""
    value: float | None = None
    decimals, suffix = 0, ""
    if tok[0].isdigit():
        m = NUMERIC.match(tok)
        if not m:
            return None
        value = float(m.group(1).replace(",", "") + (m.group(2) or ""))
        decimals = len(m.group(2) or ".") - 1
        suffix = m.group(3) or ""
        if suffix in ("st", "nd", "rd", "th"):
            suffix = ""
    else:
        parts = low.split("-")
        wn = _word_number(low)
        if wn is None and len(parts) == 2 and parts[1] in UNITS:
            wn, suffix = _word_number(parts[0]), parts[1]
        elif wn is None and low.endswith("fold"):  # "threefold"
            wn, suffix = _word_number(low[:-4]), "fold"
        nxt = lows[i + 1] if i + 1 < len(lows) else ""
        if wn is None or (low == "one" and nxt not in UNITS and nxt not in MULT):
            return None
        value = float(wn)
    mult, factor, dim, label, used = 1.0, 1.0, None, "", 0
    if suffix in MULT_ATTACHED:
        mult = MULT_ATTACHED[suffix]
    elif suffix == "s" and decimals == 0 and 1000 <= value <= 2999:
        dim, label = "decade", "s"
    elif suffix:
        if suffix.lower() not in UNITS:
            return None  # "3D", "5G": an identifier
        dim, factor = UNITS[suffix.lower()]
        label = suffix
    if dim is None:
        dim, factor, label, m2, used = _unit_after(lows, i + 1)
        mult *= m2
        label = " ".join(lows[i + 1 : i + 1 + used]) if used else label
    cur = CURRENCY.get(lows[i - 1]) if i else None
    if cur:
        dim, factor, label = cur, 1.0, f"{lows[i - 1]} {label}".strip()
    approx = any(w in APPROX for w in lows[max(0, i - 2) : i])
    return Number(tok, value, mult, factor, dim, label, decimals, approx), used


def _is_contrast(lows: list[str], i: int) -> bool:
    """ "A rather than B", "instead of B", "as opposed to B", "unlike B": B is rejected."""
    w, nxt = lows[i], lows[i + 1] if i + 1 < len(lows) else ""
    return (w, nxt) in (("rather", "than"), ("instead", "of"), ("opposed", "to")) or w == "unlike"


def _soft_negation(lows: list[str], i: int) -> str:
    """A contrast ("instead of") or an ``un-`` word ("uncatalysed"): enough to say that the
    sentence negates something, too vague to say what. Returns the word, or ""."""
    w = lows[i]
    if _is_contrast(lows, i) or (len(w) >= 7 and w.startswith("un") and not w.startswith(NOT_UN)):
        return w
    return ""


def _is_cue(lows: list[str], i: int) -> bool:
    w, nxt = lows[i], lows[i + 1] if i + 1 < len(lows) else ""
    # "not only/just/merely X (but also Y)" affirms X: "Islamism is controversial not just
    # because it posits a political role for Islam" supports "Islamism posits a political role".
    if w == "not" and nxt in NOT_LIMITERS:
        return False
    return (
        w in NEG_WORDS
        or w.endswith(("n't", "n’t"))
        or (w == "no" and nxt == "longer")
        or (w.startswith(("fail", "unable")) and nxt == "to")
    )


@functools.lru_cache(maxsize=8192)
def analyse(text: str) -> Features:
    """The lexical features of one sentence (or of any short text)."""
    dates, date_spans = _find_dates(text)
    matches = list(TOKEN.finditer(text))
    toks = [m.group(0) for m in matches]
    lows = [t.lower() for t in toks]
    in_date = [any(a <= m.start() < b for a, b in date_spans) for m in matches]
    first_word = next((i for i, t in enumerate(toks) if t[0].isalnum()), -1)
    numbers: list[tuple[Number, int]] = []
    names: list[str] = []
    idents: list[str] = []
    vocab = {MONTH_NAMES[d[2]] for d in dates}
    stems: dict[int, tuple[str, ...]] = {}  # token position -> stems (hyphen parts apart)
    i = 0
    while i < len(toks):
        tok, low, pos = toks[i], norm_word(toks[i]), i
        i += 1
        if not tok[0].isalnum():
            continue
        parts = [p for p in re.split(r"[-/]", low) if p]
        vocab.add(low)
        vocab.update(parts)
        if in_date[pos]:
            continue
        if tok[0].isdigit() and RANGE.match(tok) and re.search(r"[-–]", tok):
            numbers.extend((Number(p, float(p)), pos) for p in re.split(r"[-–]", tok))
            continue
        parsed = _parse_number(tok, low, lows, pos)
        if parsed is not None:
            numbers.append((parsed[0], pos))
            i += parsed[1]
            continue
        if any(c.isdigit() for c in tok):
            idents.append(tok)
            stems[pos] = (low,)
            continue
        if low in STOP and not (tok[0].isupper() and low in MONTHS and pos != first_word):
            continue  # but "in May" is a month
        if tok[0].isupper() and pos != first_word and low not in UNITS and len(tok) > 1:
            names.append(tok)
        stems[pos] = tuple(dict.fromkeys(stem(p) for p in parts if p not in STOP)) or (low,)
    words = [p for p in sorted(stems) if not any(c.isdigit() for c in stems[p][0])]
    neg, negated = _scopes(lows, stems, _is_cue)
    return Features(
        text=text,
        n_tokens=max(1, sum(1 for t in toks if t[0].isalnum())),
        stems=frozenset(x for v in stems.values() for x in v),
        vocab=frozenset(vocab),
        numbers=tuple(replace(n, context=_context(words, stems, p)) for n, p in numbers),
        dates=tuple(dates),
        names=tuple(names),
        idents=tuple(idents),
        rates=frozenset(_rates(lows)),
        neg_scopes=tuple(neg),
        soft_negation=tuple(w for k in range(len(lows)) if (w := _soft_negation(lows, k))),
        affirmed=frozenset(x for p, v in stems.items() if p not in negated for x in v),
        contrast_scopes=tuple(_scopes(lows, stems, _is_contrast)[0]),
        clauses=tuple(_clauses(text, [m.span() for m in matches], lows, stems)),
        directions=frozenset(
            (pair, side, w)
            for w in lows
            for pair, up, down in DIRECTIONS
            for side, group in ((0, up), (1, down))
            if w in group
        ),
        instruction=bool(INSTRUCTION.search(text)),
    )


def _context(words: list[int], stems: dict[int, tuple[str, ...]], pos: int) -> frozenset[str]:
    """Stems of the NUM_CONTEXT content words either side of token position ``pos``."""
    before = [p for p in words if p < pos][-NUM_CONTEXT:]
    after = [p for p in words if p > pos][:NUM_CONTEXT]
    return frozenset(x for p in before + after for x in stems[p])


def _rates(lows: list[str]) -> set[str]:
    """Canonical units of "per GB", "/s", "every month", "a week", "monthly"..."""
    out = set()
    for k in range(len(lows) - 1):
        unit = UNITS.get(lows[k + 1])
        if unit is None or len(lows[k + 1]) < 2:
            continue
        if lows[k] in ("per", "/", "every", "each") or (lows[k] == "a" and unit[0] == "time"):
            out.add(CANONICAL[unit])
    return out | {CANONICAL[UNITS[RATE_ADVERBS[w]]] for w in lows if w in RATE_ADVERBS}


def _scopes(
    lows: list[str], stems: dict[int, tuple[str, ...]], cue: Callable[[list[str], int], bool]
) -> tuple[list[frozenset[str]], set[int]]:
    """One scope per cue (the content stems after it, up to a clause boundary), and the token
    positions the scopes cover."""
    scopes: list[frozenset[str]] = []
    covered: set[int] = set()
    for k in range(len(lows)):
        if cue(lows, k):
            scope: list[str] = []
            for j in range(k + 1, len(lows)):
                if lows[j] in BOUNDARY or len(scope) >= NEG_SCOPE:
                    break
                scope.extend(stems.get(j, ()))
                covered.add(j)
            scopes.append(frozenset(scope))
    return scopes, covered


def _clauses(
    text: str, spans: list[tuple[int, int]], lows: list[str], stems: dict[int, tuple[str, ...]]
) -> list[Clause]:
    """(text, content stems) per clause: split at punctuation and coordinating words."""
    out: list[Clause] = []
    first, found = -1, set[str]()
    for j, w in enumerate([*lows, "."]):
        if w in BOUNDARY or w in CLAUSE_WORDS:
            if found:
                out.append((text[spans[first][0] : spans[j - 1][1]], frozenset(found)))
            first, found = -1, set()
            continue
        first = j if first < 0 else first
        found.update(stems.get(j, ()))
    return out


def merge(parts: Sequence[Features]) -> Features:
    """The union of several sentences' features (a window, a passage, all cited passages)."""
    return Features(
        text=" ".join(p.text for p in parts),
        n_tokens=sum(p.n_tokens for p in parts),
        stems=frozenset().union(*(p.stems for p in parts)),
        vocab=frozenset().union(*(p.vocab for p in parts)),
        numbers=tuple(n for p in parts for n in p.numbers),
        dates=tuple(d for p in parts for d in p.dates),
        names=tuple(n for p in parts for n in p.names),
        idents=tuple(n for p in parts for n in p.idents),
        rates=frozenset().union(*(p.rates for p in parts)),
        neg_scopes=tuple(s for p in parts for s in p.neg_scopes),
        soft_negation=tuple(w for p in parts for w in p.soft_negation),
        affirmed=frozenset().union(*(p.affirmed for p in parts)),
        contrast_scopes=tuple(s for p in parts for s in p.contrast_scopes),
        clauses=tuple(c for p in parts for c in p.clauses),
        directions=frozenset().union(*(p.directions for p in parts)),
        instruction=any(p.instruction for p in parts),
    )


def coverage(claim: Features, evidence: Features) -> float:
    """Share of the claim's content stems that occur in the evidence (1.0 when it has none)."""
    return len(claim.stems & evidence.stems) / len(claim.stems) if claim.stems else 1.0
