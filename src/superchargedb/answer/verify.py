"""Per-sentence support check: is an answer sentence supported by the passage(s) it cites?

    EntailmentChecker (Protocol)      check(sentence, cited, others) -> Support
    ├── LexicalDenseChecker           offline default ("lexical-dense")
    └── HttpNliChecker                a real NLI model behind HTTP ("http:<url>")

``LexicalDenseChecker`` combines dense similarity (MiniLM cosine between the sentence and the
best 1-2 sentence window of the cited passages) with lexical guards that similarity cannot see
(DECISIONS 36): numbers with their units, dates, names and identifiers must occur in the cited
text; polarity (negation cues, ``un-`` prefixes, direction words such as higher/lower) must
agree with the best window; enough of the sentence's content words must be covered; and no
other passage may support the sentence clearly better than the cited one (a wrong ``[n]``).
Sentences of a passage that look like instructions to the model ("ignore the previous
instructions ...") are never evidence, and a sentence that is itself such an instruction fails.

The lexical features live in ``superchargedb.answer.claims``-style helpers at the bottom of
this module (``analyse``). Thresholds are the module constants below; ``bench/support_check.py``
chose them on the TUNE split of ``tests/answer_cases.py`` and reports the TEST split separately.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np

from superchargedb.answer.sentences import sentence_texts
from superchargedb.errors import UnavailableError, ValidationError

__all__ = [
    "CHECKERS",
    "EntailmentChecker",
    "HttpNliChecker",
    "LexicalDenseChecker",
    "Support",
    "Thresholds",
    "make_checker",
    "register_checker",
]

# -- thresholds (chosen on the TUNE split; see bench/support_check.py) ------------------------
#: Below this cosine to the best cited window a sentence is unsupported whatever else holds.
#: Faithful paraphrases in TUNE score >= 0.55; merged or padded sentences fall to 0.45-0.6.
SIM_MIN = 0.45
#: Minimum share of the sentence's content stems found in the cited text.
COVERAGE_MIN = 0.5
#: Between SIM_MIN and SIM_STRONG the coverage must reach COVERAGE_STRONG instead.
SIM_STRONG = 0.6
COVERAGE_STRONG = 0.7
#: A sentence whose cited support passes every guard is still a wrong [n] when another passage
#: passes the guards too and beats the cited similarity by this margin.
WRONG_CITATION_MARGIN = 0.15
#: Above this similarity the other passages are not even embedded (latency).
SIM_CONFIDENT = 0.8
#: Sentences per passage that are embedded (the most lexically overlapping ones).
MAX_SENTENCES_PER_PASSAGE = 5


@dataclass(frozen=True)
class Thresholds:
    sim_min: float = SIM_MIN
    coverage_min: float = COVERAGE_MIN
    sim_strong: float = SIM_STRONG
    coverage_strong: float = COVERAGE_STRONG
    wrong_citation_margin: float = WRONG_CITATION_MARGIN
    sim_confident: float = SIM_CONFIDENT


@dataclass(frozen=True)
class Support:
    """``score`` is in [0, 1]: >= 0.5 when supported, < 0.5 otherwise. ``reasons`` names every
    failed guard (empty when supported)."""

    supported: bool
    score: float
    reasons: tuple[str, ...] = ()


@runtime_checkable
class EntailmentChecker(Protocol):
    def check(self, sentence: str, cited: Sequence[str], others: Sequence[str] = ()) -> Support:
        """``cited``: texts the sentence cites; ``others``: the other numbered passages."""


@dataclass
class _Passage:
    sentences: list[Features]
    vectors: np.ndarray  # (k, dim) unit rows for the embedded sentences
    kept: list[int]  # indices into ``sentences`` that were embedded
    joined: Features  # all (non-instruction) sentences together


@dataclass
class _Verdict:
    sim: float
    coverage: float
    failures: list[str]


class LexicalDenseChecker:
    """The offline default. Thread-safe; sentence embeddings are cached (LRU by text)."""

    def __init__(
        self, embedder: Any, *, thresholds: Thresholds | None = None, cache_size: int = 4096
    ) -> None:
        self.embedder = embedder
        self.t = thresholds or Thresholds()
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self._cache_size = cache_size
        self._lock = threading.Lock()

    # -- embeddings ------------------------------------------------------------------------
    def _vectors(self, texts: Sequence[str]) -> np.ndarray:
        """Unit rows for ``texts``, embedding only the uncached ones, in one batch."""
        with self._lock:
            missing = list(dict.fromkeys(t for t in texts if t not in self._cache))
        if missing:
            fresh = np.asarray(self.embedder.embed(missing), dtype=np.float32)
            with self._lock:
                for text, vec in zip(missing, fresh, strict=True):
                    self._cache[text] = vec
                while len(self._cache) > self._cache_size:
                    self._cache.popitem(last=False)
        with self._lock:
            rows = [self._cache.get(t) for t in texts]
        dim = next((r.shape[0] for r in rows if r is not None), 0)
        if any(r is None for r in rows):  # evicted meanwhile by another thread: embed again
            return np.asarray(self.embedder.embed(list(texts)), dtype=np.float32)
        return np.stack([r for r in rows if r is not None]) if rows else np.zeros((0, dim))

    def _passages(self, claim: Features, texts: Sequence[str]) -> list[_Passage]:
        """Analyse passages, pick the sentences worth embedding, embed them in one batch."""
        prepared: list[tuple[list[Features], list[int]]] = []
        wanted: list[str] = []
        for text in texts:
            sents = [claims.analyse(s) for s in sentence_texts(text)]
            sents = [s for s in sents if not s.instruction]
            order = sorted(
                range(len(sents)), key=lambda i: -len(claim.stems & sents[i].stems)
            )
            kept = sorted(order[:MAX_SENTENCES_PER_PASSAGE])
            prepared.append((sents, kept))
            wanted.extend(sents[i].text for i in kept)
        vecs = self._vectors(wanted)
        out, row = [], 0
        for sents, kept in prepared:
            out.append(
                _Passage(sents, vecs[row : row + len(kept)], kept, claims.merge(sents))
            )
            row += len(kept)
        return out

    # -- scoring ---------------------------------------------------------------------------
    def _windows(self, p: _Passage, q: np.ndarray) -> list[tuple[float, list[int]]]:
        """(cosine, sentence indices) for single sentences and adjacent embedded pairs; a
        pair's vector is the token-weighted mean of its sentences' (mean-pooling model)."""
        sims = p.vectors @ q if len(p.kept) else np.zeros(0)
        wins = [(float(s), [i]) for s, i in zip(sims, p.kept, strict=True)]
        for a in range(len(p.kept) - 1):
            i, j = p.kept[a], p.kept[a + 1]
            if j != i + 1:
                continue
            wi, wj = p.sentences[i].n_tokens, p.sentences[j].n_tokens
            v = p.vectors[a] * wi + p.vectors[a + 1] * wj
            v = v / max(float(np.linalg.norm(v)), 1e-12)
            wins.append((float(v @ q), [i, j]))
        return wins

    def _verdict(self, claim: Features, q: np.ndarray, passages: list[_Passage]) -> _Verdict:
        wins = [(s, p, idx) for p in passages for s, idx in self._windows(p, q)]
        if not wins:
            return _Verdict(0.0, 0.0, ["cited passage has no usable text"])
        sim, best_p, best_idx = max(wins, key=lambda w: w[0])
        window = claims.merge([best_p.sentences[i] for i in best_idx])
        evidence = claims.merge([p.joined for p in passages])
        failures = claims.guard_failures(claim, evidence, window)
        coverage = claims.coverage(claim, evidence)
        t = self.t
        if sim < t.sim_min:
            failures.append(f"low similarity {sim:.2f}")
        elif coverage < t.coverage_min or (sim < t.sim_strong and coverage < t.coverage_strong):
            missing = ", ".join(sorted(claim.stems - evidence.stems)[:4])
            failures.append(f"low coverage {coverage:.2f} (missing {missing})")
        return _Verdict(sim, coverage, failures)

    def check(self, sentence: str, cited: Sequence[str], others: Sequence[str] = ()) -> Support:
        claim = claims.analyse(claims.strip_markers(sentence))
        if not claim.text:
            return Support(False, 0.0, ("empty sentence",))
        if claim.instruction:
            return Support(False, 0.0, ("sentence contains instruction-like text",))
        if not cited:
            return Support(False, 0.0, ("no cited passage",))
        q = self._vectors([claim.text])[0]
        mine = self._verdict(claim, q, self._passages(claim, cited))
        failures = list(mine.failures)
        if others and (failures or mine.sim < self.t.sim_confident):
            better = self._better_other(claim, q, others, mine)
            if better is not None:
                k, v = better
                note = (
                    f"better supported by others[{k}] ({v.sim:.2f}) "
                    f"than by the cited passage ({mine.sim:.2f})"
                )
                if failures or v.sim - mine.sim >= self.t.wrong_citation_margin:
                    failures.append(note)
        blend = max(0.0, min(1.0, 0.6 * mine.sim + 0.4 * mine.coverage))
        score = 0.5 + 0.5 * blend if not failures else 0.499 * blend
        return Support(not failures, round(score, 4), tuple(failures))

    def _better_other(
        self, claim: Features, q: np.ndarray, others: Sequence[str], mine: _Verdict
    ) -> tuple[int, _Verdict] | None:
        best: tuple[int, _Verdict] | None = None
        for k, passage in enumerate(self._passages(claim, others)):
            v = self._verdict(claim, q, [passage])
            if v.failures or v.sim <= mine.sim:
                continue
            if best is None or v.sim > best[1].sim:
                best = (k, v)
        return best


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
        hypothesis = claims.strip_markers(sentence)
        if not hypothesis or not cited:
            return Support(False, 0.0, ("empty sentence" if not hypothesis else "no cited passage",))
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
