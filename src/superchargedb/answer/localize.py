"""Localize: narrow each top hit to the sentence(s) that best answer the question (D-38).

Each candidate sentence is scored by the cosine between the question and the sentence, plus the
rarity-weighted share of the question's content terms it contains (``terms.py``), plus small
priors for its passage's hybrid rank and for the share of the question's terms anywhere in its
passage. The best span of each hit is pinned to a Locator of the hit's kind: a sub-``char_span``
for text (relative to the source document), a sub-``line_range`` for code and logs, and the
Unit's own ``bbox`` (+ page) or ``time_range`` (+ shot) for page regions, utterances and shots.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..locate_words import narrow
from ..query_terms import query_terms
from . import terms as T
from .sentences import split_sentences

# Chosen on the CALIBRATION half of XQuAD (bench/answers.py --calibrate prints the grid): the
# share of answerable questions whose best sentence lies in the gold paragraph went from 0.955
# (cosine + 0.3 x unweighted coverage + 0.1 / rank) to 0.966.
COVERAGE_WEIGHT = 0.5  # x rarity-weighted coverage of the question's terms by the sentence
RANK_PRIOR = 0.1  # / the passage's hybrid rank: breaks near-ties between sibling paragraphs
PASSAGE_WEIGHT = 0.1  # x rarity-weighted coverage by the whole passage: context for the sentence
MAX_SENTENCES = 24  # per hit; longer Units keep their most query-overlapping sentences
# A model sentence's citation is pinned where its answer lies: the localizer's score plus this x
# the rarity-weighted share of the sentence's answer terms (its content terms the question
# lacks) in the candidate. On the CALIBRATION half's local-model answers, spans holding the gold
# answer went 30 -> 31 of 34 with any weight in 0.25..2 (the others answer something else); the
# top of that range, because a claim must be pinned to the sentence holding it even when another
# one matches the question far better (localizer scores differ by up to ~1). At 0.5 and 2 the
# recorded local answers of both samples get the same pins (167 of 167).
ANSWER_TERMS_WEIGHT = 2.0


@dataclass
class Candidate:
    """One sentence of one hit."""

    n: int  # the hit's passage number [n], 1-based
    start: int  # span inside the Unit's text
    end: int
    text: str
    cos: float
    coverage: float  # share of the question's content terms in the sentence
    wcoverage: float = 0.0  # the same weighted by rarity
    passage_wcoverage: float = 0.0  # the same over the whole passage

    @property
    def score(self) -> float:
        return (
            self.cos
            + COVERAGE_WEIGHT * self.wcoverage
            + RANK_PRIOR / self.n
            + PASSAGE_WEIGHT * self.passage_wcoverage
        )


@dataclass
class Evidence:
    n: int
    hit: dict[str, Any]
    candidates: list[Candidate] = field(default_factory=list)
    question: str = ""
    missing_weight: float = 0.0  # rarity of the rarest question term absent from the passage
    words: list[dict[str, Any]] | None = None  # the hit's word table (locate_words.attach)

    @property
    def best(self) -> Candidate | None:
        return max(self.candidates, key=lambda c: c.score, default=None)


def sentence_span(ev: Evidence, sentence: str) -> tuple[int, int] | None:
    """The span of ``ev``'s passage that a (model) sentence citing it rests on.

    The localizer's best sentence answers the question; a model may have answered from another
    sentence of the passage (its answer: "in 1763" where the best sentence says "1756"). The
    sentence's terms that the question lacks are that answer, so the span follows them; with
    none of them anywhere, this is the localizer's best.
    """
    if not ev.candidates:
        return None
    asked = T.text_stems(ev.question)
    answer = [t for t in T.question_terms(sentence) if T.stem(t) not in asked]
    best = max(
        ev.candidates,
        key=lambda c: (
            c.score + ANSWER_TERMS_WEIGHT * T.weighted_coverage(answer, T.text_stems(c.text))
        ),
    )
    return best.start, best.end


def stems(text: str) -> set[str]:
    """Crude, fast stems: lower-cased word prefixes (5 chars) without stopwords."""
    return {t[:5] for t in query_terms(text) if len(t) > 1}


def pin_locator(
    hit: dict[str, Any], start: int, end: int, words: list[dict[str, Any]] | None = None
) -> dict[str, Any] | None:
    """The Locator of the span ``[start, end)`` of a hit's text (narrowed to its words' times or
    boxes when the Unit has a word table; D-173, D-211)."""
    loc = hit.get("locator")
    text = hit["text"]
    kind = loc.get("kind") if loc else None
    if kind in ("bbox", "time_range") and loc and words:
        return narrow(loc, words, start, end)
    if kind in ("bbox", "time_range"):
        return dict(loc) if loc else None
    if kind == "line_range" or hit.get("modality") in ("code", "log"):
        base = loc["start"] if kind == "line_range" and loc else 1
        first = base + text.count("\n", 0, start)
        last = base + text.count("\n", 0, max(start, end - 1))
        return {"kind": "line_range", "start": first, "end": last}
    base = loc["start"] if kind == "char_span" and loc else 0
    return {"kind": "char_span", "start": base + start, "end": base + end}


class Localizer:
    """Scores sentences with the real embedder; sentence vectors are cached per text."""

    def __init__(self, embedder: Any, cache_size: int = 8192) -> None:
        self.embedder = embedder
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self._size = cache_size
        self._lock = threading.Lock()

    def _vectors(self, texts: Sequence[str]) -> np.ndarray:
        with self._lock:
            missing = list(dict.fromkeys(t for t in texts if t not in self._cache))
        if missing:
            vecs = self.embedder.embed(missing)
            with self._lock:
                for t, v in zip(missing, vecs, strict=True):
                    # A copy: a row view would keep its whole batch alive while cached.
                    self._cache[t] = np.array(v, dtype=np.float32)
                while len(self._cache) > self._size:
                    self._cache.popitem(last=False)
        with self._lock:
            for t in texts:
                if t in self._cache:
                    self._cache.move_to_end(t)
            return np.stack([self._cache[t] for t in texts])

    def localize(self, question: str, hits: Sequence[dict[str, Any]]) -> list[Evidence]:
        terms = T.question_terms(question)
        q_vec = np.asarray(self.embedder.embed_query(question), dtype=np.float32)
        evidence: list[Evidence] = []
        texts: list[str] = []
        for n, hit in enumerate(hits, start=1):
            whole = T.text_stems(hit["text"])
            ev = Evidence(n, hit, question=question, missing_weight=T.missing_weight(terms, whole))
            p_wcov = T.weighted_coverage(terms, whole)
            spans = split_sentences(hit["text"]) or [(0, len(hit["text"]))]
            if len(spans) > MAX_SENTENCES:
                spans = sorted(
                    spans,
                    key=lambda s: (
                        -T.weighted_coverage(terms, T.text_stems(hit["text"][s[0] : s[1]]))
                    ),
                )[:MAX_SENTENCES]
                spans.sort()
            for a, b in spans:
                raw = hit["text"][a:b].lstrip()
                if raw.startswith("#") and "\n" not in raw.strip():
                    continue  # a Markdown heading names a section; it states no fact
                sent = _clean(raw)
                if not sent:
                    continue
                ss = T.text_stems(sent)
                cov = T.weighted_coverage(terms, ss, weighted=False)
                wcov = T.weighted_coverage(terms, ss)
                ev.candidates.append(Candidate(n, a, b, sent, 0.0, cov, wcov, p_wcov))
                texts.append(sent)
            evidence.append(ev)
        if texts:
            cos = self._vectors(texts) @ q_vec
            i = 0
            for ev in evidence:
                for c in ev.candidates:
                    c.cos = float(cos[i])
                    i += 1
        return evidence


_WS = re.compile(r"\s+")


def _clean(s: str) -> str:
    """One line of text: Markdown heading marks and runs of whitespace collapsed."""
    return _WS.sub(" ", s.lstrip("#").strip())
