"""Pick the sentence an answer rests on: the best-scoring one that answers (D-161).

The localizer's best sentence matches the question best; it may still not answer it (the
question's topic without its fact: "Brazil is the second-largest global producer of soybeans"
for the second largest oil producer). Candidates within ``MARGIN`` of the best score are
checked in score order (``checks.verdict``); the first that answers wins. When none does, the
answer is refused with the best sentence's verdict (its code and reason).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .checks import FOCUS_MIN, Verdict, verdict
from .localize import Candidate, Evidence
from .question import QuestionInfo

# How far below the best localizer score a sentence that answers may lie and still be the
# answer. On the XQuAD CALIBRATION half 0.1 raised answers containing the gold answer by 1.6
# points and lowered near misses refused by 1 (a near miss always has a sentence that passes):
# off by default (bench/answers_checks.py).
MARGIN = 0.0


@dataclass(frozen=True)
class Pick:
    candidate: Candidate | None  # None: refuse with ``verdict``
    verdict: Verdict


def ranked(evidence: Sequence[Evidence]) -> list[Candidate]:
    return sorted((c for ev in evidence for c in ev.candidates), key=lambda c: -c.score)


def choose(
    info: QuestionInfo,
    evidence: Sequence[Evidence],
    best: Candidate,
    margin: float = MARGIN,
    focus_min: float = FOCUS_MIN,
) -> Pick:
    first: Verdict | None = None
    for c in ranked(evidence):
        if c.score < best.score - margin:
            break
        v = verdict(info, c.text, focus_min=focus_min)
        if v.answers:
            return Pick(c, v)
        first = first or v
    return Pick(None, first or verdict(info, best.text, focus_min=focus_min))
