"""Per-sentence support check: is an answer sentence supported by the passage(s) it cites?

    EntailmentChecker (Protocol)      check(sentence, cited, others) -> Support
    ├── LexicalDenseChecker           offline default ("lexical-dense")
    └── HttpNliChecker                a real NLI model behind HTTP ("http:<url>")

``LexicalDenseChecker`` combines dense similarity (cosine between the sentence and the best
window of one or two cited sentences) with lexical guards that similarity cannot see
(D-36):

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

The claim features live in ``claims.py`` (word lists in ``lexicon.py``), the guards in
``guards.py``, the result type and Protocol in ``support.py``, the HTTP checker in
``nli_http.py``; this module keeps the dense checker, its thresholds and the registry, and
re-exports the public names so ``from superchargedb.answer.verify import ...`` keeps working.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from superchargedb.answer.sentences import sentence_texts
from superchargedb.errors import ValidationError

from .claims import Features, analyse, coverage, merge, strip_markers
from .guards import Evidence, clause_coverage, guard_failures
from .nli_http import HttpNliChecker
from .support import EntailmentChecker, Support

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


@dataclass(frozen=True)
class Thresholds:
    sim_min: float = SIM_MIN
    coverage_min: float = COVERAGE_MIN
    sim_strong: float = SIM_STRONG
    coverage_strong: float = COVERAGE_STRONG
    clause_coverage_min: float = CLAUSE_COVERAGE_MIN
    wrong_citation_margin: float = WRONG_CITATION_MARGIN
    sim_confident: float = SIM_CONFIDENT


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
                    # A copy: a row view would keep its whole batch alive while cached.
                    self._cache[text] = vec.copy()
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
