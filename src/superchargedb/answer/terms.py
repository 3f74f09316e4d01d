"""Question terms, how rare each one is, and what kind of answer the question asks for.

Localization and answerability compare a question with sentences and passages term by term. A
term's weight is its rarity: matching "Cantor" says more than matching "theory". The weight must
not come from the corpus (document frequencies span tenants, and a refusal decided on them would
leak what other tenants hold), so it comes from a fixed, public table: the bundled
bert-base-uncased WordPiece vocabulary, whose ids after the special and single-character
entries (1996 = "the", 1997 = "of", ...) follow corpus frequency. By Zipf's law a term's inverse
document frequency grows like the log of its frequency rank, so ``weight = log(id - 1990)``; a
word outside the vocabulary (split into pieces) is rarer than any in it:
``log(30522 - 1990) + log(pieces)``.
"""

from __future__ import annotations

import functools
import math
import re

from ..query_terms import query_terms

__all__ = [
    "QUESTION_WORDS",
    "answer_type",
    "question_terms",
    "text_stems",
    "type_match",
    "weight",
    "weighted_coverage",
]

#: Words that say what is asked, not what about: never evidence that a sentence holds the answer.
QUESTION_WORDS = frozenset(
    """what which who whom whose when where why how many much did does do was were is are has
    have had can could would should called name named type kind one ones""".split()  # noqa: SIM905 (a word list reads better)
)
STEM = 5  # terms match on their first 5 characters (crude, fast stemming)
_WORD = re.compile(r"\w+", re.UNICODE)
_FIRST_RANKED_ID = 1996  # "the": the vocabulary is frequency-ordered from here on
_VOCAB_SIZE = 30522


def stem(term: str) -> str:
    return term[:STEM]


def question_terms(question: str) -> list[str]:
    """The question's content terms (lower case, distinct, in order): no stopwords, no question
    words, no single characters."""
    return [t for t in query_terms(question) if len(t) > 1 and t not in QUESTION_WORDS]


@functools.lru_cache(maxsize=8192)
def text_stems(text: str) -> frozenset[str]:
    """Stems of every word of ``text`` (not capped like a search query's terms). Cached: the
    checks and the supporting facts ask for the same passages' stems many times per answer."""
    return frozenset(stem(t) for t in _WORD.findall(text.lower()) if len(t) > 1)


@functools.lru_cache(maxsize=1)
def _tokenizer() -> tuple[dict[str, int], object]:
    from tokenizers import Tokenizer

    from ..models.embedder import BUNDLED_TOKENIZER

    tok = Tokenizer.from_file(str(BUNDLED_TOKENIZER))
    tok.no_padding()
    tok.no_truncation()
    return tok.get_vocab(), tok


@functools.lru_cache(maxsize=65536)
def weight(term: str) -> float:
    """The rarity of a lower-case term (about 2 for "the", about 10 for "cantor")."""
    vocab, tok = _tokenizer()
    i = vocab.get(term)
    if i is not None and i >= _FIRST_RANKED_ID:
        return math.log(i - _FIRST_RANKED_ID + 6)
    pieces = len(tok.encode(term, add_special_tokens=False).ids)  # type: ignore[attr-defined]
    return math.log(_VOCAB_SIZE - _FIRST_RANKED_ID + 6) + math.log(max(1, pieces))


def weighted_coverage(terms: list[str], stems: frozenset[str], weighted: bool = True) -> float:
    """Share of the terms (by weight, or by count) whose stem occurs in ``stems``."""
    ws = [weight(t) if weighted else 1.0 for t in terms]
    total = sum(ws)
    if not total:
        return 0.0
    return sum(w for t, w in zip(terms, ws, strict=True) if stem(t) in stems) / total


def missing_weight(terms: list[str], stems: frozenset[str]) -> float:
    """The weight of the rarest term whose stem is absent from ``stems`` (0 when none is)."""
    return max((weight(t) for t in terms if stem(t) not in stems), default=0.0)


# -- answer types ---------------------------------------------------------------------------
_NUM_Q = re.compile(
    r"\bhow (?:many|much|long|old|far|large|big|tall|high|fast)\b"
    r"|\bwhat (?:percentage|percent|number|amount|proportion)\b"
)
_DATE_Q = re.compile(
    r"\b(?:when|what year|which year|what century|what decade|what date|what month|what day)\b"
)
_PERSON_Q = re.compile(r"\b(?:who|whom|whose)\b")
_PLACE_Q = re.compile(r"\bwhere\b")
_NUMBER_WORDS = frozenset(
    """one two three four five six seven eight nine ten eleven twelve twenty thirty forty fifty
    hundred thousand million billion dozen half third quarter""".split()  # noqa: SIM905 (a word list reads better)
)
_MONTHS = frozenset(
    """january february march april may june july august september october november
    december""".split()  # noqa: SIM905 (a word list reads better)
)
_TOKEN = re.compile(r"[\w'’.-]+")
_YEARISH = re.compile(r"\d{3,4}s?|\d{1,2}(?:st|nd|rd|th)")


def answer_type(question: str) -> str:
    """``num``, ``date``, ``person``, ``place`` or ``other``."""
    q = question.lower()
    if _NUM_Q.search(q):
        return "num"
    if _DATE_Q.search(q):
        return "date"
    if _PERSON_Q.search(q):
        return "person"
    return "place" if _PLACE_Q.search(q) else "other"


def type_match(question: str, sentence: str, kind: str | None = None) -> bool:
    """Whether the sentence holds something of the asked type that the question does not
    already say: a number, a date, a capitalised name. Always true for other questions."""
    kind = kind or answer_type(question)
    if kind == "other":
        return True
    asked = {w.lower() for w in _WORD.findall(question)}
    toks = _TOKEN.findall(sentence)
    new = [(k, w) for k, w in enumerate(toks) if w.lower().strip(".") not in asked]
    if kind == "num":
        return any(any(c.isdigit() for c in w) or w.lower() in _NUMBER_WORDS for _, w in new)
    if kind == "date":
        return any(
            _YEARISH.fullmatch(w.strip("."))
            or w.lower().strip(".") in _MONTHS | {"century", "decade"}
            for _, w in new
        )
    # a person or a place: a capitalised word that does not open the sentence
    return any(w[:1].isupper() and k > 0 for k, w in new)
