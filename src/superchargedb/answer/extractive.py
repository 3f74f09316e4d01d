"""The extractive synthesizer: always available, grounded by construction.

It takes the best-supported sentence of the localized evidence and, when it adds something, one
more from the same passage (citation precision); when another passage's best sentence scores
within SECOND_PASSAGE_MARGIN of the best, it is quoted and cited too (the two passages are too
close to tell which one holds the answer). Redundancy is removed; citations hold by construction.

``quote_best`` adds the localizer's choice to a model's answer when the model answered from
another sentence of the passages it cites (see its docstring).
"""

from __future__ import annotations

from collections.abc import Sequence

from . import terms as T
from .compose import Draft, Sentence
from .cover import supporting
from .localize import Candidate, Evidence, stems
from .question import QuestionInfo
from .support import Support

SECOND_SENTENCE_RATIO = 0.9  # a second sentence must score at least this share of the first
REDUNDANCY_JACCARD = 0.6
# On the XQuAD CALIBRATION half: citation recall +0.5 points for -1 point of precision (1.7 % of
# answers cite two passages); a wider margin costs more precision than it recovers.
SECOND_PASSAGE_MARGIN = 0.02


def _jaccard(a: str, b: str) -> float:
    sa, sb = stems(a), stems(b)
    return len(sa & sb) / max(1, len(sa | sb))


def extract(
    best: Candidate,
    evidence: Sequence[Evidence],
    info: QuestionInfo | None = None,
) -> Draft:
    """The quoted answer; with ``info``, also its supporting facts (``cover.py``)."""
    ev = next(e for e in evidence if e.n == best.n)
    chosen = [best]
    for c in sorted(ev.candidates, key=lambda c: -c.score):
        if c is best or len(chosen) >= 2:
            continue
        if c.score >= SECOND_SENTENCE_RATIO * best.score and _jaccard(c.text, best.text) < (
            REDUNDANCY_JACCARD
        ):
            chosen.append(c)
    chosen.sort(key=lambda c: c.start)  # keep the passage's own order
    others = [b for e in evidence if e.n != best.n and (b := e.best) is not None]
    runner = max(others, key=lambda c: c.score, default=None)
    if (
        runner is not None
        and runner.score >= best.score - SECOND_PASSAGE_MARGIN
        and all(_jaccard(runner.text, c.text) < REDUNDANCY_JACCARD for c in chosen)
    ):
        chosen.append(runner)
    if info is not None:
        chosen = supporting(info, evidence, best, chosen)
    draft = Draft()
    for c in chosen:
        # A verbatim quote of the passage it cites is entailed by it: supported by construction.
        draft.sentences.append(
            Sentence(c.text, [c.n], Support(True, 1.0), (c.start, c.end), quoted=True)
        )
    return draft


def quote_best(draft: Draft, evidence: Sequence[Evidence]) -> Candidate | None:
    """Append the best sentence of the passages a model's answer cites when none of the
    answer's sentences rests on it; return it (None when nothing was added).

    A model may answer from a sentence of the passage other than the one that best matches the
    question, and the system cannot tell which of the two is right, so it shows both: the
    model's sentence and, quoted after it, the passage's best sentence (verbatim, supported by
    construction). An answer that rests on the best sentence is left alone, and so is one whose
    best sentence holds nothing of the asked type (no number for "how many", no date for
    "when", ...): it cannot be the answer the model missed. Numbers: docs/answers.md.
    """
    cited = {n for s in draft.sentences for n in s.passages}
    pool = [c for e in evidence if e.n in cited for c in e.candidates]
    best = max(pool, key=lambda c: c.score, default=None)
    if best is None or not T.type_match(evidence[0].question, best.text):
        return None
    for s in draft.sentences:
        if s.spans.get(best.n, s.span) == (best.start, best.end):
            return None
        if best.n in s.passages and _jaccard(s.text, best.text) >= REDUNDANCY_JACCARD:
            return None  # the model restated it; a quote would repeat it
    span = (best.start, best.end)
    draft.sentences.append(
        Sentence(best.text, [best.n], Support(True, 1.0), span, {best.n: span}, quoted=True)
    )
    return best
