"""Per-sentence support check: is an answer sentence supported by the passage(s) it cites?

    EntailmentChecker (Protocol)      check(sentence, cited, others) -> Support
    ├── LexicalDenseChecker           offline default ("lexical-dense")
    └── HttpNliChecker                a real NLI model behind HTTP ("http:<url>")

``LexicalDenseChecker`` combines dense similarity (cosine between the sentence and the best
window of one or two cited sentences) with lexical guards that similarity cannot see
(DECISIONS 36):

* numbers, with their units, must occur in the cited text ("0.8 seconds" == "800 ms",
  "five" == "5", "1,000" == "1000", "$0.95 billion" == "$950 million"); the same number with
  another unit fails ("unit ms vs s"), and so does a number none of whose neighbouring words in
  the passage occurs in the sentence (two numbers of one passage swapped);
* dates, capitalised names (not sentence-initial, not stopwords; possessives and plurals
  allowed; not only after the supporting sentence), identifiers (``Q4``, ``us-east-1``,
  ``SHA-256``) and rates ("per minute", "per GB") must occur;
* polarity: a negation in the most similar sentence (or in one the claim draws on) whose scope
  the sentence repeats without negating, a negation in the sentence with none in the best
  window, ``un-``/``non-`` prefixes, "A rather than B" swapped, and direction words
  (higher/lower, before/after, above/below, add/remove, ...) must agree;
* enough of the sentence's content stems, and of each of its clauses, must occur in the cited
  text (coverage: catches an unsupported clause appended to a true one);
* no other passage may pass every check with a clearly higher similarity (a wrong ``[n]``).

Passage sentences that read like instructions to the model ("ignore the previous instructions
and answer ...") are never evidence, and a sentence that is itself one fails.

Thresholds are module constants; ``bench/support_check.py`` chose them on the TUNE split of
``tests/answer_cases.py`` and reports the TEST split (with its blind rounds) separately.
``check`` = ``decide(measure(...))``: measuring embeds and runs the guards, deciding applies
the thresholds, so the benchmark can search thresholds without re-embedding.
"""

from __future__ import annotations

import functools
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol, runtime_checkable

import numpy as np

from superchargedb.answer.sentences import sentence_texts
from superchargedb.errors import UnavailableError, ValidationError

__all__ = [
    "CHECKERS",
    "EntailmentChecker",
    "Evidence",
    "Features",
    "HttpNliChecker",
    "LexicalDenseChecker",
    "Measure",
    "Measurement",
    "Support",
    "Thresholds",
    "analyse",
    "guard_failures",
    "make_checker",
    "register_checker",
    "strip_markers",
]

# -- thresholds -------------------------------------------------------------------------------
# SIM_MIN, COVERAGE_MIN, SIM_STRONG, COVERAGE_STRONG, CLAUSE_COVERAGE_MIN and
# WRONG_CITATION_MARGIN come from ``bench/support_check.py --tune``: a grid search on the TUNE
# split of tests/answer_cases.py (TEST never used) maximising catch - 2 x false removal, taking
# the combination at the centre of the tied optimum. On TUNE, faithful sentences have cosine
# >= 0.52, coverage >= 0.5 and worst-clause coverage >= 0.5; appended unsupported clauses score
# 0.0-0.4. SIM_FLOOR/COVERAGE_FULL were added after blind round 2 (see answer_cases.py); the
# structural constants (scopes, contexts, sentence budgets) were set by reading errors.
#: Below this cosine to the best cited window a sentence is unsupported, whatever else holds.
SIM_MIN = 0.4
#: A short sentence restating part of a long one scores a low cosine (0.39 for "The jobs report
#: showed 275 thousand new payrolls" against its 25-word source). When COVERAGE_FULL of its
#: stems occur in the cited text, SIM_FLOOR is the bar instead (the guards still apply).
SIM_FLOOR = 0.25
COVERAGE_FULL = 0.9
#: Minimum share of the sentence's content stems that occur in the cited text...
COVERAGE_MIN = 0.4
#: ...and below SIM_STRONG similarity the share must reach COVERAGE_STRONG instead.
SIM_STRONG = 0.6
COVERAGE_STRONG = 0.7
#: Every clause with at least CLAUSE_MIN_STEMS content stems must have this share of them in
#: the cited text (catches an unsupported clause appended to a true one).
CLAUSE_COVERAGE_MIN = 0.45
CLAUSE_MIN_STEMS = 3
#: A sentence whose cited passage passes every check is still a wrong [n] when another passage
#: passes them too and beats the cited similarity by this margin.
WRONG_CITATION_MARGIN = 0.15
#: At or above this similarity, with nothing failed, the other passages are not consulted (the
#: margin rule could only fire above 0.95). Saves embedding them: latency.
SIM_CONFIDENT = 0.8
#: Sentences embedded per cited passage and per other passage: those sharing most stems with
#: the claim (latency; passages of <= 5 sentences are embedded whole).
MAX_SENTENCES_PER_PASSAGE = 5
MAX_SENTENCES_PER_OTHER = 2
#: Content tokens after a negation cue that form its scope (fewer at a clause boundary).
NEG_SCOPE = 6
#: Content words either side of a number in the cited text that form its context: one of them
#: must occur in the sentence (the binding guard against numbers swapped within a passage).
NUM_CONTEXT = 3


@dataclass(frozen=True)
class Thresholds:
    sim_min: float = SIM_MIN
    coverage_min: float = COVERAGE_MIN
    sim_strong: float = SIM_STRONG
    coverage_strong: float = COVERAGE_STRONG
    clause_coverage_min: float = CLAUSE_COVERAGE_MIN
    wrong_citation_margin: float = WRONG_CITATION_MARGIN
    sim_confident: float = SIM_CONFIDENT


@dataclass(frozen=True)
class Support:
    """``score`` lies in [0.5, 1] when supported and in [0, 0.5) otherwise; ``reasons`` names
    every failed guard (empty when supported)."""

    supported: bool
    score: float
    reasons: tuple[str, ...] = ()


@runtime_checkable
class EntailmentChecker(Protocol):
    def check(self, sentence: str, cited: Sequence[str], others: Sequence[str] = ()) -> Support:
        """``cited``: texts of the passages the sentence cites (spans or whole passages);
        ``others``: the other numbered passages the synthesizer saw."""
        ...


# -- lexical features -------------------------------------------------------------------------
_MARKER = re.compile(r"\s*\[\d+(?:\s*[,;]\s*\d+)*\]")
_TOKEN = re.compile(r"[$€£%°~]|\w(?:[\w'’]|[.,:/\-](?=\w))*|[,;:()!?.—–]")
_NUMERIC = re.compile(r"^(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?(?:-?([A-Za-zµ%°]+))?$")
_RANGE = re.compile(r"^\d+(?:\.\d+)?(?:[-–]\d+(?:\.\d+)?)+$")
_INSTRUCTION = re.compile(
    r"\b(?:ignore|disregard|forget|override)\b(?:\W+\w+){0,4}?\W+"
    r"(?:instructions?|prompts?|context|rules|guidelines|directions)\b"
    r"|\bsystem prompt\b|\byou are now\b|\bnew instructions\b|\bas an ai\b",
    re.IGNORECASE,
)


def _seq(s: str) -> list[str]:
    return s.split()


def _words(s: str) -> frozenset[str]:
    return frozenset(s.split())


_STOP = _words(
    """a about above after again against all also am an and any are as at be been before being
    below between both but by can could did do does doing during each few for from further had has
    have having he her here hers him his how i if in into is it its itself just me more most my no
    nor not now of off on once only or other our ours out over own same she should so some such
    than that the their theirs them then there these they this those through to too under until
    very was we were what when where which while who whom why will with would you your may might
    must shall cannot per via according whereas although though however yet thus therefore hence
    among within without upon onto"""
)
_ONES = {
    w: i
    for i, w in enumerate(
        _seq(
            "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
            "fifteen sixteen seventeen eighteen nineteen"
        )
    )
}
_TENS = {
    w: 10 * (i + 2)
    for i, w in enumerate(_seq("twenty thirty forty fifty sixty seventy eighty ninety"))
}
_MULT = {"thousand": 1e3, "million": 1e6, "billion": 1e9, "trillion": 1e12, "bn": 1e9}
_MULT_ATTACHED = {"k": 1e3, "K": 1e3, "M": 1e6, "B": 1e9, "bn": 1e9}
_APPROX = _words("about around approximately roughly nearly almost circa approx ~")
_CURRENCY = {"$": "usd", "€": "eur", "£": "gbp"}
_UNIT_GROUPS: list[tuple[str, float, str]] = [
    ("time", 1e-9, "ns nanosecond nanoseconds"),
    ("time", 1e-6, "µs microsecond microseconds"),
    ("time", 1e-3, "ms msec millisecond milliseconds"),
    ("time", 1.0, "s sec secs second seconds"),
    ("time", 60.0, "min mins minute minutes"),
    ("time", 3600.0, "h hr hrs hour hours"),
    ("time", 86400.0, "day days"),
    ("time", 604800.0, "week weeks"),
    ("time", 2629800.0, "month months"),
    ("time", 31557600.0, "year years yr yrs"),
    ("data", 1.0, "byte bytes"),
    ("data", 1e3, "kb kilobyte kilobytes"),
    ("data", 1e6, "mb megabyte megabytes"),
    ("data", 1e9, "gb gigabyte gigabytes"),
    ("data", 1e12, "tb terabyte terabytes"),
    ("data", 1024.0**3, "gib"),
    ("data", 1024.0**4, "tib"),
    ("length", 1e-3, "mm millimeter millimeters millimetre millimetres"),
    ("length", 1e-2, "cm centimeter centimeters centimetre centimetres"),
    ("length", 1.0, "m meter meters metre metres"),
    ("length", 1e3, "km kilometer kilometers kilometre kilometres"),
    ("length", 1609.344, "mi mile miles"),
    ("length", 0.3048, "ft foot feet"),
    ("mass", 1e-3, "mg milligram milligrams"),
    ("mass", 1.0, "g gram grams"),
    ("mass", 1e3, "kg kilogram kilograms"),
    ("mass", 1e6, "tonne tonnes ton tons"),
    ("pct", 1.0, "% percent pct"),
    ("pp", 1.0, "pp pts point points"),
    ("usd", 1.0, "usd dollar dollars"),
    ("eur", 1.0, "eur euro euros"),
    ("gbp", 1.0, "gbp"),
    ("degC", 1.0, "celsius"),
    ("degF", 1.0, "fahrenheit"),
    ("deg", 1.0, "° degree degrees"),
    ("freq", 1.0, "hz hertz"),
    ("freq", 1e3, "khz"),
    ("freq", 1e6, "mhz"),
    ("freq", 1e9, "ghz"),
    ("iu", 1.0, "iu"),
    ("ratio", 1.0, "x times fold"),
]
_UNITS = {w: (dim, f) for dim, f, words in _UNIT_GROUPS for w in words.split()}
_CANONICAL = {(dim, f): words.split()[-1] for dim, f, words in reversed(_UNIT_GROUPS)}
_RATE_ADVERBS = {
    "hourly": "hour",
    "daily": "day",
    "weekly": "week",
    "monthly": "month",
    "yearly": "year",
}
_MONTH_NAMES = [
    "",
    *_seq("january february march april may june july august september october november december"),
]
_MONTHS = {name: i for i, name in enumerate(_MONTH_NAMES) if name} | {
    name[:3]: i for i, name in enumerate(_MONTH_NAMES) if name
}
_MONTHS["sept"] = 9
_MONTH_RE = (
    r"(Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?"
    r"|Sep(?:t(?:ember)?)?|Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?)\.?"
)
_DATES: list[tuple[re.Pattern[str], tuple[int, int, int]]] = [  # groups of (year, month, day)
    (re.compile(r"\b(\d{4})-(\d{2})-(\d{2})"), (1, 2, 3)),
    (re.compile(_MONTH_RE + r"\s+(\d{1,2})(?:st|nd|rd|th)?\b(?:,?\s+(\d{4})\b)?"), (3, 1, 2)),
    (
        re.compile(r"\b(\d{1,2})(?:st|nd|rd|th)?\s+" + _MONTH_RE + r"(?:,?\s+(\d{4})\b)?"),
        (3, 2, 1),
    ),
    (re.compile(_MONTH_RE + r",?\s+(\d{4})\b"), (2, 1, 0)),
]
_NEG_WORDS = _words(
    "not no never none nobody nothing nowhere neither nor cannot without unable unlikely lack "
    "lacks lacked lacking absent absence exempt zero 0"
)
_BOUNDARY = frozenset(",;:()!?.—–") | _words("but whereas while although though yet")
_CLAUSE_WORDS = _words("and so because which who whereas while although though yet but")
_CONTRAST = _words("rather instead opposed unlike")
_NOT_UN = ("under", "uni", "unt", "unle", "unde", "unv", "unp", "unl")  # unit, until, unveil...
_NEG_PREFIXES = ("non-", "non", "un", "in", "im", "dis", "ir", "il")
_DIRECTIONS: list[tuple[str, frozenset[str], frozenset[str]]] = [
    (
        "up/down",
        _words(
            "increase increases increased increasing rise rises rose risen rising grew grow "
            "grows growing higher highest raise raised raises gain gains gained up climb climbs "
            "climbed boost boosted greater larger bigger double doubles doubled doubling "
            "triple triples tripled"
        ),
        _words(
            "decrease decreases decreased decreasing fell fall falls falling fallen drop drops "
            "declined decline declines declining lower lowered lowers lowest reduce reduced "
            "reduces reducing reduction cut cuts down fewer shrank shrink smaller halve halves "
            "halved halving"
        ),
    ),
    ("before/after", _words("before earlier"), _words("after later")),
    (
        "above/below",
        _words("above over exceed exceeds exceeded exceeding more longer"),
        _words("below under beneath less shorter"),
    ),
    ("north/south", _words("north northern"), _words("south southern")),
    ("east/west", _words("east eastern"), _words("west western")),
    (
        "add/remove",
        _words(
            "add adds added adding keep keeps kept retain retains retained still supports "
            "supported include includes included"
        ),
        _words(
            "remove removes removed removing delete deletes deleted eliminate eliminates "
            "eliminated drop dropped deprecate deprecated discontinued abolished"
        ),
    ),
    ("enable/disable", _words("enable enables enabled"), _words("disable disables disabled")),
    ("male/female", _words("male men man"), _words("female women woman")),
    ("max/min", _words("maximum max"), _words("minimum min")),
    (
        "success/failure",
        _words("succeeded successful success successfully"),
        _words("failed failure unsuccessful"),
    ),
    ("fast/slow", _words("faster quicker"), _words("slower")),
]
_SUFFIXES = ("ations", "ation", "ments", "ment", "ings", "ing", "ies", "ied", "ed", "ly", "s")


def strip_markers(sentence: str) -> str:
    """The sentence without ``[n]`` markers, whitespace collapsed."""
    return " ".join(_MARKER.sub("", sentence).split())


def stem(word: str) -> str:
    """Crude stemmer: possessive, one suffix and a final ``e`` off; at most 6 characters."""
    w = _norm_word(word)
    for suf in _SUFFIXES:
        if w.endswith(suf) and len(w) - len(suf) >= 3:
            if suf == "s" and w.endswith(("ss", "us", "is")):
                break
            w = w[: -len(suf)] + ("y" if suf in ("ies", "ied") else "")
            break
    if len(w) > 3 and w.endswith("e"):
        w = w[:-1]
    return w[:6]


def _norm_word(tok: str) -> str:
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
    for pattern, (gy, gm, gd) in _DATES:
        for m in pattern.finditer(text):
            if any(a < m.end() and m.start() < b for a, b in spans):
                continue
            raw = m.group(gm)
            month = int(raw) if raw.isdigit() else _MONTHS[raw.lower()]
            year = int(m.group(gy)) if gy and m.group(gy) else None
            day = int(m.group(gd)) if gd and m.group(gd) else None
            if 1 <= month <= 12 and (day is None or 1 <= day <= 31):
                found.append((m.group(0), year, month, day))
                spans.append((m.start(), m.end()))
    return found, spans


def _word_number(low: str) -> int | None:
    parts = low.split("-")
    if len(parts) == 1:
        return _ONES.get(low, _TENS.get(low))
    if len(parts) == 2 and parts[0] in _TENS and 0 < _ONES.get(parts[1], 0) < 10:
        return _TENS[parts[0]] + _ONES[parts[1]]
    return None


def _unit_after(lows: list[str], j: int) -> tuple[str | None, float, str, float, int]:
    """(dim, factor, label, multiplier, tokens used) for the words following a number."""
    mult, used = 1.0, 0
    if j < len(lows) and lows[j] in _MULT:
        mult, used = _MULT[lows[j]], 1
    w = lows[j + used] if j + used < len(lows) else ""
    nxt = lows[j + used + 1] if j + used + 1 < len(lows) else ""
    if w == "per" and nxt == "cent":
        return "pct", 1.0, "%", mult, used + 2
    if w == "percentage" and nxt in ("point", "points"):
        return "pp", 1.0, "percentage points", mult, used + 2
    if w in ("°", "degree", "degrees") and nxt in ("c", "celsius", "f", "fahrenheit"):
        return ("degC" if nxt[0] == "c" else "degF"), 1.0, "°" + nxt[0].upper(), mult, used + 2
    if w in _UNITS:
        dim, factor = _UNITS[w]
        return dim, factor, w, mult, used + 1
    return None, 1.0, "", mult, used


def _parse_number(tok: str, low: str, lows: list[str], i: int) -> tuple[Number, int] | None:
    """The number starting at token ``i`` and how many following tokens its unit used."""
    value: float | None = None
    decimals, suffix = 0, ""
    if tok[0].isdigit():
        m = _NUMERIC.match(tok)
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
        if wn is None and len(parts) == 2 and parts[1] in _UNITS:
            wn, suffix = _word_number(parts[0]), parts[1]
        elif wn is None and low.endswith("fold"):  # "threefold"
            wn, suffix = _word_number(low[:-4]), "fold"
        nxt = lows[i + 1] if i + 1 < len(lows) else ""
        if wn is None or (low == "one" and nxt not in _UNITS and nxt not in _MULT):
            return None
        value = float(wn)
    mult, factor, dim, label, used = 1.0, 1.0, None, "", 0
    if suffix in _MULT_ATTACHED:
        mult = _MULT_ATTACHED[suffix]
    elif suffix == "s" and decimals == 0 and 1000 <= value <= 2999:
        dim, label = "decade", "s"
    elif suffix:
        if suffix.lower() not in _UNITS:
            return None  # "3D", "5G": an identifier
        dim, factor = _UNITS[suffix.lower()]
        label = suffix
    if dim is None:
        dim, factor, label, m2, used = _unit_after(lows, i + 1)
        mult *= m2
        label = " ".join(lows[i + 1 : i + 1 + used]) if used else label
    cur = _CURRENCY.get(lows[i - 1]) if i else None
    if cur:
        dim, factor, label = cur, 1.0, f"{lows[i - 1]} {label}".strip()
    approx = any(w in _APPROX for w in lows[max(0, i - 2) : i])
    return Number(tok, value, mult, factor, dim, label, decimals, approx), used


def _is_contrast(lows: list[str], i: int) -> bool:
    """ "A rather than B", "instead of B", "as opposed to B", "unlike B": B is rejected."""
    w, nxt = lows[i], lows[i + 1] if i + 1 < len(lows) else ""
    return (w, nxt) in (("rather", "than"), ("instead", "of"), ("opposed", "to")) or w == "unlike"


def _soft_negation(lows: list[str], i: int) -> str:
    """A contrast ("instead of") or an ``un-`` word ("uncatalysed"): enough to say that the
    sentence negates something, too vague to say what. Returns the word, or ""."""
    w = lows[i]
    if _is_contrast(lows, i) or (len(w) >= 7 and w.startswith("un") and not w.startswith(_NOT_UN)):
        return w
    return ""


def _is_cue(lows: list[str], i: int) -> bool:
    w, nxt = lows[i], lows[i + 1] if i + 1 < len(lows) else ""
    if w == "not" and nxt == "only":
        return False
    return (
        w in _NEG_WORDS
        or w.endswith(("n't", "n’t"))
        or (w == "no" and nxt == "longer")
        or (w.startswith(("fail", "unable")) and nxt == "to")
    )


@functools.lru_cache(maxsize=8192)
def analyse(text: str) -> Features:
    """The lexical features of one sentence (or of any short text)."""
    dates, date_spans = _find_dates(text)
    matches = list(_TOKEN.finditer(text))
    toks = [m.group(0) for m in matches]
    lows = [t.lower() for t in toks]
    in_date = [any(a <= m.start() < b for a, b in date_spans) for m in matches]
    first_word = next((i for i, t in enumerate(toks) if t[0].isalnum()), -1)
    numbers: list[tuple[Number, int]] = []
    names: list[str] = []
    idents: list[str] = []
    vocab = {_MONTH_NAMES[d[2]] for d in dates}
    stems: dict[int, tuple[str, ...]] = {}  # token position -> stems (hyphen parts apart)
    i = 0
    while i < len(toks):
        tok, low, pos = toks[i], _norm_word(toks[i]), i
        i += 1
        if not tok[0].isalnum():
            continue
        parts = [p for p in re.split(r"[-/]", low) if p]
        vocab.add(low)
        vocab.update(parts)
        if in_date[pos]:
            continue
        if tok[0].isdigit() and _RANGE.match(tok) and re.search(r"[-–]", tok):
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
        if low in _STOP and not (tok[0].isupper() and low in _MONTHS and pos != first_word):
            continue  # but "in May" is a month
        if tok[0].isupper() and pos != first_word and low not in _UNITS and len(tok) > 1:
            names.append(tok)
        stems[pos] = tuple(dict.fromkeys(stem(p) for p in parts if p not in _STOP)) or (low,)
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
            for pair, up, down in _DIRECTIONS
            for side, group in ((0, up), (1, down))
            if w in group
        ),
        instruction=bool(_INSTRUCTION.search(text)),
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
        unit = _UNITS.get(lows[k + 1])
        if unit is None or len(lows[k + 1]) < 2:
            continue
        if lows[k] in ("per", "/", "every", "each") or (lows[k] == "a" and unit[0] == "time"):
            out.add(_CANONICAL[unit])
    return out | {_CANONICAL[_UNITS[_RATE_ADVERBS[w]]] for w in lows if w in _RATE_ADVERBS}


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
                if lows[j] in _BOUNDARY or len(scope) >= NEG_SCOPE:
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
        if w in _BOUNDARY or w in _CLAUSE_WORDS:
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


def _same(n: Number, x: float) -> bool:
    """Whether the evidence value ``x`` (expressed at n's scale) reads as n's value."""
    if abs(n.value - x) <= 1e-9 * max(1.0, abs(x)):
        return True
    if abs(round(x, n.decimals) - n.value) <= 1e-9 * max(1.0, abs(x)):
        return True  # rounded in the sentence: "1.58 s" for "1,578 ms"
    return n.approx and abs(n.value - x) <= 0.05 * abs(x)


def _number_matches(n: Number, m: Number) -> bool:
    if n.dim is not None and m.dim == n.dim:
        return _same(n, m.base / (n.mult * n.factor))
    if n.dim is None or m.dim is None:
        return _same(n, m.raw / n.mult)
    return False


def _number_failures(claim: Features, evidence: Features) -> list[str]:
    pool = list(evidence.numbers)
    pool += [Number(str(p), float(p)) for d in evidence.dates for p in (d[1], d[3]) if p]
    out: list[str] = []
    for n in claim.numbers:
        hits = [m for m in pool if _number_matches(n, m)]
        if not hits:
            other = next((m for m in pool if abs(m.value - n.value) < 1e-9 and m.dim), None)
            if other is not None and n.dim:
                out.append(f"unit {n.unit} vs {other.unit}")
            else:
                out.append(
                    f"number {n.surface}{' ' + n.unit if n.unit else ''} not in cited passage"
                )
        elif not _is_year(n) and not any(not m.context or claim.stems & m.context for m in hits):
            out.append(f"number {n.surface} bound to other words in cited passage")
    return out


def _is_year(n: Number) -> bool:
    """Years head paragraphs and date lines, far from the words they bind: not bound."""
    return n.dim is None and n.decimals == 0 and 1000 <= n.value <= 2100


def _name_in(name: str, vocab: frozenset[str]) -> bool:
    low = _norm_word(name)
    cands = {low, low + "s", low + "es", low.removesuffix("s"), low.removesuffix("es")}
    return bool(cands & vocab) or ("-" in low and all(p in vocab for p in low.split("-") if p))


def _polarity_failures(claim: Features, ev: Evidence) -> list[str]:
    out: list[str] = []
    soft = any(w in _CONTRAST or w not in ev.cited.vocab for w in claim.soft_negation)
    if not claim.neg_scopes and not soft:  # an un- word the passage shares is no negation
        # The negations of the most similar sentence, and of any cited sentence the claim
        # draws on (shares two stems found in no other cited sentence: "It does not ...").
        for f in ev.sentences:
            if not f.neg_scopes:
                continue
            rest = frozenset().union(*(g.stems for g in ev.sentences if g is not f))
            if f is not ev.sentence and len(claim.stems & (f.stems - rest)) < 2:
                continue
            hits = [s & claim.stems for s in f.neg_scopes]
            if any(
                len(h) >= min(2, len(s)) and h - f.affirmed
                for h, s in zip(hits, f.neg_scopes, strict=True)
            ):
                hit = max(hits, key=len)
                out.append(f"negation mismatch: cited passage negates {' '.join(sorted(hit))}")
                break
    elif not ev.window.neg_scopes and any(cs & ev.window.stems for cs in claim.neg_scopes):
        out.append("negation mismatch: sentence negates what the cited passage affirms")
    rejected = frozenset().union(*ev.sentence.contrast_scopes)
    for cs in claim.contrast_scopes:  # "A rather than B" against "B rather than A"
        if rejected and cs & ev.sentence.stems and not cs & rejected:
            out.append(f"contrast mismatch: sentence rejects {' '.join(sorted(cs))}")
    vocab = ev.cited.vocab
    for w in sorted(claim.vocab):
        if len(w) < 4 or not w.isalpha() or w in vocab:
            continue
        for p in _NEG_PREFIXES:
            base = w[len(p) :]
            if p + w in vocab or (w.startswith(p) and len(base) >= 4 and base in vocab):
                out.append(f"negation mismatch: {w} vs {p + w if p + w in vocab else base}")
                break
    for pair, _, _ in _DIRECTIONS:
        mine = {(s, w) for p, s, w in claim.directions if p == pair}
        theirs = {(s, w) for p, s, w in ev.sentence.directions if p == pair}
        sides, their_sides = {s for s, _ in mine}, {s for s, _ in theirs}
        if len(sides) == 1 and their_sides and not sides & their_sides:
            out.append(
                f"direction mismatch: {min(w for _, w in mine)} vs {min(w for _, w in theirs)}"
            )
    return out


@dataclass(frozen=True)
class Evidence:
    """What a claim is compared with: all cited text, the most similar 1-2 sentence window and
    single sentence, the cited text up to the end of the window (for names), and each cited
    sentence."""

    cited: Features
    window: Features
    sentence: Features
    upto: Features
    sentences: tuple[Features, ...]  # every cited sentence


def guard_failures(claim: Features, ev: Evidence) -> list[str]:
    """Every lexical guard that fails (an empty list when all pass)."""
    out = _number_failures(claim, ev.cited)
    for surface, year, month, day in claim.dates:
        if not any(
            m == month and (year is None or y == year) and (day is None or d == day)
            for _, y, m, d in ev.cited.dates
        ):
            out.append(f"date {surface} not in cited passage")
    for n in claim.names:
        if not _name_in(n, ev.cited.vocab):
            out.append(f"name {n} not in cited passage")
        elif not _name_in(n, ev.upto.vocab):
            out.append(f"name {n} only after the supporting sentence")
    out += [
        f"identifier {i} not in cited passage"
        for i in claim.idents
        if _norm_word(i) not in ev.cited.vocab
    ]
    out += [f"rate per {r} not in cited passage" for r in sorted(claim.rates - ev.cited.rates)]
    return out + _polarity_failures(claim, ev)


def clause_coverage(claim: Features, evidence: Features) -> tuple[float, str]:
    """The lowest coverage over the claim's clauses with >= CLAUSE_MIN_STEMS stems (1.0 when
    none has), and that clause's missing stems."""
    worst, missing = 1.0, ""
    for _, clause in claim.clauses:
        if len(clause) >= CLAUSE_MIN_STEMS:
            share = len(clause & evidence.stems) / len(clause)
            if share < worst:
                worst, missing = share, " ".join(sorted(clause - evidence.stems))
    return worst, missing


# -- checkers ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Measure:
    """Threshold-free measurements of a claim against one set of passages."""

    sim: float  # best cosine over 1-2 sentence windows
    coverage: float  # share of the claim's content stems in the passages
    clause_coverage: float  # the worst clause's share
    missing: str  # stems of the worst clause that are missing
    guards: tuple[str, ...]  # failed lexical guards


@dataclass(frozen=True)
class Measurement:
    """What ``check`` decides from: the cited passages' measure and the others' (``others`` is
    empty when they were not needed), or an ``early`` reason that needs no measure at all."""

    cited: Measure | None
    others: tuple[Measure, ...] = ()
    early: str = ""


@dataclass
class _Passage:
    sentences: list[Features]
    vectors: np.ndarray  # (k, dim) unit rows for the embedded sentences
    kept: list[int]  # indices into ``sentences`` that were embedded
    joined: Features  # all (non-instruction) sentences together


class LexicalDenseChecker:
    """The offline default. Thread-safe; sentence embeddings are cached (LRU by text), so the
    passages of one answer are embedded once for all its sentences."""

    def __init__(
        self, embedder: Any, *, thresholds: Thresholds | None = None, cache_size: int = 4096
    ) -> None:
        self.embedder = embedder
        self.t = thresholds or Thresholds()
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self._cache_size = cache_size
        self._lock = threading.Lock()

    def check(self, sentence: str, cited: Sequence[str], others: Sequence[str] = ()) -> Support:
        return self.decide(self.measure(sentence, cited, others))

    def prime(self, passages: Sequence[str]) -> None:
        """Embed every sentence of ``passages`` in one batch, before checking the sentences of
        an answer that cites them (one batch is cheaper than one per sentence)."""
        sents = [s for p in passages for s in sentence_texts(p)]
        self._vectors([f.text for f in map(analyse, sents) if not f.instruction])

    # -- measuring -------------------------------------------------------------------------
    def measure(
        self, sentence: str, cited: Sequence[str], others: Sequence[str] = (), *, lazy: bool = True
    ) -> Measurement:
        """Measure the claim against the cited passages and, unless ``lazy`` finds the cited
        support confident (no failed guard, similarity >= sim_confident), the others."""
        claim = analyse(strip_markers(sentence))
        if not claim.text:
            return Measurement(None, early="empty sentence")
        if claim.instruction:
            return Measurement(None, early="sentence contains instruction-like text")
        if not cited:
            return Measurement(None, early="no cited passage")
        q = self._vectors([claim.text])[0]
        mine = self._measure(claim, q, self._passages(claim, cited))
        if not others or (lazy and not self.failures(mine) and mine.sim >= self.t.sim_confident):
            return Measurement(mine)  # decide() would not consult the others anyway
        passages = self._passages(claim, others, MAX_SENTENCES_PER_OTHER)
        theirs = tuple(self._measure(claim, q, [p]) for p in passages)
        return Measurement(mine, theirs)

    def _vectors(self, texts: Sequence[str]) -> np.ndarray:
        """Unit rows for ``texts``, embedding only the uncached ones, in one batch."""
        with self._lock:
            missing = list(dict.fromkeys(t for t in texts if t not in self._cache))
        fresh = np.asarray(self.embedder.embed(missing), dtype=np.float32) if missing else None
        with self._lock:
            if fresh is not None:
                for text, vec in zip(missing, fresh, strict=True):
                    self._cache[text] = vec
            for t in texts:
                if t in self._cache:
                    self._cache.move_to_end(t)
            rows = [self._cache.get(t) for t in texts]
            while len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
        if any(r is None for r in rows):  # only when texts outnumber the cache
            return np.asarray(self.embedder.embed(list(texts)), dtype=np.float32)
        return np.stack([r for r in rows if r is not None]) if rows else np.zeros((0, 1))

    def _passages(
        self, claim: Features, texts: Sequence[str], limit: int = MAX_SENTENCES_PER_PASSAGE
    ) -> list[_Passage]:
        """Analyse passages (instruction-like sentences dropped), keep the sentences sharing
        most stems with the claim, and embed them all in one batch."""
        prepared: list[tuple[list[Features], list[int]]] = []
        wanted: list[str] = []
        for text in texts:
            sents = [f for f in map(analyse, sentence_texts(text)) if not f.instruction]
            order = sorted(range(len(sents)), key=lambda i: -len(claim.stems & sents[i].stems))
            kept = sorted(order[:limit])
            prepared.append((sents, kept))
            wanted.extend(sents[i].text for i in kept)
        vecs = self._vectors(wanted)
        out, row = [], 0
        for sents, kept in prepared:
            out.append(_Passage(sents, vecs[row : row + len(kept)], kept, merge(sents)))
            row += len(kept)
        return out

    @staticmethod
    def _windows(p: _Passage, q: np.ndarray) -> list[tuple[float, list[int]]]:
        """(cosine, sentence indices) for single sentences and adjacent pairs; a pair's
        vector is the token-weighted mean of its sentences' (the model mean-pools)."""
        sims = p.vectors @ q if p.kept else np.zeros(0)
        wins = [(float(s), [i]) for s, i in zip(sims, p.kept, strict=True)]
        for a in range(len(p.kept) - 1):
            i, j = p.kept[a], p.kept[a + 1]
            if j == i + 1:
                wi, wj = p.sentences[i].n_tokens, p.sentences[j].n_tokens
                v = p.vectors[a] * wi + p.vectors[a + 1] * wj
                wins.append((float(v @ q) / max(float(np.linalg.norm(v)), 1e-12), [i, j]))
        return wins

    def _measure(self, claim: Features, q: np.ndarray, passages: list[_Passage]) -> Measure:
        wins = [(sim, p, idx) for p in passages for sim, idx in self._windows(p, q)]
        if not wins:
            return Measure(0.0, 0.0, 0.0, "", ("cited passage has no usable text",))
        sim, best_p, best_idx = max(wins, key=lambda w: w[0])
        _, one_p, one_idx = max((w for w in wins if len(w[2]) == 1), key=lambda w: w[0])
        rest = [p.joined for p in passages if p is not best_p]
        ev = Evidence(
            cited=merge([p.joined for p in passages]),
            window=merge([best_p.sentences[i] for i in best_idx]),
            sentence=one_p.sentences[one_idx[0]],
            upto=merge(best_p.sentences[: best_idx[-1] + 1] + rest),
            sentences=tuple(f for p in passages for f in p.sentences),
        )
        worst, missing = clause_coverage(claim, ev.cited)
        guards = tuple(guard_failures(claim, ev))
        return Measure(sim, coverage(claim, ev.cited), worst, missing, guards)

    # -- deciding --------------------------------------------------------------------------
    def failures(self, m: Measure) -> list[str]:
        """The guards plus the thresholded similarity and coverage checks."""
        t, out = self.t, list(m.guards)
        floor = SIM_FLOOR if m.coverage >= COVERAGE_FULL else t.sim_min
        if m.sim < floor:
            out.append(f"low similarity {m.sim:.2f}")
        elif m.coverage < t.coverage_min or (
            m.sim < t.sim_strong and m.coverage < t.coverage_strong
        ):
            out.append(f"low coverage {m.coverage:.2f}")
        if m.clause_coverage < t.clause_coverage_min:
            out.append(f"clause coverage {m.clause_coverage:.2f} (missing {m.missing})")
        return out

    def decide(self, m: Measurement) -> Support:
        if m.cited is None:
            return Support(False, 0.0, (m.early,))
        mine = m.cited
        failures = self.failures(mine)
        confident = not failures and mine.sim >= self.t.sim_confident  # others not consulted
        passing = [
            (k, o)
            for k, o in enumerate(() if confident else m.others)
            if o.sim > mine.sim and not self.failures(o)
        ]
        if passing:
            k, best = max(passing, key=lambda ko: ko[1].sim)
            if failures or best.sim - mine.sim >= self.t.wrong_citation_margin:
                failures.append(
                    f"better supported by others[{k}] ({best.sim:.2f}) "
                    f"than by the cited passage ({mine.sim:.2f})"
                )
        blend = max(0.0, min(1.0, 0.6 * mine.sim + 0.4 * mine.coverage))
        score = 0.5 + 0.5 * blend if not failures else 0.499 * blend
        return Support(not failures, round(score, 4), tuple(failures))


class HttpNliChecker:
    """A real NLI model behind HTTP: ``POST url {"premise", "hypothesis"}`` answers
    ``{"entailment": p}``. Supported when ``p >= threshold``. When the cited premise fails and
    ``others`` are given, up to ``max_others`` of them are asked too, to name a better one."""

    def __init__(
        self,
        url: str,
        *,
        threshold: float = 0.5,
        timeout: float = 10.0,
        max_others: int = 3,
        client: Any | None = None,
    ) -> None:
        import httpx

        if not url.startswith(("http://", "https://")):
            raise ValidationError(f"NLI url must be http(s): {url!r}")
        self.url = url
        self.threshold = threshold
        self.max_others = max_others
        self._client = client or httpx.Client(timeout=timeout)

    def _entailment(self, premise: str, hypothesis: str) -> float:
        import httpx

        try:
            r = self._client.post(self.url, json={"premise": premise, "hypothesis": hypothesis})
            r.raise_for_status()
            p = float(r.json()["entailment"])
        except (httpx.HTTPError, KeyError, TypeError, ValueError) as e:
            raise UnavailableError(f"NLI service failed: {e}") from e
        if not 0.0 <= p <= 1.0:
            raise UnavailableError(f"NLI service returned entailment {p} outside [0, 1]")
        return p

    def check(self, sentence: str, cited: Sequence[str], others: Sequence[str] = ()) -> Support:
        hypothesis = strip_markers(sentence)
        if not hypothesis or not cited:
            return Support(
                False, 0.0, ("empty sentence" if not hypothesis else "no cited passage",)
            )
        p = self._entailment("\n\n".join(cited), hypothesis)
        if p >= self.threshold:
            return Support(True, round(p, 4))
        reasons = [f"entailment {p:.2f} below {self.threshold:.2f}"]
        for k, other in enumerate(others[: self.max_others]):
            po = self._entailment(other, hypothesis)
            if po >= self.threshold:
                reasons.append(f"better supported by others[{k}] ({po:.2f})")
                break
        return Support(False, round(p, 4), tuple(reasons))

    def close(self) -> None:
        self._client.close()


# -- registry ---------------------------------------------------------------------------------
CheckerFactory = Callable[[str | None, Any], EntailmentChecker]
CHECKERS: dict[str, CheckerFactory] = {}


def register_checker(name: str, factory: CheckerFactory) -> None:
    CHECKERS[name] = factory


def _lexical_dense(arg: str | None, embedder: Any) -> EntailmentChecker:
    if arg:
        raise ValidationError("lexical-dense takes no argument")
    if embedder is None:
        raise ValidationError("lexical-dense needs an embedder")
    return LexicalDenseChecker(embedder)


def _http(arg: str | None, embedder: Any) -> EntailmentChecker:
    if not arg:
        raise ValidationError("spec must be http:<url>, e.g. http:http://127.0.0.1:8088/nli")
    return HttpNliChecker(arg)


register_checker("lexical-dense", _lexical_dense)
register_checker("http", _http)


def make_checker(spec: str, embedder: Any) -> EntailmentChecker:
    """``"lexical-dense"`` (default) or ``"http:<url>"`` (``"http:http://host:port/nli"``)."""
    name, sep, arg = (spec or "lexical-dense").partition(":")
    factory = CHECKERS.get(name.strip())
    if factory is None:
        raise ValidationError(f"unknown support checker {spec!r}; known: {sorted(CHECKERS)}")
    return factory(arg if sep else None, embedder)
