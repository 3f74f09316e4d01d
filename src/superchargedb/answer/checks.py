"""Does a sentence answer the question, not only match its topic? (D-161)

A sentence (with the sentences it chains to) answers when it states the asked type (a name for
who/where/which company, a date for when, a number for how many; one of the two options for a
choice) and the asked focus ("tackle leader", "second largest oil producer"): enough of the
focus's rarity weight, its head noun among it. Otherwise the answer is refused with a stable
code:

* ``no_evidence``: nothing in scope matches the question well enough (the answerability model);
* ``type_mismatch``: the best sentences hold nothing of the asked type;
* ``focus_missing``: they hold the type, but not about what was asked;
* ``chain_incomplete``: the question needs a second fact (a bridge) and no retrieved sentence
  about the bridge states it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from . import terms as T
from .question import QuestionInfo

CODES = ("no_evidence", "type_mismatch", "focus_missing", "chain_incomplete")
# The share of a definite description's rarity weight a sentence must hold: all of it (on the
# XQuAD CALIBRATION half 0.99 refused 0.7 points more near misses than 0.5 for 0.3 more false
# refusals, both within the <= 5 % budget; bench/answers_checks.py).
FOCUS_MIN = 0.99
# A sentence failing a check still answers when the answerability model is this sure (its
# log-odds; answerability.MIN_SCORE is the bar for the others). On the XQuAD CALIBRATION half
# the checks alone are right about half the time (a "where" answered "in committee", a "who"
# answered "an attorney"), so as hard rules they cost 9 points of false refusals for 4 of near
# misses; as a higher bar, chosen with MIN_SCORE for the most near misses refused at <= 5 %
# false refusals (bench/answers_checks.py), they pay: D-161. SCDB_ANSWER_CHECK_MIN_SCORE
# overrides it (1e9: every check refuses).
CHECK_MIN_SCORE = 2.0
# (A hard rule for "when" without a date, whatever the score, refused 13 wrong answers for 4
# right ones on CALIBRATION but took false refusals to 5.6 %: not adopted.)
_TOKEN = re.compile(r"[\w'’.-]+")
_YEARISH = re.compile(r"\d{3,4}s?|\d{1,2}(?:st|nd|rd|th)|\d{1,2}:\d\d|\d{1,2}(?:am|pm)")
# "What year ...?" asks for a year: a month, a century or "the following spring" is a date
# that does not answer it ("Tesla died in January" for "What year did Tesla die?").
_YEAR = re.compile(r"\d{3,4}s?")
_ORDINALS = frozenset(
    """first second third fourth fifth sixth seventh eighth ninth tenth eleventh twelfth
    thirteenth fourteenth fifteenth sixteenth seventeenth eighteenth nineteenth twentieth
    twenty-first""".split()  # noqa: SIM905 (a word list reads better)
)
_DATE_WORDS = frozenset(
    """century centuries decade decades year years bc bce ad ce spring summer autumn fall
    winter dynasty era""".split()  # noqa: SIM905 (a word list reads better)
)
_OPENERS = frozenset(
    """the a an in on at by for from with during after before since as it this that these those
    its his her their he she they we there however although when while if although during
    according""".split()  # noqa: SIM905 (a word list reads better)
)
_KIND_WORDS = {
    "person": "person",
    "place": "place",
    "org": "organisation",
    "date": "date",
    "year": "year",
    "num": "number",
    "choice": "one of the two options",
}


@dataclass(frozen=True)
class Verdict:
    answers: bool
    code: str | None = None
    reason: str = ""


def _new_tokens(question: str, text: str) -> list[tuple[int, str]]:
    asked = {w.lower() for w in re.findall(r"\w+", question)}
    toks = _TOKEN.findall(text)
    return [(k, w) for k, w in enumerate(toks) if w.lower().strip(".'’") not in asked]


def has_type(info: QuestionInfo, text: str) -> bool:
    """Whether ``text`` holds something of the asked type the question does not already say."""
    kind = info.qtype
    if kind in ("yesno", "thing", "other"):
        return True
    if kind == "choice":
        return mentions_option(info, text)
    new = _new_tokens(info.text, text)
    if kind == "num":
        return any(
            any(c.isdigit() for c in w) or w.lower().strip(".") in T._NUMBER_WORDS for _, w in new
        )
    if kind == "year":
        return any(_YEAR.fullmatch(w.strip(".,;:()")) for _, w in new)
    if kind == "date":
        return any(
            _YEARISH.fullmatch(w.strip(".,"))
            or w.lower().strip(".,") in T._MONTHS | _DATE_WORDS | _ORDINALS
            for _, w in new
        )
    # a name: a capitalised word that is not a sentence opener like "The" or "In"
    return any(w[:1].isupper() and w.lower() not in _OPENERS for _, w in new)


def mentions_option(info: QuestionInfo, text: str) -> bool:
    stems = T.text_stems(text)
    for opt in info.options:
        words = [w for w in T.question_terms(opt)] or opt.lower().split()
        if words and T.weighted_coverage(words, stems) >= 0.5:
            return True
    return False


def focus_coverage(info: QuestionInfo, text: str) -> float:
    """Rarity-weighted share of the focus's terms in ``text`` (1.0 without a focus)."""
    if not info.focus_terms:
        return 1.0
    return T.weighted_coverage(list(info.focus_terms), T.text_stems(text))


def verdict(
    info: QuestionInfo, sentence: str, chain: Sequence[str] = (), focus_min: float = FOCUS_MIN
) -> Verdict:
    """Whether ``sentence`` (with the ``chain`` sentences it leads to) answers ``info``."""
    text = " ".join([sentence, *chain])
    if not has_type(info, text):
        what = _KIND_WORDS.get(info.qtype, info.qtype)
        return Verdict(
            False, "type_mismatch", f"{info.qtype} question: the evidence names no {what}"
        )
    cov = focus_coverage(info, text)
    if cov < focus_min:
        return Verdict(
            False,
            "focus_missing",
            f"the evidence does not state the asked {' '.join(info.focus_terms)!r}"
            f" (focus coverage {cov:.2f} < {focus_min:.2f})",
        )
    return Verdict(True)
