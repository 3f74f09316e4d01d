"""Is the question answerable from the evidence? Decided by the system, never the model (D 34).

Signals: the best question-to-sentence cosine, the share of the question's content terms the
best sentence covers, and whether any sentence clears both. RRF scores are not used (they only
reflect rank). The thresholds are calibrated by ``bench/answers.py --calibrate`` on XQuAD
articles held apart from the ones reported on (DECISIONS Part 4); see docs/answers.md.
"""

from __future__ import annotations

from dataclasses import dataclass

from .localize import Candidate, Evidence

# Calibrated on the CALIBRATION half of XQuAD articles (bench/answers.py --calibrate: maximize
# out-of-scope refusals with at most 4 % false refusals); reported on the other half.
COS_STRONG = 0.51  # answerable on similarity alone
COS_MIN = 0.34  # below this never answerable
COVERAGE_MIN = 0.4  # between COS_MIN and COS_STRONG the sentence must cover this share


@dataclass(frozen=True)
class Decision:
    answerable: bool
    best: Candidate | None
    reason: str

    def signals(self) -> dict[str, float]:
        if self.best is None:
            return {"best_cos": 0.0, "best_coverage": 0.0}
        return {"best_cos": round(self.best.cos, 4), "best_coverage": round(self.best.coverage, 4)}


def decide(
    evidence: list[Evidence],
    cos_strong: float = COS_STRONG,
    cos_min: float = COS_MIN,
    coverage_min: float = COVERAGE_MIN,
) -> Decision:
    cands = [c for ev in evidence for c in ev.candidates]
    if not cands:
        return Decision(False, None, "no evidence in scope")
    ok = [
        c for c in cands if c.cos >= cos_strong or (c.cos >= cos_min and c.coverage >= coverage_min)
    ]
    best = max(ok or cands, key=lambda c: c.score)
    if not ok:
        return Decision(
            False,
            best,
            f"best sentence cos {best.cos:.2f}, coverage {best.coverage:.2f} below thresholds",
        )
    return Decision(True, best, f"best sentence cos {best.cos:.2f}, coverage {best.coverage:.2f}")
