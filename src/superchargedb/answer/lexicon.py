"""Word lists and patterns behind the claim features (``claims.py``): tokens, stopwords,
number words, units, months and dates, negation cues, clause boundaries, direction pairs.

Plain data, no logic: adding a unit or a direction pair is a one-line change here.
"""

from __future__ import annotations

import re

MARKER = re.compile(r"\s*\[\d+(?:\s*[,;]\s*\d+)*\]")
TOKEN = re.compile(r"[$€£%°~]|\w(?:[\w'’]|[.,:/\-](?=\w))*|[,;:()!?.—–]")
NUMERIC = re.compile(r"^(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?(?:-?([A-Za-zµ%°]+))?$")
RANGE = re.compile(r"^\d+(?:\.\d+)?(?:[-–]\d+(?:\.\d+)?)+$")
INSTRUCTION = re.compile(
    r"\b(?:ignore|disregard|forget|override)\b(?:\W+\w+){0,4}?\W+"
    r"(?:instructions?|prompts?|context|rules|guidelines|directions)\b"
    r"|\bsystem prompt\b|\byou are now\b|\bnew instructions\b|\bas an ai\b",
    re.IGNORECASE,
)


def seq(s: str) -> list[str]:
    return s.split()


def words(s: str) -> frozenset[str]:
    return frozenset(s.split())


STOP = words(
    """a about above after again against all also am an and any are as at be been before being
    below between both but by can could did do does doing during each few for from further had has
    have having he her here hers him his how i if in into is it its itself just me more most my no
    nor not now of off on once only or other our ours out over own same she should so some such
    than that the their theirs them then there these they this those through to too under until
    very was we were what when where which while who whom why will with would you your may might
    must shall cannot per via according whereas although though however yet thus therefore hence
    among within without upon onto"""
)
ONES = {
    w: i
    for i, w in enumerate(
        seq(
            "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
            "fifteen sixteen seventeen eighteen nineteen"
        )
    )
}
TENS = {
    w: 10 * (i + 2)
    for i, w in enumerate(seq("twenty thirty forty fifty sixty seventy eighty ninety"))
}
MULT = {"thousand": 1e3, "million": 1e6, "billion": 1e9, "trillion": 1e12, "bn": 1e9}
MULT_ATTACHED = {"k": 1e3, "K": 1e3, "M": 1e6, "B": 1e9, "bn": 1e9}
APPROX = words("about around approximately roughly nearly almost circa approx ~")
CURRENCY = {"$": "usd", "€": "eur", "£": "gbp"}
UNIT_GROUPS: list[tuple[str, float, str]] = [
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
UNITS = {w: (dim, f) for dim, f, words in UNIT_GROUPS for w in words.split()}
CANONICAL = {(dim, f): words.split()[-1] for dim, f, words in reversed(UNIT_GROUPS)}
RATE_ADVERBS = {
    "hourly": "hour",
    "daily": "day",
    "weekly": "week",
    "monthly": "month",
    "yearly": "year",
}
MONTH_NAMES = [
    "",
    *seq("january february march april may june july august september october november december"),
]
MONTHS = {name: i for i, name in enumerate(MONTH_NAMES) if name} | {
    name[:3]: i for i, name in enumerate(MONTH_NAMES) if name
}
MONTHS["sept"] = 9
MONTH_RE = (
    r"(Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?"
    r"|Sep(?:t(?:ember)?)?|Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?)\.?"
)
DATES: list[tuple[re.Pattern[str], tuple[int, int, int]]] = [  # groups of (year, month, day)
    (re.compile(r"\b(\d{4})-(\d{2})-(\d{2})"), (1, 2, 3)),
    (re.compile(MONTH_RE + r"\s+(\d{1,2})(?:st|nd|rd|th)?\b(?:,?\s+(\d{4})\b)?"), (3, 1, 2)),
    (
        re.compile(r"\b(\d{1,2})(?:st|nd|rd|th)?\s+" + MONTH_RE + r"(?:,?\s+(\d{4})\b)?"),
        (3, 2, 1),
    ),
    (re.compile(MONTH_RE + r",?\s+(\d{4})\b"), (2, 1, 0)),
]
NEG_WORDS = words(
    "not no never none nobody nothing nowhere neither nor cannot without unable unlikely lack "
    "lacks lacked lacking absent absence exempt zero 0"
)
BOUNDARY = frozenset(",;:()!?.—–") | words("but whereas while although though yet")
CLAUSE_WORDS = words("and so because which who whereas while although though yet but")
CONTRAST = words("rather instead opposed unlike")
NOT_UN = ("under", "uni", "unt", "unle", "unde", "unv", "unp", "unl")  # unit, until, unveil...
NEG_PREFIXES = ("non-", "non", "un", "in", "im", "dis", "ir", "il")
DIRECTIONS: list[tuple[str, frozenset[str], frozenset[str]]] = [
    (
        "up/down",
        words(
            "increase increases increased increasing rise rises rose risen rising grew grow "
            "grows growing higher highest raise raised raises gain gains gained up climb climbs "
            "climbed boost boosted greater larger bigger double doubles doubled doubling "
            "triple triples tripled"
        ),
        words(
            "decrease decreases decreased decreasing fell fall falls falling fallen drop drops "
            "declined decline declines declining lower lowered lowers lowest reduce reduced "
            "reduces reducing reduction cut cuts down fewer shrank shrink smaller halve halves "
            "halved halving"
        ),
    ),
    ("before/after", words("before earlier"), words("after later")),
    (
        "above/below",
        words("above over exceed exceeds exceeded exceeding more longer"),
        words("below under beneath less shorter"),
    ),
    ("north/south", words("north northern"), words("south southern")),
    ("east/west", words("east eastern"), words("west western")),
    (
        "add/remove",
        words(
            "add adds added adding keep keeps kept retain retains retained still supports "
            "supported include includes included"
        ),
        words(
            "remove removes removed removing delete deletes deleted eliminate eliminates "
            "eliminated drop dropped deprecate deprecated discontinued abolished"
        ),
    ),
    ("enable/disable", words("enable enables enabled"), words("disable disables disabled")),
    ("male/female", words("male men man"), words("female women woman")),
    ("max/min", words("maximum max"), words("minimum min")),
    (
        "success/failure",
        words("succeeded successful success successfully"),
        words("failed failure unsuccessful"),
    ),
    ("fast/slow", words("faster quicker"), words("slower")),
]
SUFFIXES = ("ations", "ation", "ments", "ment", "ings", "ing", "ies", "ied", "ed", "ly", "s")
